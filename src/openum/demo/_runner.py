"""The demo's parent process: start the subscriber and the publisher, relay their output, judge the run.

The children are ``python -m openum demo subscriber|publisher ... --control-stdin`` with the parent's
``-c``/``--option``/``--application`` arguments, each in its own session (a terminal's Ctrl-C reaches
only the parent, which then stops them).  Their output is relayed line by line with ``[sub]``/``[pub]``
prefixes (to stderr with ``--json``, so stdout holds only the summary).  The parent drives the run:

1. the subscriber says ``ready`` (BOS on every topic): the parent tells the publisher ``go``;
2. the publisher reports how many ticks it sent: the parent tells the subscriber ``expect N``;
3. the subscriber reports its summary and exits: the parent tells the publisher ``stop`` (it closes
   its sources).

Every wait has a deadline: the whole run ends within join timeout + duration + about 10 s; children
still running then are terminated (then killed).  Exit status 0 only when the subscriber saw ticks on
every topic, with no sequence gap, no loss and every sent tick received; 1 otherwise, with the reasons.
"""

from __future__ import annotations

import dataclasses
import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO, Any

from openum.demo._control import Settings, parse_marker
from openum.demo.ticks import topics_for

__all__ = ["run_demo"]

FINISH_MARGIN = 10.0  # seconds allowed beyond join timeout + duration
STOP_TIMEOUT = 5.0  # after terminate(): then kill()
EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130


class _Child:
    def __init__(self, role: str, argv: list[str], lines: queue.Queue[tuple[str, str, str | None]]) -> None:
        self.role = role
        env = dict(os.environ)
        env["PYTHONUNBUFFERED"] = "1"
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
            env=env,
            start_new_session=True,
        )
        self.open_streams = 2
        self.summary: dict[str, Any] | None = None
        assert self.proc.stdout is not None
        assert self.proc.stderr is not None
        for name, stream in (("out", self.proc.stdout), ("err", self.proc.stderr)):
            threading.Thread(
                target=_pump, args=(role, name, stream, lines), name=f"demo-{role}-{name}", daemon=True
            ).start()

    def tell(self, command: str) -> None:
        stdin = self.proc.stdin
        if stdin is None or stdin.closed:
            return
        try:
            stdin.write(command + "\n")
            stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass

    @property
    def finished(self) -> bool:
        return self.open_streams == 0

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()

    def reap(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout=max(0.0, timeout))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(timeout=STOP_TIMEOUT)
        finally:
            if self.proc.stdin is not None:
                try:
                    self.proc.stdin.close()
                except OSError:
                    pass


def _pump(role: str, name: str, stream: IO[str], lines: queue.Queue[tuple[str, str, str | None]]) -> None:
    try:
        for line in stream:
            lines.put((role, name, line.rstrip("\n")))
    except (OSError, ValueError):
        pass
    finally:
        lines.put((role, name, None))


