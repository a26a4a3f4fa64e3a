"""``openum send``, ``openum recv`` and ``openum wrecv`` (like UM's lbmsrc, lbmrcv and lbmwrcv; CLI.md).

Payload of message i (from 0): 8-byte big-endian i, padded with zero bytes to ``--size``.  ``recv
--verify`` checks that every source's counters arrive as 0, 1, 2, ... and counts gaps, duplicates and
out-of-order messages.  Long runs print a live progress line to stderr when it is a terminal; ``--json``
prints the final summary as one JSON object on the last stdout line.  ``recv``'s summary has, under
``dropped``, every counter of remote input its context and its receiving transport sessions dropped
(undecodable or unknown topic resolution, datagrams outside the receive window, strangers' datagrams...).

With the LBT-RM and LBT-RU transports the summaries show the loss recovery: ``recv`` reports, per
source, the receiving transport's counters (datagrams lost, NAKs sent, retransmissions received,
datagrams given up) and their totals under ``recovery``; ``send`` reports the NAKs its session received
and the retransmissions it sent, and after the last message keeps the source alive until no NAK has
arrived for ``--linger`` seconds, so receivers can repair a lost tail.

``send`` reports how many sends waited for room (``blocked_sends``) and for how long in all
(``blocked_seconds``); ``msgs_per_sec`` counts that time.  With TCP it also shows, under ``tcp``, the
connections its session let go: receivers stalled past ``transport_tcp_activity_timeout``, connections
that never presented the session id or presented a stale one or garbage, and datagrams a source-paced
session did not send to a slow receiver.

``recv`` and ``wrecv`` print their context's immediate messaging target (``Immediate messaging target:
TCP:ip:port``, as UM's lbmrcv does) on stderr at start: ``openum imsg --target`` sends there.  Immediate
messages with the topic reach the receiver like any message and are counted under ``immediate`` too;
with ``--immediate``, topicless immediate messages are received as well (``topicless``; without it, the
context drops them and counts them under ``dropped``).

Late Join (docs/late-join.md): ``send --late-join`` retains every message it sends for receivers that
join later, says so on stderr after the last send (``... retained for late joiners; lingering``), lingers
until no late-join request has arrived for ``--linger`` seconds, and reports the requests it answered
under ``late_join``.  ``recv`` counts the data messages flagged ``RETRANSMIT`` (recovered by late join, or
repaired by the transport) as ``retransmitted`` and, when it late-joined a source, shows its requests
and the messages recovered or given up under ``late_join``.  With ``--option "receiver use_otr 1"`` it
counts the messages flagged ``OTR`` (recovered off the transport, UM Concepts Guide 10.3) as
``recovered`` and, when it sent OTR requests, shows them and what was recovered or given up under
``otr``.
"""

from __future__ import annotations

import argparse
import json
import signal
import struct
import sys
import threading
import time
from dataclasses import asdict, dataclass, field, is_dataclass
from typing import Any

from openum._errors import WouldBlock
from openum._message import Message, MsgFlags, MsgType, SourceEvent
from openum._source import AVAILABLE_TRANSPORTS
from openum.cli._args import counter_size, positive
from openum.cli._pacing import paced_batches

__all__ = ["register"]

