"""The analytics subscriber of ``openum demo --spark``: prints what the Spark pipeline publishes.

One wildcard receiver on ``^analytics/`` with an event queue dispatched on the main thread.  Every
message is one window of one symbol as JSON (``symbol, window_start, window_end, open, high, low, close,
vwap, volume, trades, messages, msgs_per_sec``; written by ``openum.spark.pipelines.market_data``); the
newest message of a (symbol, window) is its latest value.  About every ``PRINT_EVERY`` seconds it prints
the newest window of the busiest symbols, and at the end a table and a summary for the parent.  It ends
on ``stop`` (or end of input) from the parent, or after ``--max-seconds``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import openum
from openum.demo._control import BIND_HINT, Control, report, say

__all__ = ["PATTERN", "run_analytics_subscriber"]

PATTERN = "^analytics/"
TIMER_MS = 250
PRINT_EVERY = 5.0
TOP = 10


@dataclass(slots=True)
class _Tally:
    messages: int = 0
    bad: int = 0
    per_topic: dict[str, int] = field(default_factory=dict)
    sources: set[str] = field(default_factory=set)
    windows: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # newest value
    first: float | None = None

    def on_message(self, msg: openum.Message) -> None:
        if msg.type is not openum.MsgType.DATA:
            return
        self.messages += 1
        if self.first is None:
            self.first = time.monotonic()
        self.per_topic[msg.topic] = self.per_topic.get(msg.topic, 0) + 1
        self.sources.add(msg.source)
        try:
            row = json.loads(bytes(msg.data))
            key = (str(row["symbol"]), str(row["window_start"]))
        except (ValueError, KeyError, TypeError):
            self.bad += 1
            return
        self.windows[key] = row

    def newest(self) -> list[dict[str, Any]]:
        """The newest window of each symbol, busiest symbols first."""
        best: dict[str, dict[str, Any]] = {}
        for (symbol, start), row in self.windows.items():
            if symbol not in best or start > best[symbol]["window_start"]:
                best[symbol] = row
        totals: dict[str, int] = {}
        for (symbol, _), row in self.windows.items():
            totals[symbol] = totals.get(symbol, 0) + int(row.get("messages") or 0)
        return sorted(best.values(), key=lambda r: (-totals.get(r["symbol"], 0), r["symbol"]))


def _num(value: Any, digits: int = 2) -> str:
    return "-" if value is None else f"{float(value):,.{digits}f}"


def _clock(stamp: Any) -> str:
    text = str(stamp)
    return text[11:19] if len(text) >= 19 else text


def _table(rows: list[dict[str, Any]], limit: int) -> None:
    say(
        f"{'symbol':<7}{'window':>19}{'open':>10}{'high':>10}{'low':>10}{'close':>10}{'vwap':>10}"
        f"{'volume':>10}{'msgs/s':>8}"
    )
    for row in rows[:limit]:
        window = f"{_clock(row.get('window_start'))}-{_clock(row.get('window_end'))[3:]}"
        say(
            f"{row['symbol']:<7}{window:>19}{_num(row.get('open')):>10}{_num(row.get('high')):>10}"
            f"{_num(row.get('low')):>10}{_num(row.get('close')):>10}{_num(row.get('vwap')):>10}"
            f"{int(row.get('volume') or 0):>10,}{_num(row.get('msgs_per_sec'), 0):>8}"
        )


def run_analytics_subscriber(
    config: openum.Config, *, control_stdin: bool = False, max_seconds: float | None = None
) -> int:
    tally = _Tally()
    evq = openum.EventQueue()
    control = Control(from_stdin=control_stdin, on_command=lambda _c, _a: evq.unblock())
    start = time.monotonic()
    deadline = start + max_seconds if max_seconds else None
    state: dict[str, Any] = {"done": None, "printed": start, "timer": None}

    def on_timer(_clientd: Any) -> None:
        now = time.monotonic()
        if control.stopped:
            state["done"] = "stopped"
        elif deadline is not None and now >= deadline:
            state["done"] = f"--max-seconds {max_seconds:g} passed"
        if state["done"] is not None:
            evq.unblock()
            return
        if now - state["printed"] >= PRINT_EVERY and tally.windows:
            state["printed"] = now
            say(
                f"{now - start:6.1f}s  {tally.messages:,} analytics messages on {len(tally.per_topic)} "
                "topics; "
                "newest windows of the busiest symbols:"
            )
            _table(tally.newest(), 5)
        state["timer"] = ctx.schedule_timer(TIMER_MS, on_timer, event_queue=evq)

    try:
        ctx = openum.Context(config)
    except (openum.OpenUMError, OSError) as exc:
        say(f"error: cannot start a context: {exc}")
        say(BIND_HINT)
        evq.close()
        return 1
    with ctx:
        wrcv = ctx.create_wildcard_receiver(PATTERN, tally.on_message, event_queue=evq)
        say(f"wildcard receiver {PATTERN!r}: printing the analytics the Spark pipeline publishes")
        report(control_stdin, "ready")
        state["timer"] = ctx.schedule_timer(TIMER_MS, on_timer, event_queue=evq)
        while state["done"] is None:
            evq.dispatch(openum.EventQueue.BLOCK)
            if state["done"] is None and control.stopped:
                state["done"] = "stopped"
        # What is already queued was delivered before the stop: count it too.
        while evq.dispatch(openum.EventQueue.POLL):
            pass
        if state["timer"] is not None:
            ctx.cancel_timer(state["timer"])
        wrcv.close()
    evq.close()
    newest = tally.newest()
    say(
        f"done ({state['done']}): {tally.messages:,} analytics messages on {len(tally.per_topic)} topics "
        f"from {len(tally.sources)} sources; {len(tally.windows):,} (symbol, window) results"
        + (f"; {tally.bad} undecodable" if tally.bad else "")
    )
    if newest:
        say(
            f"newest window of the top {min(TOP, len(newest))} symbols (OHLC and VWAP of trades, all venues):"
        )
        _table(newest, TOP)
    report(
        control_stdin,
        "summary",
        {
            "messages": tally.messages,
            "topics": len(tally.per_topic),
            "sources": len(tally.sources),
            "windows": len(tally.windows),
            "bad": tally.bad,
            "top": newest[:TOP],
        },
    )
    return 0 if tally.messages and not tally.bad else 1
