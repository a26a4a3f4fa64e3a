"""``openum demo --spark`` (what ``make run`` runs): market data -> Spark analytics -> a subscriber.

Three child processes on this machine, on the embedded default configuration:

- ``ana``: the analytics subscriber (``openum demo analytics``), a wildcard receiver on ``^analytics/``
  printing what the pipeline publishes;
- ``spark``: the market-data pipeline (``python -m openum.spark.pipelines.market_data``) on ``local[*]``:
  the ``openum`` stream reader on ``^md/``, per-symbol OHLC/VWAP/rates over 5-second event-time windows,
  Parquet, and the ``openum`` writer publishing to ``analytics/<symbol>``;
- ``pub``: the demo publisher (``openum demo publisher``), simulated ticks on ``md/<venue>/<symbol>``.

The parent relays their output with ``[ana]``/``[spark]``/``[pub]`` prefixes and drives the run: the
publisher starts sending once the pipeline's receiver has begun every topic; when the publisher reports
how many ticks it sent, the pipeline is told to finish once it has processed them; then the subscriber
is stopped.  The run is OK when the pipeline processed every sent tick exactly once and the subscriber
received every analytics message the pipeline published.

This package sits below ``openum.spark`` (ARCHITECTURE.md 2): the pipeline is started as a process by
module name, never imported.  When PySpark or Java is missing, the reason is printed and the plain demo
(:func:`openum.demo.run_demo`) runs instead.
"""

from __future__ import annotations

import dataclasses
import json
import queue
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from openum.demo._control import Settings, parse_marker
from openum.demo._runner import STOP_TIMEOUT, _Child, _drain, _terminated, run_demo
from openum.demo._runner import _relay as _relay_line
from openum.demo.ticks import topics_for

__all__ = ["run_spark_demo"]

PIPELINE = "openum.spark.pipelines.market_data"
SPARK_START = 90.0  # Spark start-up and the pipeline's first micro-batch, at most
FINISH_MARGIN = 45.0  # beyond the publisher's duration: the pipeline catching up and stopping
ANALYTICS_GRACE = 2.0  # after the pipeline ended: the subscriber takes what is in flight
EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130
_NOISE = (
    "WARNING: Using incubator modules",
    "Using Spark's default log4j profile",
    "Setting default log level",
    "To adjust logging level",
)