_COUNTER = struct.Struct(">Q")
#: ``MsgFlags.IMMEDIATE`` as an int: recv tests ``msg._flags`` with it, as the ``flags`` property builds an
#: IntFlag for each call (about 1 microsecond on recv's per-message path).
_IMMEDIATE = int(MsgFlags.IMMEDIATE)
_RETRANSMIT = int(MsgFlags.RETRANSMIT)
_OTR = int(MsgFlags.OTR)
#: Bytes the retention buffer counts per message on top of its payload (its per-message overhead).
_RETENTION_OVERHEAD = 64
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    send = sub.add_parser(
        "send",
        parents=[common],
        help="publish messages on a topic (like lbmsrc)",
        description="Publish --count messages on TOPIC. Message i carries i as an 8-byte "
        "big-endian counter, padded to --size bytes.",
    )
    send.add_argument("topic")
    send.add_argument("--count", type=positive, default=1000, help="messages to send (default 1000)")
    send.add_argument("--size", type=counter_size, default=64, help="payload bytes, at least 8 (default 64)")
    send.add_argument(
        "--rate",
        type=float,
        default=0.0,
        metavar="MSGS_PER_SEC",
        help="send at most this many messages per second (default: as fast as possible); messages that "
        "fall due together are batched, and the batch is flushed whenever the sender has caught up",
    )
    send.add_argument(
        "--transport",
        choices=AVAILABLE_TRANSPORTS,
        default=None,
        help="transport (default: the configuration's 'source transport', tcp)",
    )
    send.add_argument(
        "--delay",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="wait this long after creating the source before the first send, so receivers "
        "can resolve and join (default 1)",
    )
    send.add_argument(
        "--wait-receivers",
        type=int,
        default=0,
        metavar="N",
        help="also wait (up to 60 s) until N receivers have connected (TCP, LBT-RU)",
    )
    send.add_argument(
        "--linger",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="keep the source alive after the last send this long; with LBT-RM/LBT-RU, until no NAK "
        "has arrived for this long, so receivers can repair lost messages (default 1)",
    )
    send.add_argument(
        "--late-join",
        action="store_true",
        help="offer Late Join (source late_join 1) and retain every message of the run "
        "(retransmit_retention_size_threshold and _size_limit sized for --count messages; set them with "
        "--option for other retention); --linger then also waits until no late-join request has arrived "
        "for that long",
    )
    send.add_argument("--json", action="store_true", help="print the summary as JSON on the last line")
    send.set_defaults(handler=cmd_send)

    for name, what in (("recv", "TOPIC"), ("wrecv", "PATTERN")):
        rcv = sub.add_parser(
            name,
            parents=[common],
            help="receive messages on a topic (like lbmrcv)"
            if name == "recv"
            else "receive messages on every topic matching a pattern (like lbmwrcv)",
            description=f"Receive messages on {what}; stop after --count data messages, or "
            "after --timeout seconds without a data message.",
        )
        rcv.add_argument("target", metavar=what)
        rcv.add_argument("--count", type=positive, default=None, help="stop after this many data messages")
        rcv.add_argument(
            "--timeout",
            type=float,
            default=10.0,
            metavar="SECONDS",
            help="stop after this long without a data message (default 10)",
        )
        rcv.add_argument(
            "--verify",
            action="store_true",
            help="check every source's counters arrive as 0, 1, 2, ... (exit 1 otherwise)",
        )
        rcv.add_argument("--json", action="store_true", help="print the summary as JSON on the last line")
        rcv.add_argument(
            "--event-queue",
            action="store_true",
            help="deliver through an event queue dispatched by the main thread",
        )
        rcv.add_argument(
            "--immediate",
            action="store_true",
            help="also receive topicless immediate messages (counted as data messages and under "
            "'topicless'; immediate messages with the topic are received and counted without it)",
        )
        rcv.set_defaults(handler=cmd_recv, wildcard=name == "wrecv")


