"""``openum ping`` / ``openum pong`` as real processes (CLI.md "Latency"; no timed assertions).

Each test has its own resolver port and TCP port range, so it never meets another openum process.
"""

from __future__ import annotations

import signal
from typing import Any

import pytest

from openum.cli._latency import percentiles
from tests.integration.pubsub import Ports, Processes, last_json

RTT_KEYS = {"min", "p50", "p90", "p99", "p999", "max"}


@pytest.fixture
def ports() -> Ports:
    return Ports.allocate()


def ping_pong(
    procs: Processes, ports: Ports, topics: tuple[str, str], ping_args: list[str], pong_args: list[str]
) -> tuple[int, dict[str, Any], str, dict[str, Any]]:
    pong = procs.openum("pong", *topics, "--json", *pong_args, *ports.argv())
    ping = procs.openum("ping", *topics, "--json", *ping_args, *ports.argv())
    out, err = ping.communicate(timeout=120)
    pong.send_signal(signal.SIGTERM)
    pong_out, pong_err = pong.communicate(timeout=30)
    assert pong.returncode == 0, pong_err
    return ping.returncode, last_json(out), err, last_json(pong_out)


def check_rtt(summary: dict[str, Any], count: int) -> None:
    assert summary["count"] == count
    rtt = summary["rtt_us"]
    assert set(rtt) >= RTT_KEYS
    ordered = [rtt[k] for k in ("min", "p50", "p90", "p99", "p999", "max")]
    assert ordered == sorted(ordered)
    assert ordered[0] > 0


@pytest.mark.slow
def test_ping_measures_count_round_trips_after_the_warmup(ports: Ports, procs: Processes) -> None:
    rc, summary, err, pong = ping_pong(
        procs, ports, ("lat/ping", "lat/pong"), ["--count", "300", "--warmup", "50", "--size", "100"], []
    )
    assert rc == 0, err
    check_rtt(summary, 300)
    assert summary["warmup"] == 50
    assert summary["size"] == 100
    assert summary["mode"] == "callback"
    assert summary["transport"] == "tcp"
    assert summary["received"] >= 350
    assert summary["source"].startswith("TCP:127.0.0.1:")
    for key in ("sent", "bytes", "seconds", "resends", "stale"):
        assert key in summary
    # Every ping that reached the pong was echoed (the first ones may go out before it joined).
    assert pong["echoed"] >= 350
    assert pong["blocked"] == 0
    assert pong["pending"] == 0


@pytest.mark.slow
@pytest.mark.parametrize(
    ("ping_args", "pong_args", "mode"),
    [(["--mode", "thread"], [], "thread"), (["--busy"], ["--busy"], "busy")],
    ids=["thread", "busy"],
)
def test_ping_modes_thread_and_busy(
    ports: Ports, procs: Processes, ping_args: list[str], pong_args: list[str], mode: str
) -> None:
    rc, summary, err, _pong = ping_pong(
        procs,
        ports,
        ("lat/m/ping", "lat/m/pong"),
        ["--count", "200", "--warmup", "20", *ping_args],
        pong_args,
    )
    assert rc == 0, err
    check_rtt(summary, 200)
    assert summary["mode"] == mode


@pytest.mark.slow
def test_ping_without_a_pong_fails_after_the_timeout(ports: Ports, procs: Processes) -> None:
    ping = procs.openum(
        "ping", "lat/alone/ping", "lat/alone/pong", "--count", "5", "--timeout", "1", "--json", *ports.argv()
    )
    out, err = ping.communicate(timeout=60)
    assert ping.returncode == 1
    summary = last_json(out)
    assert summary["count"] == 0
    assert summary["received"] == 0
    assert summary["resends"] >= 1  # warm-up pings are resent until the first echo
    assert "0 of 5 round trips" in err


@pytest.mark.slow
def test_ping_main_thread_sleeps_through_the_measured_round_trips(ports: Ports, procs: Processes) -> None:
    # Callback mode: after the hand-off the main thread waits for the end without waking up (it would wake
    # every 50 ms if it polled; 5,000 round trips take longer than that).
    rc, summary, err, _pong = ping_pong(
        procs, ports, ("lat/q/ping", "lat/q/pong"), ["--count", "5000", "--warmup", "100"], []
    )
    assert rc == 0, err
    check_rtt(summary, 5000)
    assert summary["main_wakeups"] == 0
    assert summary["received"] >= 5100  # every warm-up and measured echo


@pytest.mark.slow
def test_ping_times_out_when_echoes_stop_after_the_handoff(ports: Ports, procs: Processes) -> None:
    # The pong stops after 300 echoes, past the warm-up: the sleeping main thread notices the silence.
    rc, summary, err, pong = ping_pong(
        procs,
        ports,
        ("lat/t/ping", "lat/t/pong"),
        ["--count", "1000", "--warmup", "50", "--timeout", "1"],
        ["--count", "300"],
    )
    assert rc == 1
    assert pong["echoed"] >= 300  # (a few more may go out while it closes)
    assert 0 < summary["count"] < 1000
    assert summary["main_wakeups"] >= 1
    assert "of 1000 round trips measured" in err


@pytest.mark.slow
def test_ping_sigterm_wakes_the_sleeping_main_thread(ports: Ports, procs: Processes) -> None:
    # Echoes stop after the hand-off and the timeout is far away: SIGTERM alone must end the run.
    pong = procs.openum("pong", "lat/s/ping", "lat/s/pong", "--count", "200", "--json", *ports.argv())
    ping = procs.openum(
        "ping",
        "lat/s/ping",
        "lat/s/pong",
        "--count",
        "1000",
        "--warmup",
        "50",
        "--timeout",
        "600",
        "--json",
        *ports.argv(),
    )
    pong_out, pong_err = pong.communicate(timeout=120)  # the pong leaves after its 200 echoes
    assert pong.returncode == 0, pong_err
    assert last_json(pong_out)["echoed"] >= 200
    ping.send_signal(signal.SIGTERM)
    out, err = ping.communicate(timeout=60)
    assert ping.returncode == 1
    summary = last_json(out)
    assert 0 < summary["count"] < 1000
    assert summary["main_wakeups"] == 0
    assert "of 1000 round trips measured" in err


@pytest.mark.slow
def test_pong_stops_by_itself_after_its_duration(ports: Ports, procs: Processes) -> None:
    pong = procs.openum("pong", "lat/d/ping", "lat/d/pong", "--duration", "0.5", "--json", *ports.argv())
    out, err = pong.communicate(timeout=60)  # no signal: the deadline wakes the main thread
    assert pong.returncode == 0, err
    summary = last_json(out)
    assert summary["echoed"] == 0
    assert summary["seconds"] >= 0.5


def test_ping_rejects_bad_usage(procs: Processes) -> None:
    ping = procs.openum("ping", "a", "b", "--size", "4")
    _out, err = ping.communicate(timeout=30)
    assert ping.returncode == 2
    assert "--size must be at least 8" in err


def test_percentiles_are_nearest_rank_in_microseconds() -> None:
    samples = [i * 1000 for i in range(1, 1001)]  # 1 .. 1000 us
    p = percentiles(list(reversed(samples)))
    assert p["min"] == 1.0
    assert p["p50"] == 500.0
    assert p["p90"] == 900.0
    assert p["p99"] == 990.0
    assert p["p999"] == 999.0
    assert p["max"] == 1000.0
    assert percentiles([]) == {}
    assert percentiles([2500])["p999"] == 2.5