def spark_unavailable() -> str | None:
    """Why the pipeline cannot run here (``... --check``), or None when it can."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", PIPELINE, "--check"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot run {PIPELINE} --check: {exc}"
    if done.returncode == 0:
        return None
    text = (done.stdout + done.stderr).strip().splitlines()
    return text[-1] if text else f"{PIPELINE} --check exited with status {done.returncode}"


def _pipeline_config_args(config_args: Sequence[str]) -> list[str]:
    """``-c``/``--option``/``--application`` as the pipeline takes them (the same flags)."""
    return list(config_args)


def run_spark_demo(
    settings: Settings, config_args: Sequence[str], *, as_json: bool = False, fallback: Settings | None = None
) -> int:
    """Run the Spark demo; without Spark, say why and run the plain demo with ``fallback`` settings."""
    reason = spark_unavailable()
    if reason is not None:
        print(f"demo: Spark cannot run here: {reason}", file=sys.stderr, flush=True)
        print(
            "demo: running the demo without Spark instead (publisher -> wildcard subscriber)",
            file=sys.stderr,
            flush=True,
        )
        return run_demo(fallback or settings, config_args, as_json=as_json)
    if settings.seed is None:
        settings = dataclasses.replace(settings, seed=random.randrange(1, 1_000_000))
    universe = topics_for(settings.venues, settings.symbols)
    relay = sys.stderr if as_json else sys.stdout
    work = Path(tempfile.mkdtemp(prefix="openum-demo-spark-"))
    print(
        f"demo: a publisher of {len(universe)} topics md/<venue>/<symbol> ({settings.rate:,.0f} ticks/s for "
        f"{settings.duration:g} s, seed {settings.seed}) -> Spark (local[*]): per-symbol OHLC, VWAP and "
        "rates "
        "over 5 s event-time windows -> Parquet and topics analytics/<symbol> -> an analytics subscriber",
        file=relay,
        flush=True,
    )
    previous_term = signal.signal(signal.SIGTERM, _terminated)
    lines: queue.Queue[tuple[str, str, str | None]] = queue.Queue()
    children: dict[str, _Child] = {}
    problems: list[str] = []
    interrupted = False
    start = time.monotonic()
    hard_deadline = start + SPARK_START + settings.join_timeout + settings.duration + FINISH_MARGIN
    try:
        children["ana"] = _Child(
            "ana",
            [
                sys.executable, "-m", "openum", "demo", "analytics", "--control-stdin",
                "--max-seconds", repr(hard_deadline - start), *config_args,
            ],
            lines,
        )  # fmt: skip
        children["spark"] = _Child(
            "spark",
            [
                sys.executable, "-m", PIPELINE, "--control-stdin",
                "--expect-topics", str(len(universe)),
                "--window", "5 seconds", "--watermark", "2 seconds", "--trigger", "1 second",
                "--output", str(work / "parquet"), "--checkpoint", str(work / "checkpoint"),
                "--spool-dir", str(work / "spool"), "--wait-receivers", "1",
                "--spark-log-level", "ERROR", *_pipeline_config_args(config_args),
            ],
            lines,
        )  # fmt: skip
        publisher_settings = dataclasses.replace(settings, join_timeout=SPARK_START + settings.join_timeout)
        children["pub"] = _Child("pub", _publisher_argv(publisher_settings, config_args), lines)
        _drive(children, lines, relay, hard_deadline, problems)
    except KeyboardInterrupt:
        interrupted = True
        print(
            "demo: interrupted; stopping the pipeline, the subscriber and the publisher",
            file=sys.stderr,
            flush=True,
        )
        for child in children.values():
            child.tell("stop")
        _drain(children, lines, relay, time.monotonic() + 3 * STOP_TIMEOUT, relay_line=_relay)
    finally:
        for child in children.values():
            if not child.finished:
                child.stop()
        statuses = {role: child.reap(STOP_TIMEOUT) for role, child in children.items()}
        signal.signal(signal.SIGTERM, previous_term)
        shutil.rmtree(work / "spool", ignore_errors=True)
        shutil.rmtree(work / "checkpoint", ignore_errors=True)
    if interrupted:
        return EXIT_INTERRUPTED
    pub, spark, ana = (children[r].summary if r in children else None for r in ("pub", "spark", "ana"))
    problems += _judge(pub, spark, ana, statuses)
    seconds = time.monotonic() - start
    summary = {
        "ok": not problems,
        "problems": problems,
        "sent": (pub or {}).get("sent", 0),
        "ticks_processed": (spark or {}).get("ticks", 0),
        "ticks_received": (spark or {}).get("received", 0),
        "batches": (spark or {}).get("batches", 0),
        "window_rows": (spark or {}).get("windows", 0),
        "published": (spark or {}).get("published", 0),
        "analytics_received": (ana or {}).get("messages", 0),
        "parquet": str(work / "parquet"),
        "seed": settings.seed,
        "seconds": round(seconds, 3),
    }
    if as_json:
        print(json.dumps(summary, sort_keys=True), flush=True)
    if problems:
        print(f"demo: FAILED: {'; '.join(problems)}", file=sys.stderr if as_json else sys.stdout, flush=True)
    elif not as_json:
        print(
            f"demo: OK: Spark processed {summary['ticks_processed']:,} of {summary['sent']:,} ticks exactly "
            f"once in {summary['batches']} micro-batches, published {summary['published']:,} analytics "
            "messages and the "
            f"subscriber received {summary['analytics_received']:,}; Parquet in {summary['parquet']} "
            f"({seconds:.0f} s)",
            flush=True,
        )
    return EXIT_FAILED if problems else EXIT_OK


def _publisher_argv(settings: Settings, config_args: Sequence[str]) -> list[str]:
    argv = [
        sys.executable, "-m", "openum", "demo", "publisher",
        "--venues", ",".join(settings.venues), "--symbols", str(settings.symbols),
        "--rate", repr(settings.rate), "--duration", repr(settings.duration),
        "--join-timeout", repr(settings.join_timeout), "--control-stdin", *config_args,
    ]  # fmt: skip
    if settings.seed is not None:
        argv += ["--seed", str(settings.seed)]
    if settings.transport is not None:
        argv += ["--transport", settings.transport]
    return argv


def _relay(role: str, stream: str, line: str, relay: IO[str]) -> None:
    """:func:`openum.demo._runner._relay` without Spark's known noise on stderr."""
    if stream == "err" and (line.startswith(_NOISE) or line.startswith("\tat java.base/java.util.regex")):
        return
    _relay_line(role, stream, line, relay)


