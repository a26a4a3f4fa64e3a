"""The demo publisher: one source per ``md/<venue>/<symbol>`` topic, simulated ticks at a steady rate.

1. Create every source (the context spreads them over its transport sessions: TCP by default, or
   ``--transport lbtru|lbtrm``).
2. Wait until the subscriber joined: a CONNECT source event on every transport session (a session's
   CONNECT reaches the sources it has when the receiver connects) and, when started by the demo,
   ``go`` from the parent (sent once the subscriber has begun every topic).  Timeout:
   ``--join-timeout``, with a message saying how many sessions a receiver connected to.
3. Send for ``--duration`` seconds: an opening quote on every topic, then bursts every 5 ms of as many
   ticks as the rate says are due.  Intelligent batching (seed 8.6.2): messages go into the sessions'
   implicit batches and the last message of each burst *on each transport session* carries ``FLUSH``.
4. Flush, wait until the sessions' buffers for slow receivers are empty, report, and (when started by
   the demo) keep the sources until the parent says the subscriber is done; then close them (EOS).
"""

from __future__ import annotations

import time
from typing import Any

import openum
from openum.demo._control import BIND_HINT, Control, Settings, report, say
from openum.demo.ticks import MarketSimulator

__all__ = ["run_publisher"]

BURST_PERIOD = 0.005  # seconds between bursts
MAX_BURST_SECONDS = 0.05  # after a stall, catch up at most this much of the rate in one burst
DRAIN_TIMEOUT = 5.0
CLOSE_TIMEOUT = 15.0  # how long a demo-started publisher waits for the parent's "stop"


def _session_of(source: openum.Source) -> str:
    """The transport session part of a source string (``TCP:ip:port[:id]``, without ``[index]``)."""
    return source.source_string.rsplit("[", 1)[0]


#: How the publisher names each transport's sessions.
TRANSPORT_NAMES = {"tcp": "TCP", "lbtru": "LBT-RU", "lbtrm": "LBT-RM"}


