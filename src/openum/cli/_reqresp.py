"""``openum resp``, ``openum req`` and ``openum imsg``: request/response and immediate messages (like UM's
lbmresp, lbmreq and lbmimsg; CLI.md).

``resp TOPIC`` receives on TOPIC and answers every ``REQUEST`` message (a request sent on the topic, or an
immediate request to the topic) with one response: the request's first 8 bytes (the counter ``req`` puts
there) padded with zero bytes to ``--size``.  It answers from the receive callback on the context thread,
where ``msg.respond()`` never blocks.  When the connection to a requester already holds
``response_session_maximum_buffer`` bytes (:class:`~openum.WouldBlock`), the request is retained and its
response, and every later one to that requester, waits in a queue the main thread sends out in order.  A
requester that cannot be reached (it went away: :class:`~openum.UimConnectionError`) is reported on stderr
by its ``TCP:ip:port`` and counted; ``resp`` goes on with the other requests.  It takes ``--count``
requests (later ones are left unanswered) and stops once each was answered or failed, or on SIGINT/SIGTERM;
then it waits up to ``DRAIN_SECONDS`` for its responses to be written, and prints its summary; exit status
1 when some response could not be sent.

``req TOPIC`` creates a source on TOPIC and sends ``--count`` requests, one at a time: request i carries i
as an 8-byte big-endian counter padded to ``--size``; it waits for the response echoing i, records the
round trip, closes the request and sends the next one.  A request sent before any responder has resolved
the source and joined its transport is lost, so the first one is sent again every ``--resend`` seconds
until an answer comes, for at most ``--timeout`` seconds; every later request waits up to ``--timeout``
seconds for its answer, and a missing one ends the run (exit status 1).  Responses are matched to
requests by the counter they echo; any other response (to an earlier copy of the first request, from a
second responder) is counted as ``extra``.

``imsg (TOPIC | --topicless) --target T`` sends ``--count`` unicast immediate messages (counter payloads
as ``req``'s) to the context at ``T``: ``HOST:PORT`` or ``TCP:ip:port`` (a context's request port, which
``openum recv`` and ``openum resp`` print as "Immediate messaging target") or ``SOURCE:<source string>``
(the context hosting that source, once this context has heard it advertised).  It then waits until the
messages have left for the target's connection.  ``--multicast`` sends multicast immediate messages
to the MIM group instead (receivers set ``mim_address``).
"""

from __future__ import annotations

import argparse
import collections
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final

from openum._errors import WouldBlock
from openum._immediate import parse_target
from openum._message import Message, MsgType
from openum._source import AVAILABLE_TRANSPORTS
from openum.cli._args import counter_size, positive
from openum.cli._latency import percentiles
from openum.cli._pubsub import _context, _emit, _Progress
from openum.transport.uim import UimConnectionError