def _terminated(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt


def _child_argv(role: str, settings: Settings, config_args: Sequence[str], extra: list[str]) -> list[str]:
    argv = [
        sys.executable,
        "-m",
        "openum",
        "demo",
        role,
        "--venues",
        ",".join(settings.venues),
        "--symbols",
        str(settings.symbols),
        "--rate",
        repr(settings.rate),
        "--duration",
        repr(settings.duration),
        "--join-timeout",
        repr(settings.join_timeout),
        "--control-stdin",
        *extra,
        *config_args,
    ]
    if settings.seed is not None:
        argv += ["--seed", str(settings.seed)]
    if settings.transport is not None:
        argv += ["--transport", settings.transport]
    return argv


def run_demo(settings: Settings, config_args: Sequence[str], *, as_json: bool = False) -> int:
    """Run the whole demo; ``config_args`` are the ``-c``/``--option``/``--application`` arguments."""
    if settings.seed is None:
        settings = dataclasses.replace(settings, seed=random.randrange(1, 1_000_000))
    universe = topics_for(settings.venues, settings.symbols)
    relay = sys.stderr if as_json else sys.stdout
    previous_term = signal.signal(signal.SIGTERM, _terminated)  # SIGTERM stops the run like Ctrl-C
    lines: queue.Queue[tuple[str, str, str | None]] = queue.Queue()
    start = time.monotonic()
    hard_deadline = start + settings.join_timeout + settings.duration + FINISH_MARGIN
    print(
        f"demo: a publisher of {len(universe)} topics md/<venue>/<symbol> ({len(settings.venues)} venues "
        f"{','.join(settings.venues)} x {settings.symbols} symbols) and a wildcard subscriber on '^md/', "
        f"{settings.rate:,.0f} ticks/s for {settings.duration:g} s, seed {settings.seed}",
        file=relay,
        flush=True,
    )
    children: dict[str, _Child] = {}
    problems: list[str] = []
    interrupted = False
    try:
        children["sub"] = _Child(
            "sub",
            _child_argv(
                "subscriber",
                settings,
                config_args,
                ["--max-seconds", repr(settings.join_timeout + settings.duration + FINISH_MARGIN - 1)],
            ),
            lines,
        )
        children["pub"] = _Child("pub", _child_argv("publisher", settings, config_args, []), lines)
        _drive(children, lines, relay, hard_deadline, problems)
    except KeyboardInterrupt:
        interrupted = True
        print("demo: interrupted; stopping the subscriber and the publisher", file=sys.stderr, flush=True)
        try:
            # The subscriber first: the side that closes a TCP connection first keeps its port in
            # TIME_WAIT, and that should be the receiver's ephemeral port, not the publisher's.
            if "sub" in children:
                children["sub"].stop()
                _drain(children, lines, relay, time.monotonic() + STOP_TIMEOUT, ("sub",))
            for child in children.values():
                child.stop()
            _drain(children, lines, relay, time.monotonic() + STOP_TIMEOUT)
        except KeyboardInterrupt:
            pass
    finally:
        for child in children.values():
            if not child.finished:
                child.stop()
        statuses = {role: child.reap(STOP_TIMEOUT) for role, child in children.items()}
        signal.signal(signal.SIGTERM, previous_term)
    if interrupted:
        return EXIT_INTERRUPTED
    pub, sub = children["pub"].summary, children["sub"].summary
    problems += _judge(universe, pub, sub, statuses)
    summary = _combined(settings, universe, pub, sub, problems, time.monotonic() - start)
    if as_json:
        print(json.dumps(summary, sort_keys=True), flush=True)
    elif problems:
        print(f"demo: FAILED: {'; '.join(problems)}", flush=True)
    else:
        print(
            f"demo: OK: ticks on all {len(universe)} topics, 0 gaps, {summary['messages']:,} of "
            f"{summary['sent']:,} ticks received ({summary['msgs_per_sec']:,.0f} msgs/s)",
            flush=True,
        )
    if problems and as_json:
        print(f"demo: FAILED: {'; '.join(problems)}", file=sys.stderr, flush=True)
    return EXIT_FAILED if problems else EXIT_OK


def _drive(
    children: dict[str, _Child],
    lines: queue.Queue[tuple[str, str, str | None]],
    relay: IO[str],
    hard_deadline: float,
    problems: list[str],
) -> None:
    pub, sub = children["pub"], children["sub"]
    told_stop = False
    while not (pub.finished and sub.finished):
        now = time.monotonic()
        if now >= hard_deadline:
            problems.append("the run did not finish in time; the publisher and the subscriber were stopped")
            for child in children.values():
                child.stop()
            _drain(children, lines, relay, now + STOP_TIMEOUT)
            return
        try:
            role, stream, line = lines.get(timeout=min(0.5, hard_deadline - now))
        except queue.Empty:
            continue
        child = children[role]
        if line is None:
            child.open_streams -= 1
            if child.finished and role == "sub" and not told_stop:
                pub.tell("stop")  # the subscriber is done: the publisher may close its sources
                told_stop = True
            elif child.finished and role == "pub" and sub.summary is None:
                sub.tell("stop" if pub.summary is None else f"expect {pub.summary.get('sent', 0)}")
            continue
        marker = parse_marker(line) if stream == "out" else None
        if marker is None:
            _relay(role, stream, line, relay)
            continue
        kind, payload = marker
        if kind == "ready" and role == "sub":
            pub.tell("go")
        elif kind == "summary" and isinstance(payload, dict):
            child.summary = payload
            if role == "pub":
                sub.tell(f"expect {int(payload.get('sent', 0))}")


def _relay(role: str, stream: str, line: str, relay: IO[str]) -> None:
    """Print a child's line, prefixed with its role: its stdout to ``relay``, its stderr to stderr."""
    print(f"[{role}] {line}", file=relay if stream == "out" else sys.stderr, flush=True)


def _drain(
    children: dict[str, _Child],
    lines: queue.Queue[tuple[str, str, str | None]],
    relay: IO[str],
    deadline: float,
    roles: Sequence[str] | None = None,
    relay_line: Callable[[str, str, str, IO[str]], None] = _relay,
) -> None:
    """Relay what the children still print (through ``relay_line``) until ``roles`` (default all) closed
    their output, or ``deadline``."""
    while not all(children[r].finished for r in (roles or children) if r in children):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        try:
            role, stream, line = lines.get(timeout=min(0.5, remaining))
        except queue.Empty:
            continue
        child = children[role]
        if line is None:
            child.open_streams -= 1
            continue
        marker = parse_marker(line) if stream == "out" else None
        if marker is None:
            relay_line(role, stream, line, relay)
        elif marker[0] == "summary" and isinstance(marker[1], dict):
            child.summary = marker[1]


def _judge(
    universe: list[tuple[str, str, str]],
    pub: dict[str, Any] | None,
    sub: dict[str, Any] | None,
    statuses: dict[str, int],
) -> list[str]:
    problems: list[str] = []
    if pub is None:
        problems.append(
            f"the publisher stopped before reporting what it sent (exit status {statuses.get('pub')}; "
            "see its [pub] lines)"
        )
    if sub is None:
        problems.append(
            f"the subscriber stopped without a summary (exit status {statuses.get('sub')}; "
            "see its [sub] lines)"
        )
        return problems
    per_topic: dict[str, int] = sub.get("per_topic", {})
    silent = [t for t, _, _ in universe if not per_topic.get(t)]
    if silent:
        shown = ", ".join(silent[:5]) + (", ..." if len(silent) > 5 else "")
        problems.append(f"{len(silent)} of {len(universe)} topics got no ticks ({shown})")
    if sub.get("gaps"):
        problems.append(
            f"{sub['gaps']} sequence gap(s) ({sub.get('gap_messages', 0)} messages missing in the streams)"
        )
    loss = sub.get("unrecoverable_loss", 0) + sub.get("unrecoverable_loss_burst", 0)
    if loss:
        problems.append(f"{loss} unrecoverable loss event(s)")
    if sub.get("bad_ticks"):
        problems.append(f"{sub['bad_ticks']} tick(s) did not decode")
    if sub.get("property_errors"):
        problems.append(f"{sub['property_errors']} message(s) had properties not matching their topic")
    if pub is not None:
        sent: dict[str, int] = pub.get("per_topic", {})
        missing = sum(max(0, n - per_topic.get(t, 0)) for t, n in sent.items())
        if missing:
            problems.append(f"{missing:,} of {pub.get('sent', 0):,} sent ticks were not received")
    return problems


def _combined(
    settings: Settings,
    universe: list[tuple[str, str, str]],
    pub: dict[str, Any] | None,
    sub: dict[str, Any] | None,
    problems: list[str],
    seconds: float,
) -> dict[str, Any]:
    pub = pub or {}
    sub = sub or {}
    sent_per_topic: dict[str, int] = pub.get("per_topic", {})
    per_topic: dict[str, int] = sub.get("per_topic", {})
    return {
        "ok": not problems,
        "problems": problems,
        "venues": list(settings.venues),
        "symbols_per_venue": settings.symbols,
        "topics_expected": len(universe),
        "topics": sum(1 for t, _, _ in universe if per_topic.get(t)),
        "rate": settings.rate,
        "duration": settings.duration,
        "seed": settings.seed,
        "sent": pub.get("sent", 0),
        "publisher_msgs_per_sec": pub.get("msgs_per_sec", 0.0),
        "datagrams": pub.get("datagrams", 0),
        "messages": sub.get("messages", 0),
        "msgs_per_sec": sub.get("msgs_per_sec", 0.0),
        "missing": sum(max(0, n - per_topic.get(t, 0)) for t, n in sent_per_topic.items()),
        "gaps": sub.get("gaps", 0),
        "gap_messages": sub.get("gap_messages", 0),
        "unrecoverable_loss": sub.get("unrecoverable_loss", 0),
        "unrecoverable_loss_burst": sub.get("unrecoverable_loss_burst", 0),
        "properties": sub.get("properties", 0),
        "property_errors": sub.get("property_errors", 0),
        "bad_ticks": sub.get("bad_ticks", 0),
        "join_seconds": sub.get("join_seconds"),
        "per_venue": sub.get("per_venue", {}),
        "top": sub.get("top", []),
        "seconds": round(seconds, 3),
    }