def run_publisher(config: openum.Config, settings: Settings, *, control_stdin: bool = False) -> int:
    control = Control(from_stdin=control_stdin)
    sim = MarketSimulator(settings.venues, settings.symbols, settings.seed)
    ntopics = len(sim.topics)
    connected: set[int] = set()  # sources that got CONNECT (context thread adds, main thread reads)

    def on_event(event: openum.SourceEvent, _info: Any, index: int) -> None:
        if event is openum.SourceEvent.CONNECT:
            connected.add(index)

    try:
        ctx = openum.Context(config)
    except (openum.OpenUMError, OSError) as exc:
        say(f"error: cannot start a context: {exc}")
        say(BIND_HINT)
        return 1
    attrs = {"transport": settings.transport} if settings.transport else None
    with ctx:
        try:
            sources = [
                ctx.create_source(t, attrs, event_callback=on_event, clientd=i)
                for i, t in enumerate(sim.topics)
            ]
        except (openum.OpenUMError, OSError) as exc:
            say(f"error: cannot create the sources: {exc}")
            say(BIND_HINT)
            return 1
        session_of = [_session_of(s) for s in sources]
        sessions = sorted(set(session_of))
        first_of_session = {key: sources[session_of.index(key)] for key in sessions}
        kind = TRANSPORT_NAMES.get(sources[0].transport, sources[0].transport)
        # LBT-RM sources learn nothing of their receivers (no CONNECT): the subscriber's "ready" decides.
        wait_connect = sources[0].transport != "lbtrm"
        say(
            f"{ntopics} sources (md/<venue>/<symbol>) on {len(sessions)} {kind} transport sessions "
            f"({', '.join(k.split(':')[2] for k in sessions)}); waiting for the subscriber"
        )
        start_wait = time.monotonic()
        deadline = start_wait + settings.join_timeout

        def joined_sessions() -> set[str]:
            # CONNECT reaches the sources a session has when the receiver connects, so one per session
            # is what to wait for.
            if not wait_connect:
                return set(sessions) if control.go.is_set() or not control_stdin else set()
            return {session_of[i] for i in list(connected)}

        while not control.stopped and time.monotonic() < deadline:
            if len(joined_sessions()) == len(sessions) and (not control_stdin or control.go.is_set()):
                break
            control.wait(deadline - time.monotonic())
        if control.stopped:
            say("stopped before sending")
            return 1
        if len(joined_sessions()) < len(sessions):
            say(
                f"error: the subscriber did not join within {settings.join_timeout:g} s: "
                f"{len(joined_sessions())} of {len(sessions)} {kind} transport sessions have a connected "
                "receiver. Is a subscriber running with the same topic-resolution settings (-c/--option)?"
            )
            return 1
        if control_stdin and not control.go.is_set():
            say(
                f"error: a receiver connected to every transport session, but the subscriber did not "
                f"begin all {ntopics} topics within {settings.join_timeout:g} s"
            )
            return 1
        joined = time.monotonic() - start_wait
        say(f"subscriber joined after {joined:.2f} s; sending for {settings.duration:g} s")

        sent, with_props, seconds = _send(sources, session_of, sim, settings, control)

        for src in first_of_session.values():
            src.flush()
        drain_deadline = time.monotonic() + DRAIN_TIMEOUT
        while _buffered(first_of_session) and time.monotonic() < drain_deadline and not control.stopped:
            control.wait(0.01)
        stats = [s.statistics() for s in first_of_session.values()]
        datagrams = sum(st.datagrams_sent for st in stats)
        blocked = sum(st.blocked for st in stats)
        rate = sent / seconds if seconds > 0 else 0.0
        say(
            f"sent {sent:,} ticks in {seconds:.1f} s ({rate:,.0f} msgs/s) in {datagrams:,} {kind} batches "
            f"({sent / max(1, datagrams):.1f} msgs per batch); {with_props:,} with properties"
            + (f"; {blocked:,} sends waited for the subscriber" if blocked else "")
        )
        if not control.stopped and rate < 0.9 * settings.rate:
            say(f"note: {settings.rate:,.0f} msgs/s were asked for; this publisher managed {rate:,.0f}")
        report(
            control_stdin,
            "summary",
            {
                "sent": sent,
                "seconds": round(seconds, 3),
                "msgs_per_sec": round(rate, 1),
                "properties": with_props,
                "datagrams": datagrams,
                "blocked": blocked,
                "sessions": len(sessions),
                "per_topic": sim.sent_per_topic(),
            },
        )
        if control_stdin:
            close_deadline = time.monotonic() + CLOSE_TIMEOUT
            while not control.stopped and time.monotonic() < close_deadline:
                control.wait(close_deadline - time.monotonic())
        for src in sources:
            src.close()
    return 0


def _buffered(sessions: dict[str, openum.Source]) -> int:
    return sum(s.statistics().bytes_buffered for s in sessions.values())


def _send(
    sources: list[openum.Source],
    session_of: list[str],
    sim: MarketSimulator,
    settings: Settings,
    control: Control,
) -> tuple[int, int, float]:
    """The paced send loop; returns (ticks sent, ticks with properties, seconds)."""
    flush, none = openum.SendFlags.FLUSH, openum.SendFlags.NONE
    rate = settings.rate
    max_burst = max(1, int(rate * MAX_BURST_SECONDS))
    start = time.monotonic()
    end = start + settings.duration
    sent = with_props = 0
    owed = 0  # ticks due by the rate (the opening quotes come on top)
    burst = sim.opening(time.time_ns())
    next_burst = start
    while True:
        if burst:
            last_of_session: dict[str, int] = {}
            for k, (index, _, _) in enumerate(burst):
                last_of_session[session_of[index]] = k
            flush_at = set(last_of_session.values())
            for k, (index, payload, props) in enumerate(burst):
                if props is None:
                    sources[index].send(payload, flush if k in flush_at else none)
                else:
                    sources[index].send(payload, flush if k in flush_at else none, properties=props)
                    with_props += 1
            sent += len(burst)
        now = time.monotonic()
        if now >= end or control.stopped:
            break
        next_burst += BURST_PERIOD
        if next_burst > now:
            control.wait(next_burst - now)
            now = time.monotonic()
        else:
            next_burst = now  # behind: do not try to make up for lost bursts all at once
        due = int((min(now, end) - start) * rate) - owed
        count = min(due, max_burst)
        owed += max(0, count)
        burst = sim.next_ticks(count, time.time_ns()) if count > 0 else []
    return sent, with_props, time.monotonic() - start