__all__ = ["DRAIN_SECONDS", "parse_imsg_target", "register"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
_COUNTER: Final = struct.Struct(">Q")
#: How long ``resp`` and ``imsg`` wait at the end for what they queued to be written to its connections.
DRAIN_SECONDS: Final = 10.0
#: How often ``resp``'s main thread looks at its counters (dropped responses) when nothing else wakes it.
_RESP_TICK: Final = 0.5
#: The longest a waiting main thread goes without looking whether SIGINT/SIGTERM arrived.
_SIGNAL_TICK: Final = 0.1
#: How often queued responses (``WouldBlock``) and queued immediate messages are tried again.
_RETRY_TICK: Final = 0.002


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    resp = sub.add_parser(
        "resp",
        parents=[common],
        help="answer every request on a topic (like lbmresp)",
        description="Receive on TOPIC and answer every request with one response: the request's first "
        "8 bytes (its counter), padded with zero bytes to --size. Stops after --count requests, or on "
        "SIGINT/SIGTERM, with a summary.",
    )
    resp.add_argument("topic")
    resp.add_argument(
        "--count",
        type=positive,
        default=None,
        help="stop after this many requests (default: run until SIGINT/SIGTERM)",
    )
    resp.add_argument(
        "--size",
        type=counter_size,
        default=8,
        help="response bytes, at least 8: the echoed counter, then zero bytes (default 8)",
    )
    resp.add_argument("--json", action="store_true", help="print the summary as JSON on the last line")
    resp.set_defaults(handler=cmd_resp)

    req = sub.add_parser(
        "req",
        parents=[common],
        help="send requests on a topic and wait for each response (like lbmreq)",
        description="Send --count requests on TOPIC, one at a time (request i carries i as an 8-byte "
        "big-endian counter, padded to --size), wait for each response, and report round-trip times. "
        "Exit status 0 only when every request got its response.",
    )
    req.add_argument("topic")
    req.add_argument("--count", type=positive, default=1000, help="requests to send (default 1000)")
    req.add_argument("--size", type=counter_size, default=64, help="request bytes, at least 8 (default 64)")
    req.add_argument(
        "--transport",
        choices=AVAILABLE_TRANSPORTS,
        default=None,
        help="transport (default: the configuration's 'source transport', tcp)",
    )
    req.add_argument(
        "--timeout",
        type=_positive_seconds,
        default=10.0,
        metavar="SECONDS",
        help="give up when a request has no response after this long; the first request is sent again "
        "every --resend seconds within it, until a responder has joined (default 10)",
    )
    req.add_argument(
        "--resend",
        type=_positive_seconds,
        default=0.2,
        metavar="SECONDS",
        help="send the first request again when its response is this late (default 0.2)",
    )
    req.add_argument("--json", action="store_true", help="print the summary as JSON on the last line")
    req.set_defaults(handler=cmd_req)

    imsg = sub.add_parser(
        "imsg",
        parents=[common],
        help="send immediate messages to a context (like lbmimsg)",
        description="Send --count immediate messages with TOPIC (or topicless ones) to the context at "
        "--target, or as multicast immediate messages. Message i carries i as an 8-byte big-endian "
        "counter, padded to --size.",
    )
    imsg.add_argument("topic", nargs="?", default=None, help="the messages' topic (or --topicless)")
    imsg.add_argument("--topicless", action="store_true", help="send topicless immediate messages (no TOPIC)")
    imsg.add_argument(
        "--target",
        type=parse_imsg_target,
        default=None,
        metavar="HOST:PORT",
        help="the receiving context's request port, as HOST:PORT or TCP:ip:port (`openum recv` prints it "
        "as 'Immediate messaging target'), or SOURCE:<source string> (the context hosting that source)",
    )
    imsg.add_argument(
        "--multicast",
        action="store_true",
        help="send multicast immediate messages to the MIM group (mim_outgoing_address:"
        "mim_outgoing_destination_port; receivers set mim_address) instead of unicast ones to --target",
    )
    imsg.add_argument("--count", type=positive, default=1000, help="messages to send (default 1000)")
    imsg.add_argument("--size", type=counter_size, default=64, help="payload bytes, at least 8 (default 64)")
    imsg.add_argument(
        "--timeout",
        type=_positive_seconds,
        default=10.0,
        metavar="SECONDS",
        help="wait at most this long for a SOURCE: target to be resolved, and for the messages to leave "
        "(default 10)",
    )
    imsg.add_argument("--json", action="store_true", help="print the summary as JSON on the last line")
    imsg.set_defaults(handler=cmd_imsg)


def _positive_seconds(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, not {text}")
    return value


def parse_imsg_target(text: str) -> str:
    """``--target``: ``HOST:PORT`` (as ``TCP:ip:port``), ``TCP:ip:port`` or ``SOURCE:<source string>``."""
    forms = "HOST:PORT, TCP:ip:port (a context's request port) or SOURCE:<source string>"
    if text.count(":") == 1:  # HOST:PORT
        host, sep, port = text.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise argparse.ArgumentTypeError(f"{text!r} is not a target; allowed: {forms}")
        try:
            ip = socket.gethostbyname(host)
        except OSError as exc:
            raise argparse.ArgumentTypeError(f"{text!r}: cannot resolve host {host!r} ({exc})") from None
        text = f"TCP:{ip}:{int(port)}"
    try:
        parse_target(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


class _Signals:
    """Counts SIGINT and SIGTERM while installed: the command then ends with its summary.

    The handler takes no lock: it runs in the main thread between two bytecodes, possibly inside a lock
    the main thread holds (setting a ``threading.Event`` there could deadlock), so the main thread looks
    at :attr:`count` at least every ``_SIGNAL_TICK`` seconds instead of being woken."""

    def __init__(self) -> None:
        self.count = 0

    def _handle(self, _signum: int, _frame: Any) -> None:
        self.count += 1

    @property
    def stopped(self) -> bool:
        return self.count > 0

    @contextmanager
    def installed(self) -> Iterator[_Signals]:
        previous: dict[signal.Signals, Any] = {}
        try:
            for sig in (signal.SIGINT, signal.SIGTERM):
                previous[sig] = signal.signal(sig, self._handle)
        except ValueError:  # not the main thread: no signal handling
            pass
        try:
            yield self
        finally:
            for signum, old in previous.items():
                signal.signal(signum, old)


def _print_target(ctx: Any) -> None:
    """What UM's example programs print: where immediate messages and UIM requests reach this context."""
    target = ctx.immediate_target
    if target is not None:
        print(f"Immediate messaging target: {target}", file=sys.stderr, flush=True)


def _drain(ctx: Any, seconds: float, stop: Callable[[], bool], pending: Callable[[], bool]) -> bool:
    """Wait until nothing waits to be written to a UIM connection (and ``pending()`` is false), for at
    most ``seconds`` or until ``stop()``; True when drained."""
    deadline = time.monotonic() + seconds
    while True:
        if not pending() and ctx.statistics().uim_out_bytes_queued == 0:
            return True
        if stop() or time.monotonic() >= deadline:
            return False
        time.sleep(0.01)


# -- resp ------------------------------------------------------------------------------------------


class _Responder:
    """Answers requests from the receive callback; queues behind a WouldBlock, per requester."""

    def __init__(self, size: int, count: int | None) -> None:
        self.size = size
        self.count = count
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.done = threading.Event()
        #: Per requester (``TCP:ip:port``): retained requests and their responses, waiting for room.
        self.pending: dict[str, collections.deque[tuple[Message, bytes]]] = {}
        self.requests = 0
        self.responses = 0
        self.unreachable = 0
        self.blocked = 0
        self.requesters: set[str] = set()
        self._reported: set[str] = set()  # requesters whose failure was reported (until one gets through)

    def payload(self, data: bytes | memoryview) -> bytes:
        out = bytearray(self.size)
        head = bytes(data[:8])
        out[: len(head)] = head
        return bytes(out)

    def on_message(self, msg: Message) -> None:
        if msg.type is not MsgType.REQUEST or msg.response is None:
            return
        target: str = msg.response.target
        payload = self.payload(msg.data)
        with self.lock:
            if self.count is not None and self.requests >= self.count:
                return  # --count requests were taken: later ones are left unanswered
            self.requests += 1
            self.requesters.add(target)
            queue = self.pending.get(target)
            if queue is None and self._try(msg, target, payload):
                return
            if queue is None:
                self.blocked += 1
                queue = self.pending[target] = collections.deque()
            queue.append((msg.retain(), payload))
        self.wake.set()

    def _try(self, msg: Message, target: str, payload: bytes) -> bool:
        """Respond (lock held); False when it would block (the request waits in the queue)."""
        try:
            msg.respond(payload)
        except WouldBlock:
            return False
        except UimConnectionError as exc:
            self.unreachable += 1
            if target not in self._reported:  # once per failure, not once per queued request
                self._reported.add(target)
                print(
                    f"openum resp: cannot answer a request from {target}: {exc}", file=sys.stderr, flush=True
                )
        else:
            self.responses += 1
            self._reported.discard(target)
        if self.count is not None and self.responses + self.unreachable >= self.count:
            self.done.set()
            self.wake.set()
        return True

    def send_pending(self) -> None:
        """Send what waits, in order per requester, until one would block again (main thread)."""
        with self.lock:
            for target in list(self.pending):
                queue = self.pending[target]
                while queue:
                    msg, payload = queue[0]
                    if not self._try(msg, target, payload):
                        break
                    queue.popleft()
                    msg.release()
                if not queue:
                    del self.pending[target]

    def queued(self) -> int:
        with self.lock:
            return sum(len(q) for q in self.pending.values())

    def abandon(self) -> int:
        """Release what still waits (the run is over); how many requests that leaves unanswered."""
        with self.lock:
            left = 0
            for queue in self.pending.values():
                for msg, _payload in queue:
                    msg.release()
                    left += 1
            self.pending.clear()
            return left


def cmd_resp(args: argparse.Namespace) -> int:
    responder = _Responder(args.size, args.count)
    with _Signals().installed() as signals, _context(args) as ctx:
        rcv = ctx.create_receiver(args.topic, responder.on_message)
        _print_target(ctx)
        start = time.monotonic()
        dropped_seen = 0
        last_look = start
        while not responder.done.is_set() and not signals.stopped:
            responder.wake.wait(_RETRY_TICK if responder.queued() else _SIGNAL_TICK)
            responder.wake.clear()
            responder.send_pending()
            now = time.monotonic()
            if now - last_look >= _RESP_TICK:
                last_look = now
                dropped_seen = _report_dropped(ctx, dropped_seen)
        # Stop taking requests, then let what was answered reach its requesters (a second signal cuts
        # this short).
        rcv.close()
        interrupted = signals.count

        def still_queued() -> bool:
            responder.send_pending()
            return responder.queued() > 0

        drained = _drain(ctx, DRAIN_SECONDS, lambda: signals.count > interrupted, still_queued)
        seconds = time.monotonic() - start
        left = responder.abandon()
        stats = ctx.statistics()
        dropped = stats.uim_out_msgs_dropped
        _report_dropped(ctx, dropped_seen)
        if not drained:
            print(
                f"openum resp: {stats.uim_out_bytes_queued} response bytes still waited for their "
                f"requesters after {DRAIN_SECONDS:g} s, and {left} request(s) for room: given up",
                file=sys.stderr,
            )
    # ``dropped`` responses were accepted by respond() and then lost with their connection: errors too.
    errors = responder.unreachable + dropped + left
    summary: dict[str, Any] = {
        "requests": responder.requests,
        "responses": responder.responses - dropped,
        "errors": errors,
        "unreachable": responder.unreachable,
        "dropped": dropped,
        "pending": left,
        "blocked": responder.blocked,
        "requesters": len(responder.requesters),
        "bytes": (responder.responses - dropped) * args.size,
        "size": args.size,
        "seconds": round(seconds, 6),
    }
    _emit(summary, args.json)
    return EXIT_OK if errors == 0 else EXIT_FAILED


def _report_dropped(ctx: Any, seen: int) -> int:
    """Say so when responses queued for a requester were dropped (its connection failed)."""
    dropped: int = ctx.statistics().uim_out_msgs_dropped
    if dropped > seen:
        print(
            f"openum resp: {dropped - seen} response(s) dropped: the connection to their requester failed "
            "(the warning above names it)",
            file=sys.stderr,
            flush=True,
        )
    return dropped


# -- req -------------------------------------------------------------------------------------------


class _Requester:
    """The request in flight and the round trips; responses arrive on the context thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.current = -1  # the counter awaited (-1: none)
        self.answered = False
        self.sent_ns = 0
        self.responses = 0
        self.extra = 0
        self.rtts: list[int] = []

    def on_response(self, msg: Message) -> None:
        now = time.perf_counter_ns()
        if msg.type is not MsgType.RESPONSE:
            return
        data = msg.data
        counter = _COUNTER.unpack_from(data, 0)[0] if len(data) >= 8 else -1
        with self.lock:
            if counter != self.current or self.answered:
                self.extra += 1
                return
            self.answered = True
            self.responses += 1
            if counter:  # the first one's answer includes setting up, and may answer an earlier copy
                self.rtts.append(now - self.sent_ns)
        self.wake.set()

    def expect(self, counter: int) -> None:
        with self.lock:
            self.current = counter
            self.answered = False
        self.wake.clear()

    def mark_sent(self) -> None:
        with self.lock:
            self.sent_ns = time.perf_counter_ns()

    def wait(self, seconds: float, signals: _Signals) -> bool:
        """True once the awaited response came; False after ``seconds`` or when stopped."""
        end = time.monotonic() + seconds
        while True:
            with self.lock:
                if self.answered:
                    return True
            left = end - time.monotonic()
            if signals.stopped or left <= 0:
                return False
            self.wake.wait(min(left, _SIGNAL_TICK))
            self.wake.clear()


def cmd_req(args: argparse.Namespace) -> int:
    from openum._source import SendFlags

    attrs = {"transport": args.transport} if args.transport else None
    requester = _Requester()
    progress = _Progress()
    payload = bytearray(args.size)
    flush = SendFlags.FLUSH

    requests = sent = 0
    unanswered: int | None = None  # the counter that got no response
    with _Signals().installed() as signals, _context(args) as ctx:
        src = ctx.create_source(args.topic, attrs)
        start = time.monotonic()
        for counter in range(args.count):
            if signals.stopped:
                break
            _COUNTER.pack_into(payload, 0, counter)
            data = bytes(payload)
            requester.expect(counter)
            requests += 1
            deadline = time.monotonic() + args.timeout
            interval = args.resend if counter == 0 else args.timeout
            open_requests = []
            try:
                while True:
                    requester.mark_sent()
                    open_requests.append(src.send_request(data, requester.on_response, counter, flags=flush))
                    sent += 1
                    left = deadline - time.monotonic()
                    if requester.wait(min(interval, max(0.0, left)), signals):
                        break
                    if signals.stopped or time.monotonic() >= deadline:
                        unanswered = counter
                        break
            finally:
                for request in open_requests:
                    request.close()
            if unanswered is not None:
                break
            progress.show(f"answered {requester.responses}/{args.count}")
        seconds = time.monotonic() - start
        progress.done()
        late = ctx.statistics().response_msgs_dropped
        source_string = src.source_string
        src.close()
    with requester.lock:
        responses, extra, rtts = requester.responses, requester.extra, list(requester.rtts)
    summary: dict[str, Any] = {
        "requests": requests,
        "responses": responses,
        "missing": args.count - responses,
        "sent": sent,
        "retries": sent - requests,
        "extra": extra,
        "late": late,
        "size": args.size,
        "seconds": round(seconds, 6),
        "transport": src.transport,
        "source": source_string,
        "rtt_us": percentiles(rtts),
    }
    _emit(summary, args.json)
    if responses == args.count:
        return EXIT_OK
    if unanswered is not None and not signals.stopped:
        print(
            f"openum req: request {unanswered} got no response within {args.timeout:g} s "
            f"({responses} of {args.count} requests answered)",
            file=sys.stderr,
        )
    else:
        print(f"openum req: stopped: {responses} of {args.count} requests answered", file=sys.stderr)
    return EXIT_FAILED


# -- imsg ------------------------------------------------------------------------------------------


def _usage(message: str) -> int:
    print(f"openum imsg: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def _source_known(ctx: Any, source: str) -> bool:
    """Whether ``source`` (with or without its ``[index]``) is in the context's resolver cache."""
    for known in ctx.resolver_cache():
        if known == source or (known.endswith("]") and known.split("[", 1)[0] == source):
            return True
    return False


def cmd_imsg(args: argparse.Namespace) -> int:
    from openum.wire.lbmr import ResolutionRequestFlags

    if (args.topic is None) == (not args.topicless):
        return _usage("give either TOPIC or --topicless (topicless immediate messages), not both or neither")
    if args.multicast and args.target is not None:
        return _usage("--multicast sends to the MIM group (mim_outgoing_address): it takes no --target")
    if not args.multicast and args.target is None:
        return _usage("--target HOST:PORT is required (or --multicast)")
    topic: str | None = args.topic
    target: str | None = args.target
    progress = _Progress()
    payload = bytearray(args.size)
    sent = blocked = 0
    failure: str | None = None
    with _Signals().installed() as signals, _context(args) as ctx:
        if target is not None and target.startswith("SOURCE:"):
            source = target[len("SOURCE:") :]
            ctx.topic_resolution_request(ResolutionRequestFlags.ADVERTISEMENT)
            deadline = time.monotonic() + args.timeout
            while not _source_known(ctx, source):
                if signals.stopped or time.monotonic() >= deadline:
                    print(
                        f"openum imsg: source {source!r} was not resolved within {args.timeout:g} s "
                        "(no advertisement of it was heard)",
                        file=sys.stderr,
                    )
                    return EXIT_FAILED
                time.sleep(0.05)

        def send(data: bytes) -> None:
            if target is None:
                ctx.multicast_immediate_message(data, topic=topic)
            else:
                ctx.unicast_immediate_message(target, data, topic=topic)

        start = time.monotonic()
        while sent < args.count and not signals.stopped and failure is None:
            _COUNTER.pack_into(payload, 0, sent)
            data = bytes(payload)
            waited = False
            while not signals.stopped:
                try:
                    send(data)
                except WouldBlock:
                    waited = True
                    time.sleep(_RETRY_TICK)  # the connection's queue is full: wait for it to move
                    continue
                except UimConnectionError as exc:
                    failure = str(exc)
                    break
                sent += 1
                break
            blocked += waited
            progress.show(f"sent {sent}/{args.count}")
        seconds = time.monotonic() - start
        progress.done()
        interrupted = signals.count  # what was sent still goes out; a further signal cuts this short
        drained = target is None or _drain(
            ctx, args.timeout, lambda: signals.count > interrupted, lambda: False
        )
        stats = ctx.statistics()
        dropped = stats.uim_out_msgs_dropped if target is not None else 0
        queued = stats.uim_out_bytes_queued if target is not None else 0
    summary: dict[str, Any] = {
        "sent": sent,
        "bytes": sent * args.size,
        "seconds": round(seconds, 6),
        "msgs_per_sec": round(sent / seconds, 1) if seconds > 0 else 0.0,
        "blocked": blocked,
        "dropped": dropped,
        "target": target or "multicast",
        "topic": topic,
    }
    _emit(summary, args.json)
    where = target or "the multicast immediate messaging group"
    if failure is not None:
        print(f"openum imsg: cannot send to {where}: {failure}", file=sys.stderr)
    elif dropped:
        print(f"openum imsg: {dropped} message(s) to {where} dropped: the connection failed", file=sys.stderr)
    elif not drained:
        print(
            f"openum imsg: {queued} bytes still waited for {where} after {args.timeout:g} s: given up",
            file=sys.stderr,
        )
    elif sent < args.count:
        print(f"openum imsg: stopped: {sent} of {args.count} messages sent", file=sys.stderr)
    return EXIT_OK if sent == args.count and not dropped and drained and failure is None else EXIT_FAILED
