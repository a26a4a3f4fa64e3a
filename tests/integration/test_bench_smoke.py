"""A tiny ``openum bench`` run end to end (PERFORMANCE.md method; no assertion on any speed).

The bench chooses its own free ports for every run (resolver, TCP, LBT-RU, LBT-RM, peers), so it never
meets another openum process.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from openum._source import AVAILABLE_TRANSPORTS
from openum.cli._bench._harness import TRANSPORTS, Bench, Run, Settings
from tests.integration.pubsub import ROOT, child_env

INSTALLED_PEERS = [
    (name, kind)
    for name, module, kinds in (("pyzmq", "zmq", ("tcp", "ipc")), ("zenoh", "zenoh", ("tcp",)))
    if importlib.util.find_spec(module) is not None
    for kind in kinds
]


def run_bench(*args: str, timeout: float = 280) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "openum", "bench", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=child_env(),
        cwd=ROOT,
        check=False,
    )


@pytest.mark.slow
def test_a_tiny_bench_run_reports_every_system_with_ratios(tmp_path: Path) -> None:
    out_file = tmp_path / "bench.json"
    done = run_bench(
        "--count",
        "20000",
        "--repeat",
        "1",
        "--latency-repeat",
        "1",
        "--sizes",
        "64",
        "--no-memory",
        "--json",
        str(out_file),
        # keep the tiny run tiny on every build (the rate search probes each UDP transport)
        "--pings",
        "500",
        "--warmup",
        "50",
        "--rate-steps",
        "1",
        "--rate-duration",
        "0.5",
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    doc: dict[str, Any] = json.loads(out_file.read_text())

    machine = doc["machine"]
    for key in ("cpu_count", "cpu_model", "python", "openum", "pyzmq", "zenoh", "date"):
        assert key in machine, key
    assert machine["cpu_count"] >= 1

    assert set(doc["available_transports"]) == set(AVAILABLE_TRANSPORTS)
    assert set(doc["not_available"]) == set(TRANSPORTS) - set(AVAILABLE_TRANSPORTS)

    runs = doc["runs"]
    assert all(r["ok"] for r in runs), [r.get("error") for r in runs if not r["ok"]]
    measured = {(r["system"], r["transport"], r["kind"]) for r in runs}
    for system in [("openum", t) for t in AVAILABLE_TRANSPORTS] + INSTALLED_PEERS:
        for kind in ("throughput", "latency", "sweep"):
            if system == ("openum", "lbtsmx") and kind == "latency":
                continue  # LBT-SMX receivers only busy-wait: its round trips are measured with --busy
            assert (*system, kind) in measured, (system, kind)
    for r in runs:
        if r["kind"] == "throughput":
            assert r["result"]["received"] == 20000
            assert r["result"]["gaps"] == r["result"]["behind"] == 0
        if r["kind"] == "latency":
            assert r["result"]["count"] == 500
            assert {"p50", "p90", "p99", "p999", "max"} <= set(r["result"]["rtt_us"])

    rows = {(row["system"], row["transport"]): row for row in doc["summary"]["rows"]}
    tcp = rows[("openum", "tcp")]
    assert tcp["msgs_per_sec"] > 0
    if ("pyzmq", "tcp") in INSTALLED_PEERS:
        assert tcp["throughput_ratio_pyzmq_tcp"] > 0
        assert tcp["rtt_p50_ratio"] > 0
        assert tcp["rtt_p99_ratio"] > 0
    for peer in INSTALLED_PEERS:
        assert rows[peer]["msgs_per_sec"] > 0
        assert rows[peer]["rtt_us"]["p50"] > 0
    for transport in set(AVAILABLE_TRANSPORTS) & {"lbtru", "lbtrm"}:
        assert transport in doc["summary"]["max_rate"]

    statuses = {t["status"] for t in doc["targets"]}
    assert statuses <= {"PASS", "FAIL", "N/A"}
    names = " ".join(t["target"] for t in doc["targets"])
    assert "throughput, TCP >= 1.2 x pyzmq tcp" in names
    assert "RTT p50, TCP <= 1.0 x pyzmq tcp" in names
    assert "throughput, LBT-SMX >= 5.0 x pyzmq ipc" in names and "RTT p50, LBT-IPC pend" in names

    report = done.stdout
    assert "| system | transport | msgs/s |" in report
    assert "## Targets (PERFORMANCE.md)" in report
    for t in set(TRANSPORTS) - set(AVAILABLE_TRANSPORTS):
        assert f"openum {t}: not available in this build" in report


def test_a_missing_peer_is_reported_not_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any, **kwargs: Any) -> Any:
        return None if name == "zenoh" else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    bench = Bench(Settings(transports=["tcp", "lbtsmx"], peers=["pyzmq", "zenoh"]), ("tcp",), lambda _: None)
    try:
        assert bench.missing_peers["zenoh"] == "peer zenoh not installed: pip install eclipse-zenoh"
        # Aeron IPC, the shared-memory peer, is reported (not silently skipped) where pyaeron is missing.
        assert ("aeron" in bench.missing_peers) is (real("pyaeron") is None)
        assert bench.not_available == ["lbtsmx"]
        labels = [s.label for s in bench.systems]
        assert "zenoh tcp" not in labels
        assert "openum tcp" in labels
    finally:
        Path(bench.tmp).rmdir()


def test_bench_rejects_an_unknown_transport_or_peer() -> None:
    for args in (["--transports", "tcp,carrier-pigeon"], ["--peers", "nats"], ["--only", "vibes"]):
        done = run_bench(*args, timeout=60)
        assert done.returncode == 2, done.stderr
        assert "unknown" in done.stderr


def test_a_round_trip_run_slow_throughout_is_named_in_the_report() -> None:
    # Five round-trip runs of one system; the fourth ran at another speed from its first round trip
    # (its minimum 1.7 x the others'): named, and still in the medians.
    from openum.cli._bench._report import markdown

    bench = Bench(
        Settings(transports=["tcp"], peers=[], benchmarks=["latency"], latency_repeat=5),
        ("tcp",),
        lambda _: None,
    )
    try:
        system = bench.openum[0]
        for k, low in enumerate((16.0, 15.5, 16.2, 27.4, 16.4)):
            run = Run("latency", system, 64, k, ok=True)
            run.extra["busy"] = False
            run.result = {
                "count": 100,
                "rtt_us": {
                    "min": low,
                    "p50": low + 2,
                    "p90": low + 4,
                    "p99": low + 30,
                    "p999": low + 90,
                    "max": low + 900,
                },
            }
            bench.runs.append(run)
        summary = bench.summary()
        assert summary["latency_slow_runs"] == [
            {
                "system": "openum",
                "transport": "tcp",
                "busy": False,
                "repeat": 3,
                "min": 27.4,
                "p50": 29.4,
                "p99": 57.4,
                "median_min": 16.2,
            }
        ]
        row = summary["rows"][0]
        assert row["rtt_us"]["p50"] == 18.2  # the median of all five, the slow run included
        doc = {
            "machine": bench.machine(),
            "settings": {**vars(bench.s)},
            "summary": summary,
            "targets": bench.targets(summary),
            "runs": [r.as_dict() for r in bench.runs],
            "not_available": [],
            "missing_peers": {},
            "notes": [],
            "total_seconds": 1.0,
        }
        report = markdown(doc)
        assert "Medians of 3 throughput and 5 round-trip runs" in report
        assert "Round-trip runs slow throughout" in report
        assert "openum tcp #4 (min 27.4 us against 16.2, p50 29.4, p99 57.4)" in report

        # Fewer than three runs: no median to stand out from, nothing named.
        del bench.runs[2:]
        assert bench.summary()["latency_slow_runs"] == []
    finally:
        Path(bench.tmp).rmdir()


def _rate_search(cap: float, loses_above: float, steps: int = 8) -> dict[str, Any]:
    """max_rate over a model transport: the publisher sends at most ``cap`` msgs/s, and the receiver
    loses messages when they come faster than ``loses_above``."""
    bench = Bench(Settings(transports=["lbtrm"], peers=[], rate_steps=steps), ("lbtrm",), lambda _: None)

    def throughput(kind: str, system: Any, size: int, count: int, step: int, **kw: Any) -> Run:
        achieved = min(kw["rate"], cap)
        run = Run(kind, system, size, step, ok=True, publisher={"msgs_per_sec": achieved})
        run.extra["lost"] = 0.01 if achieved > loses_above else 0.0
        return run

    try:
        bench.throughput = throughput  # type: ignore[method-assign]
        bench.max_rate(bench.openum[0])
        return bench.rate_results["lbtrm"]
    finally:
        Path(bench.tmp).rmdir()


def test_the_rate_search_counts_a_lossless_publisher_bound_probe_as_sustained() -> None:
    # 100 k, 200 k, ... 1.6 M: the publisher reaches only 1.3 M, losing nothing: 1.3 M held.
    found = _rate_search(cap=1_300_000, loses_above=float("inf"))
    assert found["max_sustained"] == 1_300_000
    assert "publisher reached only 1,300,000 msgs/s, with zero loss" in found["probes"][4]["why"]


def test_the_rate_search_stays_below_a_rate_that_lost_messages() -> None:
    found = _rate_search(cap=float("inf"), loses_above=500_000)
    assert 400_000 <= found["max_sustained"] <= 500_000
    assert all(p["rate"] <= 500_000 for p in found["probes"] if p["sustained"])