class _Progress:
    """A live progress line on stderr when it is a terminal."""

    def __init__(self) -> None:
        self.enabled = sys.stderr.isatty()
        self._last = 0.0

    def show(self, text: str, *, force: bool = False) -> None:
        now = time.monotonic()
        if self.enabled and (force or now - self._last >= 0.25):
            self._last = now
            sys.stderr.write("\r" + text.ljust(79)[:120])
            sys.stderr.flush()

    def done(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")


def _emit(summary: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(summary, sort_keys=True))
    else:
        print("  ".join(f"{k}={v}" for k, v in summary.items() if not isinstance(v, dict)))
        for key, value in summary.items():
            if isinstance(value, dict):
                for name, count in sorted(value.items()):
                    shown = count
                    if isinstance(count, dict):  # per-source counters: the non-zero ones
                        shown = " ".join(f"{k}={v}" for k, v in count.items() if v)
                    print(f"  {key}: {name} {shown}")


def _context(args: argparse.Namespace) -> Any:
    from openum._context import Context
    from openum.cli import build_config

    return Context(build_config(args))


# -- send ----------------------------------------------------------------------------------------------


def cmd_send(args: argparse.Namespace) -> int:
    from openum._source import SendFlags

    attrs: dict[str, Any] | None = {"transport": args.transport} if args.transport else None
    if args.late_join:
        retained = args.count * (args.size + _RETENTION_OVERHEAD)
        attrs = {
            **(attrs or {}),
            "late_join": 1,
            "retransmit_retention_size_threshold": retained,
            "retransmit_retention_size_limit": max(retained, 25_165_824),
        }
    progress = _Progress()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    connected = threading.Semaphore(0)
    wakeup = threading.Event()

    def on_event(event: SourceEvent, _info: Any, _clientd: Any) -> None:
        if event is SourceEvent.CONNECT:
            connected.release()
        elif event is SourceEvent.WAKEUP:
            wakeup.set()

    with _context(args) as ctx:
        src = ctx.create_source(args.topic, attrs, event_callback=on_event)
        if args.delay > 0:
            stop.wait(args.delay)
        deadline = time.monotonic() + 60
        for _ in range(args.wait_receivers):
            if not connected.acquire(timeout=max(0.0, deadline - time.monotonic())):
                print(
                    f"openum send: {args.wait_receivers} receiver(s) did not connect within 60 s",
                    file=sys.stderr,
                )
                return EXIT_FAILED
        payload = bytearray(args.size)
        pack = _COUNTER.pack_into
        send = src.send
        none = SendFlags.NONE
        sent = 0
        start = time.monotonic()
        # Intelligent batching (openum.cli._pacing): what is due is sent at once and flushed when the
        # sender has caught up with --rate (unlimited: held back only until the datagram is full).
        batches = paced_batches(
            args.count, args.rate, src.flush, start=start, chunk=1024, clock=time.monotonic, sleep=stop.wait
        )
        try:
            for due in batches:
                while sent < due:
                    pack(payload, 0, sent)
                    send(payload, none)
                    sent += 1
                progress.show(f"sent {sent}/{args.count}")
                if stop.is_set():
                    break
        except WouldBlock:  # pragma: no cover - sends are blocking here
            pass
        except KeyboardInterrupt:
            pass
        src.flush()
        seconds = time.monotonic() - start
        progress.done()
        source_string = src.source_string
        if args.late_join:
            print(
                f"openum send: sent {sent} message(s), retained for late joiners; lingering",
                file=sys.stderr,
                flush=True,
            )
        if args.linger > 0:
            _linger(src, args.linger, stop, ctx if args.late_join else None)
        stats = src.statistics()
        late_join = _late_join_counters(ctx) if args.late_join else None
        src.close()
    # The real rate: ``seconds`` runs from the first send to the flush after the last one, so it
    # includes every wait for room (blocked_seconds of it).
    rate = sent / seconds if seconds > 0 else 0.0
    summary: dict[str, Any] = {
        "sent": sent,
        "bytes": sent * args.size,
        "seconds": round(seconds, 6),
        "msgs_per_sec": round(rate, 1),
        "blocked_sends": stats.blocked,
        "transport": src.transport,
        "source": source_string,
    }
    blocked_ns = getattr(stats, "blocked_ns", None)
    if blocked_ns is not None:  # every source transport measures it
        summary["blocked_seconds"] = round(blocked_ns / 1e9, 6)
    engine = getattr(stats, "transport", None)
    if engine is not None:  # LBT-RM / LBT-RU: what the session did for recovery
        summary["recovery"] = {name: getattr(engine, name) for name in _SOURCE_RECOVERY}
    if hasattr(stats, "clients_stalled"):  # TCP: receivers let go or refused, datagrams not sent
        summary["tcp"] = {name: getattr(stats, name) for name in _SOURCE_TCP}
    if late_join is not None:
        summary["late_join"] = late_join
    _emit(summary, args.json)
    return EXIT_OK


#: Context counters ``send --late-join`` shows under ``late_join``.
_SOURCE_LATE_JOIN = (
    "late_join_info_requests_rcved",
    "late_join_rx_requests_rcved",
    "late_join_retransmissions_sent",
    "late_join_rx_requests_not_retained",
)


#: Context counters ``recv`` shows under ``late_join`` when it late-joined a source.
_RECEIVER_LATE_JOIN = (
    "late_join_info_requests_sent",
    "late_join_rx_requests_sent",
    "late_join_msgs_recovered",
    "late_join_msgs_unrecoverable",
)
#: ... and under ``otr`` when it sent OTR requests.
_RECEIVER_OTR = ("otr_rx_requests_sent", "otr_msgs_recovered", "otr_msgs_unrecoverable")


def _late_join_counters(ctx: Any) -> dict[str, int]:
    stats = ctx.statistics()
    return {name.removeprefix("late_join_"): getattr(stats, name) for name in _SOURCE_LATE_JOIN}


#: Source transport counters shown by ``send`` for TCP.
_SOURCE_TCP = ("clients_stalled", "clients_unconfirmed", "clients_rejected", "clients_malformed", "drops")
#: Source transport counters shown by ``send`` for LBT-RM/LBT-RU.
_SOURCE_RECOVERY = ("msgs_sent", "nak_pckts_rcved", "naks_rcved", "rxs_sent", "naks_ignored", "naks_shed")
#: Receiving transport counters shown by ``recv`` for LBT-RM/LBT-RU (summed under ``recovery``).
_RECEIVER_RECOVERY = (
    "msgs_rcved",
    "lost",
    "nak_pckts_sent",
    "naks_sent",
    "rxs_rcved",
    "ncfs_rcved",
    "duplicate_data",
    "unrecovered_txw",
    "unrecovered_tmo",
)


def _linger(src: Any, seconds: float, stop: threading.Event, late_join_ctx: Any = None) -> None:
    """Wait ``seconds``; for a reliable UDP session, until no NAK arrived for ``seconds`` (max 60 s); with
    ``late_join_ctx`` (``--late-join``), also until no late-join request arrived for ``seconds`` (no
    maximum: late joiners may come at any time; stop it with SIGTERM or Ctrl-C)."""
    deadline = time.monotonic() + 60
    seen: tuple[int, int] | None = None
    while not stop.is_set():
        engine = getattr(src.statistics(), "transport", None)
        naks = engine.nak_pckts_rcved if engine is not None else 0
        requests = 0
        if late_join_ctx is not None:
            counters = late_join_ctx.statistics()
            requests = counters.late_join_info_requests_rcved + counters.late_join_rx_requests_rcved
        current = (naks, requests)
        if current == seen or (late_join_ctx is None and time.monotonic() >= deadline):
            return
        seen = current
        try:
            stop.wait(seconds)
        except KeyboardInterrupt:
            return


# -- recv / wrecv ------------------------------------------------------------------------------------


@dataclass
class _Tally:
    received: int = 0
    bytes: int = 0
    gaps: int = 0
    duplicates: int = 0
    out_of_order: int = 0
    bos: int = 0
    eos: int = 0
    immediate: int = 0
    topicless: int = 0
    unrecoverable_loss: int = 0
    unrecoverable_loss_burst: int = 0
    retransmitted: int = 0
    recovered: int = 0
    first: float | None = None
    last: float | None = None
    expected: dict[str, int] = field(default_factory=dict)  # per source: next counter
    seen: dict[str, bytearray] = field(default_factory=dict)
    topics: dict[str, int] = field(default_factory=dict)
    sources: set[str] = field(default_factory=set)
    transport: dict[str, dict[str, Any]] = field(default_factory=dict)  # per source: LBT-RM/RU counters


def _snapshot(ctx: Any, source: str, tally: _Tally) -> None:
    """Keep the receiving transport counters of ``source`` (LBT-RM/LBT-RU sessions have them)."""
    from openum._errors import OpenUMError

    try:
        stats = ctx.retrieve_transport_stats(source)
    except OpenUMError:
        return  # the session is gone already: keep what was captured at EOS
    if is_dataclass(stats) and not isinstance(stats, type) and hasattr(stats, "naks_sent"):
        tally.transport[source] = {k: v for k, v in asdict(stats).items() if isinstance(v, int | bool | None)}


def cmd_recv(args: argparse.Namespace) -> int:
    from openum.runtime import EventQueue

    tally = _Tally()
    done = threading.Event()
    verify = args.verify
    wildcard = args.wildcard
    count = args.count
    unpack = _COUNTER.unpack_from
    progress = _Progress()

    def on_message(msg: Message) -> None:
        kind = msg.type
        if kind is MsgType.DATA:
            now = time.monotonic()
            if tally.first is None:
                tally.first = now
            tally.last = now
            tally.received += 1
            flags = msg._flags
            if flags & _IMMEDIATE:
                tally.immediate += 1
            if flags & _RETRANSMIT:
                tally.retransmitted += 1
            if flags & _OTR:
                tally.recovered += 1
            data = msg.data
            tally.bytes += len(data)
            source = msg.source
            tally.sources.add(source)
            if wildcard and msg.topic:  # a topicless immediate message has none
                tally.topics[msg.topic] = tally.topics.get(msg.topic, 0) + 1
            if verify and len(data) >= 8:
                _verify(tally, source if not wildcard else f"{msg.topic}|{source}", unpack(data, 0)[0])
            if count is not None and tally.received >= count:
                done.set()
        elif kind is MsgType.BOS:
            tally.bos += 1
        elif kind is MsgType.EOS:
            tally.eos += 1
            if evq is None:  # on the context thread: the session's counters are still there
                _snapshot(ctx, msg.source, tally)
        elif kind is MsgType.UNRECOVERABLE_LOSS:
            tally.unrecoverable_loss += 1
        elif kind is MsgType.UNRECOVERABLE_LOSS_BURST:
            tally.unrecoverable_loss_burst += 1

    def on_topicless(msg: Message, _clientd: Any) -> None:
        if msg.type is MsgType.DATA:
            tally.topicless += 1
            on_message(msg)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    evq = EventQueue() if args.event_queue else None
    with _context(args) as ctx:
        if wildcard:
            rcv = ctx.create_wildcard_receiver(args.target, on_message, event_queue=evq)
        else:
            rcv = ctx.create_receiver(args.target, on_message, event_queue=evq)
        if args.immediate:
            ctx.receive_immediate_messages(on_topicless, event_queue=evq)
        target = ctx.immediate_target
        if target is not None:
            print(f"Immediate messaging target: {target}", file=sys.stderr, flush=True)
        seen = 0
        try:
            while not done.is_set() and not stop.is_set():
                if evq is not None:
                    timer = threading.Timer(0.2, evq.unblock)
                    timer.start()
                    evq.dispatch(evq.BLOCK)
                    timer.cancel()
                else:
                    done.wait(0.2)
                got = tally.received != seen  # progress since the last look (no per-message signalling)
                seen = tally.received
                if got:
                    progress.show(f"received {tally.received}" + (f"/{count}" if count else ""))
                    continue
                idle_since = tally.last if tally.last is not None else tally.first
                reference = idle_since if idle_since is not None else _start_time(args)
                if time.monotonic() - reference >= args.timeout:
                    break
        except KeyboardInterrupt:
            pass
        for source in sorted(tally.sources):
            _snapshot(ctx, source, tally)
        context_stats = ctx.statistics()
        dropped = _drop_counters(asdict(context_stats))
        if args.immediate:
            ctx.receive_immediate_messages(None)
        rcv.close()
    if evq is not None:
        evq.close()
    progress.done()
    seconds = (tally.last - tally.first) if tally.first is not None and tally.last is not None else 0.0
    summary: dict[str, Any] = {
        "received": tally.received,
        "bytes": tally.bytes,
        "seconds": round(seconds, 6),
        "msgs_per_sec": round(tally.received / seconds, 1) if seconds > 0 else 0.0,
        "sources": len(tally.sources),
        "gaps": tally.gaps,
        "duplicates": tally.duplicates,
        "out_of_order": tally.out_of_order,
        "unrecoverable_loss": tally.unrecoverable_loss,
        "unrecoverable_loss_burst": tally.unrecoverable_loss_burst,
        "retransmitted": tally.retransmitted,
        "recovered": tally.recovered,
        "bos": tally.bos,
        "eos": tally.eos,
        "immediate": tally.immediate,
    }
    if context_stats.late_join_info_requests_sent:  # it late-joined a source
        summary["late_join"] = {
            name.removeprefix("late_join_"): getattr(context_stats, name) for name in _RECEIVER_LATE_JOIN
        }
    if context_stats.otr_rx_requests_sent:  # it recovered off the transport
        summary["otr"] = {name.removeprefix("otr_"): getattr(context_stats, name) for name in _RECEIVER_OTR}
    if args.immediate:
        summary["topicless"] = tally.topicless
    if wildcard:
        summary["topics"] = dict(sorted(tally.topics.items()))
    if tally.transport:
        summary["recovery"] = {
            name: sum(stats.get(name, 0) for stats in tally.transport.values()) for name in _RECEIVER_RECOVERY
        }
        summary["transport_stats"] = tally.transport
    for stats in tally.transport.values():  # what each receiving transport session dropped
        for name, value in _drop_counters(stats).items():
            dropped[name] = dropped.get(name, 0) + value
    summary["dropped"] = dict(sorted(dropped.items()))
    _emit(summary, args.json)
    complete = count is None or tally.received >= count
    clean = not verify or (tally.gaps == tally.duplicates == tally.out_of_order == 0)
    return EXIT_OK if complete and clean else EXIT_FAILED


#: Words that name a counter of remote input dropped, refused or evicted (issue 23: one place to see it).
_DROP_WORDS = ("dropped", "malformed", "evict", "refused", "unconfirmed")


def _drop_counters(stats: dict[str, Any]) -> dict[str, int]:
    """The counters of ``stats`` that count dropped remote input (every one, zero or not: a stable shape)."""
    return {
        name: value
        for name, value in stats.items()
        if isinstance(value, int) and not isinstance(value, bool) and any(w in name for w in _DROP_WORDS)
    }


_STARTED = time.monotonic()


def _start_time(_args: argparse.Namespace) -> float:
    return _STARTED


def _verify(tally: _Tally, key: str, counter: int) -> None:
    """Counters must arrive as 0, 1, 2, ... per source: count gaps, duplicates and out-of-order ones."""
    got = tally.seen.setdefault(key, bytearray())
    if counter >= len(got):
        if counter > 1 << 32:
            tally.gaps += 1
            return
        got.extend(bytes(counter + 1 - len(got) + 4096))
    if got[counter]:
        tally.duplicates += 1
        return
    got[counter] = 1
    expected = tally.expected.get(key, 0)
    if counter == expected:
        tally.expected[key] = counter + 1
    elif counter > expected:
        tally.gaps += 1
        tally.expected[key] = counter + 1
    else:
        tally.out_of_order += 1