def _drive(
    children: dict[str, _Child],
    lines: queue.Queue[tuple[str, str, str | None]],
    relay: IO[str],
    hard_deadline: float,
    problems: list[str],
) -> None:
    pub, spark, ana = children["pub"], children["spark"], children["ana"]
    spark_done_at: float | None = None
    while not all(c.finished for c in children.values()):
        now = time.monotonic()
        if now >= hard_deadline:
            problems.append("the run did not finish in time; the children were stopped")
            for child in children.values():
                child.tell("stop")
            _drain(children, lines, relay, now + 3 * STOP_TIMEOUT, relay_line=_relay)
            return
        if spark_done_at is not None and not ana.finished and now - spark_done_at >= ANALYTICS_GRACE:
            ana.tell("stop")
            pub.tell("stop")
            spark_done_at = None
        try:
            role, stream, line = lines.get(timeout=0.25)
        except queue.Empty:
            continue
        child = children[role]
        if line is None:
            child.open_streams -= 1
            if child.finished and role == "spark":
                spark_done_at = time.monotonic()  # the subscriber gets a moment for what is in flight
            elif child.finished and role == "pub" and spark.summary is None:
                spark.tell("stop" if pub.summary is None else f"expect {pub.summary.get('sent', 0)}")
            continue
        marker = parse_marker(line) if stream == "out" else None
        if marker is None:
            _relay(role, stream, line, relay)
            continue
        kind, payload = marker
        if kind == "ready" and role == "spark":
            pub.tell("go")
        elif kind == "summary" and isinstance(payload, dict):
            child.summary = payload
            if role == "pub":
                spark.tell(f"expect {int(payload.get('sent', 0))}")


def _judge(
    pub: dict[str, Any] | None,
    spark: dict[str, Any] | None,
    ana: dict[str, Any] | None,
    statuses: dict[str, int],
) -> list[str]:
    problems: list[str] = []
    if pub is None:
        problems.append(
            f"the publisher stopped before reporting what it sent (exit status {statuses.get('pub')})"
        )
    if spark is None:
        problems.append(
            f"the Spark pipeline stopped without a summary (exit status {statuses.get('spark')}; see [spark])"
        )
        return problems
    if spark.get("failed"):
        problems.append(f"the Spark query failed: {spark['failed']}")
    if pub is not None:
        sent = int(pub.get("sent", 0))
        if int(spark.get("ticks", 0)) != sent:
            problems.append(f"Spark processed {spark.get('ticks', 0):,} ticks, the publisher sent {sent:,}")
    if not spark.get("published"):
        problems.append("the pipeline published no analytics")
    if ana is None:
        problems.append(
            f"the analytics subscriber stopped without a summary (exit status {statuses.get('ana')})"
        )
    elif int(ana.get("messages", 0)) != int(spark.get("published", 0)):
        problems.append(
            f"the subscriber received {ana.get('messages', 0):,} of {spark.get('published', 0):,} "
            "analytics messages"
        )
    return problems
