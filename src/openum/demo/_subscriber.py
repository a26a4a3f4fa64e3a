"""The demo subscriber: one wildcard receiver on ``^md/``, its events dispatched on the main thread.

It counts ticks per topic, venue and symbol, checks each source's topic sequence numbers (0, 1, 2, ...;
a jump is a gap, and so is a stream that does not start at 0), checks that message properties match
the topic, prints a live line about every second and, at the end, a per-venue summary and the top 10
symbols by message count with their last trade price and VWAP.

It says ``ready`` (to the parent) once a BOS arrived on every expected topic (for LBT-RM sources, which
send nothing before their first message, once their session is joined).  It ends when the parent
says how many ticks were sent and they all arrived (or none arrived for 5 s), on ``stop``, when every
source it joined ended (EOS; when run by hand), or after ``--max-seconds``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import openum
from openum.demo._control import BIND_HINT, Control, Settings, report, say
from openum.demo.ticks import FLAG_TRADE, PRICE_SCALE, TICK_SIZE, TICK_STRUCT, TICK_VERSION, topics_for

__all__ = ["run_subscriber"]

PATTERN = "^md/"
TIMER_MS = 250
EXPECT_GRACE = 5.0  # once told how many ticks were sent: give up after this long without one arriving


@dataclass(slots=True)
class _Symbol:
    messages: int = 0
    last: int = 0  # last trade price, 1/PRICE_SCALE units (0: no trade yet)
    notional: int = 0  # sum of price * size over trades
    volume: int = 0


@dataclass(slots=True)
class _Tally:
    expected: dict[str, tuple[str, str]]  # topic -> (venue, symbol)
    received: int = 0
    received_expected: int = 0
    first: float | None = None
    last: float | None = None
    gaps: int = 0
    gap_messages: int = 0
    duplicates: int = 0
    loss: int = 0
    loss_bursts: int = 0
    bad_ticks: int = 0
    properties: int = 0
    property_errors: int = 0
    bos: int = 0
    eos: int = 0
    per_topic: dict[str, int] = field(default_factory=dict)
    next_sqn: dict[str, int] = field(default_factory=dict)  # per source
    symbols: dict[str, _Symbol] = field(default_factory=dict)
    begun: set[str] = field(default_factory=set)  # expected topics with a BOS
    live_sources: set[str] = field(default_factory=set)
    ended_sources: set[str] = field(default_factory=set)
    ready_at: float | None = None

    def on_message(self, msg: openum.Message) -> None:
        kind = msg.type
        if kind is openum.MsgType.DATA:
            self._data(msg)
        elif kind is openum.MsgType.BOS:
            self.bos += 1
            self.live_sources.add(msg.source)
            if msg.topic in self.expected:
                self.begun.add(msg.topic)
        elif kind is openum.MsgType.EOS:
            self.eos += 1
            self.ended_sources.add(msg.source)
        elif kind is openum.MsgType.UNRECOVERABLE_LOSS:
            self.loss += 1
        elif kind is openum.MsgType.UNRECOVERABLE_LOSS_BURST:
            self.loss_bursts += 1

    def _data(self, msg: openum.Message) -> None:
        now = time.monotonic()
        if self.first is None:
            self.first = now
        self.last = now
        self.received += 1
        topic = msg.topic
        self.per_topic[topic] = self.per_topic.get(topic, 0) + 1
        source = msg.source
        sqn = msg.sequence_number
        expected = self.next_sqn.get(source, 0)
        if sqn == expected:
            self.next_sqn[source] = sqn + 1
        elif sqn > expected:
            self.gaps += 1
            self.gap_messages += sqn - expected
            self.next_sqn[source] = sqn + 1
        else:
            self.duplicates += 1
        names = self.expected.get(topic)
        if names is None:
            return
        self.received_expected += 1
        data = msg.data
        if len(data) < TICK_SIZE:
            self.bad_ticks += 1
            return
        version, flags, _, size, _seq, _t, _bid, _ask, last = TICK_STRUCT.unpack_from(data, 0)
        if version != TICK_VERSION:
            self.bad_ticks += 1
            return
        sym = self.symbols.get(names[1])
        if sym is None:
            sym = self.symbols[names[1]] = _Symbol()
        sym.messages += 1
        if flags & FLAG_TRADE:
            sym.last = last
            sym.notional += last * size
            sym.volume += size
        props = msg.properties
        if props:
            self.properties += 1
            if props.get("venue") != names[0] or props.get("symbol") != names[1]:
                self.property_errors += 1

    @property
    def seconds(self) -> float:
        return (self.last - self.first) if self.first is not None and self.last is not None else 0.0


def run_subscriber(
    config: openum.Config,
    settings: Settings,
    *,
    control_stdin: bool = False,
    max_seconds: float | None = None,
) -> int:
    universe = topics_for(settings.venues, settings.symbols)
    tally = _Tally(expected={t: (v, s) for t, v, s in universe})
    ntopics = len(universe)
    evq = openum.EventQueue()
    control = Control(from_stdin=control_stdin, on_command=lambda _c, _a: evq.unblock())
    start = time.monotonic()
    deadline = start + max_seconds if max_seconds else None
    state: dict[str, Any] = {
        "done": None,
        "expect_at": None,
        "expect_count": 0,
        "warned": False,
        "timer": None,
    }
    live = {"at": start, "received": 0}

    def check_done(now: float) -> str | None:
        if control.stopped:
            return "stopped"
        if control.expect is not None:
            if tally.received_expected >= control.expect:
                return "all sent ticks arrived"
            if state["expect_at"] is None or state["expect_count"] != tally.received_expected:
                state["expect_at"], state["expect_count"] = now, tally.received_expected  # progress
            elif now - state["expect_at"] >= EXPECT_GRACE:
                missing = control.expect - tally.received_expected
                return f"gave up waiting for {missing:,} ticks: none arrived for {EXPECT_GRACE:g} s"
        if not control_stdin and tally.live_sources and tally.live_sources <= tally.ended_sources:
            return "every source ended"
        if deadline is not None and now >= deadline:
            return f"--max-seconds {max_seconds:g} passed"
        return None

    def on_timer(_clientd: Any) -> None:
        now = time.monotonic()
        if tally.ready_at is None:
            for (topic, _transport, _index), (source, _clientd) in list(wrcv.sources.items()):
                if source.startswith("LBTRM:") and topic in tally.expected:
                    tally.begun.add(topic)  # joined; no BOS comes before the first datagram
        if tally.ready_at is None and len(tally.begun) == ntopics:
            tally.ready_at = now
            say(f"joined all {ntopics} topics after {now - start:.2f} s (wildcard receiver {PATTERN!r})")
            report(control_stdin, "ready")
        elif tally.ready_at is None and not state["warned"] and now - start >= settings.join_timeout:
            state["warned"] = True
            say(f"only {len(tally.begun)} of {ntopics} topics have begun after {now - start:.1f} s")
        if now - live["at"] >= 1.0 and tally.received:
            rate = (tally.received - live["received"]) / (now - live["at"])
            say(
                f"{now - start:6.1f}s {rate:>9,.0f} msgs/s  topics {len(tally.per_topic)}/{ntopics}  "
                f"gaps {tally.gaps}  total {tally.received:,}"
            )
            live.update(at=now, received=tally.received)
        reason = check_done(now)
        if reason is not None:
            state["done"] = reason
            evq.unblock()
            return
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
        say(f"wildcard receiver {PATTERN!r}: waiting for {ntopics} topics")
        state["timer"] = ctx.schedule_timer(TIMER_MS, on_timer, event_queue=evq)
        while state["done"] is None:
            evq.dispatch(openum.EventQueue.BLOCK)
            if state["done"] is None:
                state["done"] = check_done(time.monotonic())
        if state["timer"] is not None:
            ctx.cancel_timer(state["timer"])
        wrcv.close()
    evq.close()
    _print_summary(tally, settings, ntopics, state["done"])
    report(control_stdin, "summary", _summary(tally, settings, start))
    broken = tally.gaps or tally.loss or tally.loss_bursts or tally.bad_ticks or tally.property_errors
    return 0 if tally.received and not broken else 1


def _summary(tally: _Tally, settings: Settings, start: float) -> dict[str, Any]:
    seconds = tally.seconds
    per_venue: dict[str, dict[str, int]] = {v: {"topics": 0, "messages": 0} for v in settings.venues}
    for topic, count in tally.per_topic.items():
        names = tally.expected.get(topic)
        if names is not None:
            per_venue[names[0]]["topics"] += 1
            per_venue[names[0]]["messages"] += count
    return {
        "messages": tally.received,
        "seconds": round(seconds, 3),
        "msgs_per_sec": round(tally.received / seconds, 1) if seconds > 0 else 0.0,
        "topics": len(tally.per_topic),
        "topics_begun": len(tally.begun),
        "join_seconds": None if tally.ready_at is None else round(tally.ready_at - start, 3),
        "sources": len(tally.next_sqn),
        "gaps": tally.gaps,
        "gap_messages": tally.gap_messages,
        "duplicates": tally.duplicates,
        "unrecoverable_loss": tally.loss,
        "unrecoverable_loss_burst": tally.loss_bursts,
        "bad_ticks": tally.bad_ticks,
        "properties": tally.properties,
        "property_errors": tally.property_errors,
        "bos": tally.bos,
        "eos": tally.eos,
        "per_topic": dict(sorted(tally.per_topic.items())),
        "per_venue": per_venue,
        "top": [
            {"symbol": name, "messages": sym.messages, "last": _price(sym.last), "vwap": _vwap(sym)}
            for name, sym in _top(tally)
        ],
    }


def _top(tally: _Tally, n: int = 10) -> list[tuple[str, _Symbol]]:
    return sorted(tally.symbols.items(), key=lambda kv: (-kv[1].messages, kv[0]))[:n]


def _price(units: int) -> float | None:
    return round(units / PRICE_SCALE, 4) if units else None


def _vwap(sym: _Symbol) -> float | None:
    return round(sym.notional / sym.volume / PRICE_SCALE, 4) if sym.volume else None


def _print_summary(tally: _Tally, settings: Settings, ntopics: int, reason: str | None) -> None:
    seconds = tally.seconds
    rate = tally.received / seconds if seconds > 0 else 0.0
    props = (
        "all match their topic"
        if not tally.property_errors
        else f"{tally.property_errors:,} do not match their topic"
    )
    say(f"done ({reason})")
    say(
        f"received {tally.received:,} ticks on {len(tally.per_topic)}/{ntopics} topics in {seconds:.1f} s "
        f"({rate:,.0f} msgs/s); gaps {tally.gaps}; {tally.properties:,} with properties ({props})"
    )
    if tally.loss or tally.loss_bursts or tally.duplicates or tally.bad_ticks:
        say(
            f"unrecoverable loss {tally.loss}, loss bursts {tally.loss_bursts}, "
            f"duplicates {tally.duplicates}, undecodable ticks {tally.bad_ticks}"
        )
    if not tally.received:
        return
    per_venue: dict[str, list[int]] = {v: [0, 0] for v in settings.venues}
    for topic, count in tally.per_topic.items():
        names = tally.expected.get(topic)
        if names is not None:
            per_venue[names[0]][0] += 1
            per_venue[names[0]][1] += count
    total = max(1, tally.received_expected)
    say(f"{'venue':<10}{'topics':>8}{'messages':>12}{'msgs/s':>10}{'share':>8}")
    for venue, (topics, messages) in per_venue.items():
        venue_rate = messages / seconds if seconds > 0 else 0.0
        say(
            f"{venue:<10}{f'{topics}/{settings.symbols}':>8}{messages:>12,}{venue_rate:>10,.0f}"
            f"{messages / total:>8.1%}"
        )
    top = _top(tally)
    if top:
        say(f"top {len(top)} symbols by messages (all venues)")
        say(f"{'#':>3}  {'symbol':<8}{'messages':>10}{'last':>11}{'vwap':>11}")
        for rank, (name, sym) in enumerate(top, 1):
            last, vwap = _price(sym.last), _vwap(sym)
            say(
                f"{rank:>3}  {name:<8}{sym.messages:>10,}"
                f"{'-' if last is None else f'{last:,.2f}':>11}{'-' if vwap is None else f'{vwap:,.2f}':>11}"
            )
