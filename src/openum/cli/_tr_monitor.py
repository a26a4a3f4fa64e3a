"""``openum tr-monitor``: join topic resolution and print what it sees (CLI.md "Topic resolution").

A debugging tool for operators: which sources advertise which topics (TIRs), who asks (TQRs, wildcard
TQRs), and everything else that travels on the resolver (seed 8.1 UDP-based topic resolution; the LBMR
datagrams of W1).  It never answers anything.

- **Multicast** (no ``resolver_unicast_daemon``): bind the resolver group and port with SO_REUSEADDR and
  SO_REUSEPORT (the contexts on this host share the port; each socket gets its own copy of every
  multicast datagram) and join the group on ``resolver_multicast_interface`` (else
  ``default_interface``).
- **Unicast** (seed 8.1.9, chapters 15-16): bind the first free port of
  ``resolver_unicast_port_low..high`` on ``resolver_unicast_interface`` (else ``default_interface``) and
  send a keepalive to every configured lbmrd every ``resolver_unicast_keepalive_interval``; a keepalive
  makes the monitor an lbmrd client, so the daemon forwards every TIR and TQR to it.  The daemons'
  keepalive answers are not printed unless ``--show-keepalives``.

One line per record (a datagram with three TIRs prints three lines): the receive time, the kind, the
topic or pattern, the transport, the source string (seed 3.3.1, :mod:`openum._source_string`) and the
sender; ``--json`` prints one object per line instead.  Remote garbage is a ``MALFORMED`` line and a
counter, never a crash (PRACTICES.md 6).  On exit a summary goes to stderr (and, with ``--json``, a
``SUMMARY`` object is the last stdout line, CLI.md).

Exit status: 0 done (``--duration`` elapsed, SIGINT or SIGTERM); 1 the socket could not be bound or the
group joined; 2 bad usage or configuration.
"""

from __future__ import annotations

import argparse
import json
import re
import selectors
import signal
import socket
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from types import FrameType
from typing import IO, Any, Final

from openum._source_string import SourceString, SourceStringError
from openum.daemons.lbmrd._interface import InterfaceError, resolve_interface
from openum.wire import WireError, lbmr

__all__ = ["Monitor", "Record", "records_of", "register", "run"]

EXIT_OK: Final = 0
EXIT_BIND: Final = 1
EXIT_USAGE: Final = 2

_PROG: Final = "tr-monitor"
_MAX_DATAGRAM: Final = 65535
_BATCH: Final = 1000  # datagrams read per wake-up before timers and signals get a turn
_KEEPALIVE: Final = lbmr.encode_packet(lbmr.LbmrPacket(lbmr.ResolverKeepalive()))
_KEEPALIVE_KINDS: Final = frozenset({"KEEPALIVE", "RCV-ALIVE", "SRC-ALIVE"})
_MIN_KEEPALIVE_S: Final = 0.01

DESCRIPTION: Final = (
    "Join topic resolution and print every record seen: TIRs (advertisements), TQRs and wildcard TQRs "
    "(queries), topic management, context information and the rest of LBMR. Multicast topic resolution "
    "unless the configuration names lbmrd daemons (context resolver_unicast_daemon), in which case the "
    "monitor registers with them by keepalives and prints what they forward."
)
EPILOG: Final = (
    "Columns: time, kind, topic or pattern, transport, source string, sender (and details). "
    "--json prints one object per line with keys time (epoch seconds), kind, topic or pattern, transport, "
    "source, sender, and for TIRs topic_index and options; a final object of kind SUMMARY. "
    "A summary goes to stderr on exit. Exit status: 0 done, 1 cannot bind or join, 2 bad usage or "
    "configuration."
)


# ---- records: what one datagram says, one line each (pure; no I/O)


@dataclass(frozen=True, slots=True)
class Record:
    """One printed line: a TIR, a TQR, a keepalive, ... (``kind``) and what it names."""

    kind: str
    topic: str | None = None
    pattern: str | None = None
    transport: str | None = None
    source: str | None = None
    topic_index: int | None = None
    options: tuple[str, ...] | None = None
    detail: str | None = None


_TRANSPORT_NAMES: Final[dict[type, str]] = {
    lbmr.TcpTransport: "tcp",
    lbmr.LbtrmTransport: "lbtrm",
    lbmr.LbtruTransport: "lbtru",
    lbmr.LbtipcTransport: "lbtipc",
    lbmr.LbtsmxTransport: "lbtsmx",
    lbmr.LbtrdmaTransport: "lbtrdma",
}


def _transport_name(xport: lbmr.Transport) -> str:
    if isinstance(xport, lbmr.UnknownTransport):
        return f"unknown-0x{xport.type:02x}"
    return _TRANSPORT_NAMES.get(type(xport), type(xport).__name__)


def _option_name(opt: object) -> str:
    """``LateJoinOption`` -> ``late_join``; an unknown option by its type number."""
    if isinstance(opt, lbmr.UnknownOption):
        return f"unknown_0x{opt.type:02x}"
    name = type(opt).__name__.removesuffix("Option")
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def _flag_names(flags: int, enum: Any) -> str:
    names = [m.name.lower() for m in enum if m.value & flags]
    rest = flags & ~sum(m.value for m in enum)
    if rest:
        names.append(f"0x{rest:x}")
    return ",".join(names) or "none"


def _tir(info: lbmr.TopicInfo, include_topic_index: bool) -> Record:
    try:
        source: str | None = SourceString.from_topic_info(info).format(include_topic_index)
    except SourceStringError:  # LBT-RDMA, unknown transport types: no source string format
        source = None
    return Record(
        "TIR",
        topic=info.topic,
        transport=_transport_name(info.transport),
        source=source,
        topic_index=info.index,
        options=tuple(_option_name(o) for o in info.options),
    )


def _tmr_records(body: lbmr.TopicManagement) -> Iterator[Record]:
    if not body.records:
        yield Record("TMR", detail="no records")
    for rec in body.records:
        what = {lbmr.TMR_USE: "use", lbmr.TMR_LEAVE: "leave"}.get(rec.type, f"type {rec.type}")
        flags = lbmr.TopicManagementFlags(rec.flags & 0xE0)
        detail = what + (
            "" if not rec.flags else f" flags={_flag_names(rec.flags, lbmr.TopicManagementFlags)}"
        )
        wildcard = flags & (
            lbmr.TopicManagementFlags.WILDCARD_PCRE | lbmr.TopicManagementFlags.WILDCARD_REGEX
        )
        if wildcard:
            yield Record("TMR", pattern=rec.topic, detail=detail)
        else:
            yield Record("TMR", topic=rec.topic, detail=detail)


def _context_info(body: lbmr.ContextInfo) -> Record:
    parts = ["query" if body.flags & lbmr.ContextInfoFlags.QUERY else "response"]
    if body.name is not None:
        parts.append(f"name={body.name}")
    if body.flags & lbmr.ContextInfoFlags.IP:
        parts.append(f"address={body.ip}:{body.port}")
    if body.flags & lbmr.ContextInfoFlags.INSTANCE:
        parts.append(f"instance={body.instance.hex()}")
    other = body.flags & ~(
        lbmr.ContextInfoFlags.QUERY | lbmr.ContextInfoFlags.IP | lbmr.ContextInfoFlags.INSTANCE
    )
    if other & ~0x0001:  # the name bit is shown by name=
        parts.append(f"flags={_flag_names(other & ~0x0001, lbmr.ContextInfoFlags)}")
    return Record("CONTEXT-INFO", detail=" ".join(parts))


def records_of(packet: lbmr.LbmrPacket, include_topic_index: bool = True) -> list[Record]:
    """The records of one decoded datagram, in datagram order (TQRs before TIRs, W1 §3.2)."""
    body = packet.body
    out: list[Record] = []
    if isinstance(body, lbmr.TopicResolution):
        out += [Record("TQR", topic=q.topic) for q in body.queries]
        out += [_tir(i, include_topic_index) for i in body.infos]
    elif isinstance(body, lbmr.WildcardResolution):
        out += [
            Record(
                "WTQR", pattern=q.pattern, detail="pcre" if q.pattern_type == lbmr.PATTERN_PCRE else "regex"
            )
            for q in body.queries
        ]
        out += [_tir(i, include_topic_index) for i in body.infos]
        if not out:
            out.append(Record("WTQR", detail="no records"))
    elif isinstance(body, lbmr.ResolverKeepalive):
        out.append(Record("KEEPALIVE"))
    elif isinstance(body, lbmr.ReceiverAlive):
        out.append(Record("RCV-ALIVE"))
    elif isinstance(body, lbmr.SourceAlive):
        out.append(Record("SRC-ALIVE"))
    elif isinstance(body, lbmr.TopicManagement):
        out += _tmr_records(body)
    else:
        out += _other_records(body)
    return out


def _other_records(body: lbmr.Body) -> list[Record]:
    """Queue resolution, the extended types and gateway messages (W1 §8, §9): one line each."""
    out: list[Record] = []
    if isinstance(body, lbmr.QueueResolution):
        out += [Record("QQR", detail=f"queue={q.queue}") for q in body.queries]
        out += [Record("QIR", topic=i.topic, detail=f"queue={i.queue} id={i.queue_id}") for i in body.infos]
        if not out:
            out.append(Record("QQR", detail="no records"))
    elif isinstance(body, lbmr.ProxySourceElection):
        out.append(
            Record(
                "PSER",
                topic=body.topic,
                topic_index=body.topic_index,
                detail=f"source={body.source_ip}:{body.source_port} store={body.store_ip}:{body.store_port}",
            )
        )
    elif isinstance(body, lbmr.QueueManagement):
        out.append(Record("QUEUE-MGMT", detail=f"type={body.packet_type} queue_id={body.queue_id}"))
    elif isinstance(body, lbmr.ContextInfo):
        out.append(_context_info(body))
    elif isinstance(body, lbmr.TopicResolutionRequest):
        out.append(Record("TR-REQUEST", detail=_flag_names(body.flags, lbmr.ResolutionRequestFlags)))
    elif isinstance(body, lbmr.GatewayInterest):
        for rec in body.records:
            detail = f"domain={rec.domain_id} flags={_flag_names(rec.flags, lbmr.InterestFlags)}"
            if rec.flags & lbmr.InterestFlags.PATTERN:
                out.append(Record("GW-INTEREST", pattern=rec.symbol, detail=detail))
            else:
                out.append(Record("GW-INTEREST", topic=rec.symbol, detail=detail))
        if not out:
            out.append(Record("GW-INTEREST", detail="no records"))
    elif isinstance(body, lbmr.GatewayContextInfo):
        out.append(Record("GW-CONTEXT-INFO", detail=f"flags1=0x{body.flags1:08x} hops={body.hop_count}"))
    elif isinstance(body, lbmr.GatewayTopicResolutionRequest):
        out.append(Record("GW-TR-REQUEST"))
    elif isinstance(body, lbmr.RemoteDomainRoute):
        domains = ",".join(str(d) for d in body.domains) or "none"
        out.append(Record("REMOTE-DOMAIN-ROUTE", detail=f"gateway={body.ip}:{body.port} domains={domains}"))
    elif isinstance(body, lbmr.RemoteContextInfo):
        out.append(Record("REMOTE-CONTEXT-INFO", detail=f"records={len(body.records)}"))
    else:  # a body type added to the codec later
        out.append(Record(type(body).__name__.upper()))
    return out


# ---- output


def _clean(text: str) -> str:
    """Names are decoded with surrogateescape (W1 §2): show undecodable bytes as ``\\xNN``."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _printable(text: str) -> str:
    """One line whatever the topic holds: control characters as ``\\xNN``."""
    return re.sub(r"[\x00-\x1f\x7f]", lambda m: f"\\x{ord(m.group()):02x}", _clean(text))


def _local_time(t: float) -> str:
    return datetime.fromtimestamp(t).astimezone().isoformat(timespec="milliseconds")


# time (29: 2024-05-01T12:34:56.789+02:00), kind, topic or pattern, transport, source, sender
_WIDTHS: Final = (29, 12, 28, 10, 50, 21)
_HEADER: Final = ("TIME", "KIND", "TOPIC/PATTERN", "TRANSPORT", "SOURCE", "SENDER")


def _columns(cells: tuple[str, ...], tail: str = "") -> str:
    line = " ".join(f"{c:<{w}}" for c, w in zip(cells, _WIDTHS, strict=True))
    return (line + "  " + tail if tail else line).rstrip() + "\n"


class Monitor:
    """Turns datagrams into lines and counts them (no sockets: :func:`run` feeds it)."""

    def __init__(
        self,
        out: IO[str],
        *,
        as_json: bool = False,
        include_topic_index: bool = True,
        hide_keepalives: bool = False,
    ) -> None:
        self.out = out
        self.as_json = as_json
        self.include_topic_index = include_topic_index
        self.hide_keepalives = hide_keepalives
        self.datagrams = 0
        self.malformed = 0
        self.records: Counter[str] = Counter()
        self.hidden = 0
        self.topics: set[str] = set()
        self.patterns: set[str] = set()

    def header(self) -> None:
        if not self.as_json:
            self.out.write(_columns(_HEADER))

    def datagram(self, data: bytes, sender: tuple[str, int], now: float) -> None:
        """Print and count one datagram received from ``sender`` at ``now`` (epoch seconds)."""
        self.datagrams += 1
        where = f"{sender[0]}:{sender[1]}"
        try:
            packet = lbmr.decode_packet(data)
        except WireError as exc:
            self.malformed += 1
            self._malformed(now, where, len(data), str(exc))
            return
        for rec in records_of(packet, self.include_topic_index):
            self.records[rec.kind] += 1
            if rec.topic is not None:
                self.topics.add(rec.topic)
            if rec.pattern is not None:
                self.patterns.add(rec.pattern)
            if self.hide_keepalives and rec.kind in _KEEPALIVE_KINDS:
                self.hidden += 1
                continue
            self._record(now, where, rec)

    def _record(self, now: float, sender: str, rec: Record) -> None:
        if self.as_json:
            obj: dict[str, Any] = {"time": now, "kind": rec.kind}
            if rec.pattern is not None:
                obj["pattern"] = _clean(rec.pattern)
            else:
                obj["topic"] = None if rec.topic is None else _clean(rec.topic)
            obj["transport"] = rec.transport
            obj["source"] = rec.source
            obj["sender"] = sender
            if rec.kind == "TIR":
                obj["topic_index"] = rec.topic_index
                obj["options"] = list(rec.options or ())
            if rec.detail is not None:
                obj["detail"] = _clean(rec.detail)
            self.out.write(json.dumps(obj) + "\n")
            return
        name = rec.pattern if rec.pattern is not None else rec.topic
        detail = rec.detail or ""
        if rec.kind == "TIR" and rec.options:
            detail = "options=" + ",".join(rec.options)
        cells = (
            _local_time(now),
            rec.kind,
            "-" if name is None else _printable(name),
            rec.transport or "-",
            rec.source or "-",
            sender,
        )
        self.out.write(_columns(cells, _printable(detail)))

    def _malformed(self, now: float, sender: str, size: int, error: str) -> None:
        if self.as_json:
            obj = {"time": now, "kind": "MALFORMED", "sender": sender, "size": size, "error": error}
            self.out.write(json.dumps(obj) + "\n")
        else:
            cells = (_local_time(now), "MALFORMED", "-", "-", "-", sender)
            self.out.write(_columns(cells, f"{size} bytes: {_printable(error)}"))

    def summary(self, seconds: float) -> dict[str, Any]:
        return {
            "kind": "SUMMARY",
            "datagrams": self.datagrams,
            "malformed": self.malformed,
            "records": dict(sorted(self.records.items())),
            "topics": len(self.topics),
            "patterns": len(self.patterns),
            "keepalives_not_shown": self.hidden,
            "seconds": round(seconds, 3),
        }

    def summary_text(self, seconds: float) -> str:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(self.records.items())) or "none"
        text = (
            f"{self.datagrams} datagram(s) in {seconds:.1f} s, {self.malformed} malformed; "
            f"records: {kinds}; {len(self.topics)} distinct topic(s), {len(self.patterns)} distinct "
            f"pattern(s)"
        )
        if self.hidden:
            text += f"; {self.hidden} keepalive(s) not shown"
        return text


# ---- sockets


class _BindError(Exception):
    """The socket could not be bound or the group joined; the message says which address and why."""


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _open_multicast(group: str, port: int, interface: str, rcvbuf: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if hasattr(socket, "SO_REUSEPORT"):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if rcvbuf:
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            except OSError:
                pass  # the OS caps it; a smaller buffer only risks drops under bursts
        try:
            sock.bind((group, port))
        except OSError as exc:
            raise _BindError(f"cannot bind UDP {group}:{port}: {_reason(exc)}") from None
        try:
            mreq = socket.inet_aton(group) + socket.inet_aton(interface)
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
        except OSError as exc:
            raise _BindError(
                f"cannot join multicast group {group} on interface {interface}: {_reason(exc)}"
            ) from None
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def _open_unicast(interface: str, ports: range) -> socket.socket:
    last: OSError | None = None
    for port in ports:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.bind((interface, port))
        except OSError as exc:
            sock.close()
            last = exc
            continue
        sock.setblocking(False)
        return sock
    span = f"{ports[0]}-{ports[-1]}" if len(ports) > 1 else str(ports[0])
    why = _reason(last) if last is not None else "empty port range"
    raise _BindError(
        f"cannot bind a UDP port on {interface} in {span} (resolver_unicast_port_low/high): {why}"
    )


def _daemon_address(text: str) -> tuple[str, int]:
    """``[iface->]IP:PORT`` (already validated by the registry) -> ``(IP, PORT)``."""
    addr = text.split("->", 1)[-1]
    host, _, port = addr.rpartition(":")
    return host, int(port)


@dataclass(slots=True)
class _Endpoint:
    sock: socket.socket
    daemons: list[tuple[str, int]]
    keepalive_s: float
    ready: str


def _interface(attrs: Any, option: str) -> str:
    """The local address ``option`` (else ``default_interface``) names; :class:`InterfaceError` naming it."""
    name = option if attrs.get(option) else "default_interface"
    try:
        return resolve_interface(attrs.get(name))
    except InterfaceError as exc:
        raise InterfaceError(f"context {name}: {exc}") from None


def _open(attrs: Any) -> _Endpoint:
    daemons_cfg = attrs.get("resolver_unicast_daemon")
    if not daemons_cfg:
        group = attrs.get("resolver_multicast_incoming_address") or attrs.get("resolver_multicast_address")
        port = attrs.get("resolver_multicast_incoming_port") or attrs.get("resolver_multicast_port")
        interface = _interface(attrs, "resolver_multicast_interface")
        rcvbuf = attrs.get("resolver_multicast_receiver_socket_buffer")
        sock = _open_multicast(group, port, interface, rcvbuf)
        return _Endpoint(sock, [], 0.0, f"listening on {group}:{port} via {interface}")
    interface = _interface(attrs, "resolver_unicast_interface")
    fixed = attrs.get("resolver_unicast_port")  # deprecated: one fixed port
    low, high = attrs.get("resolver_unicast_port_low"), attrs.get("resolver_unicast_port_high")
    sock = _open_unicast(interface, range(fixed, fixed + 1) if fixed else range(low, high + 1))
    try:
        rcvbuf = attrs.get("resolver_unicast_receiver_socket_buffer")
        if rcvbuf:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    except OSError:
        pass
    daemons = [_daemon_address(d) for d in daemons_cfg]
    interval_ms = attrs.get("resolver_unicast_keepalive_interval")
    keepalive_s = max(interval_ms / 1000.0, _MIN_KEEPALIVE_S)
    host, port = sock.getsockname()
    names = ", ".join(f"{h}:{p}" for h, p in daemons)
    ready = f"listening on {host}:{port} (unicast), keepalives to {names} every {interval_ms} ms"
    return _Endpoint(sock, daemons, keepalive_s, ready)


# ---- the command


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "tr-monitor",
        parents=[common],
        help="print the topic resolution traffic seen (TIRs, TQRs, ...)",
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.add_argument(
        "--duration",
        type=_positive_seconds,
        metavar="SECONDS",
        help="stop after this many seconds (default: until SIGINT or SIGTERM)",
    )
    parser.add_argument(
        "--show-keepalives",
        action="store_true",
        help="unicast mode: also print the keepalives the lbmrd daemons answer with",
    )
    parser.set_defaults(handler=run)


def _err(message: str) -> None:
    print(f"{_PROG}: {message}", file=sys.stderr, flush=True)


class _Stopper:
    """SIGINT/SIGTERM set a flag and wake the selector through a socketpair (``set_wakeup_fd``)."""

    def __init__(self, sel: selectors.BaseSelector) -> None:
        self.signum: int | None = None
        self._rsock, self._wsock = socket.socketpair()
        self._rsock.setblocking(False)
        self._wsock.setblocking(False)
        self._old_fd: int | None = None
        self._old_handlers: dict[int, Any] = {}
        try:
            self._old_fd = signal.set_wakeup_fd(self._wsock.fileno())
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old_handlers[sig] = signal.signal(sig, self._on_signal)
        except ValueError:  # not the main thread: no signals, --duration still works
            pass
        sel.register(self._rsock, selectors.EVENT_READ, self)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        del frame
        self.signum = signum

    def drain(self) -> None:
        try:
            while self._rsock.recv(512):
                pass
        except OSError:
            pass

    def close(self) -> None:
        for sig, handler in self._old_handlers.items():
            signal.signal(sig, handler)
        if self._old_fd is not None:
            signal.set_wakeup_fd(self._old_fd)
        self._rsock.close()
        self._wsock.close()


def run(args: argparse.Namespace) -> int:
    """``openum tr-monitor``: see the module docstring."""
    from openum.cli import build_config

    attrs = build_config(args).attributes("context")
    if attrs.get("resolver_disable_udp_topic_resolution"):
        _err(
            "note: resolver_disable_udp_topic_resolution is 1 in this configuration; "
            "monitoring UDP topic resolution anyway"
        )
    try:
        endpoint = _open(attrs)
    except InterfaceError as exc:
        _err(f"configuration error: {exc}")
        return EXIT_USAGE
    except _BindError as exc:
        _err(str(exc))
        return EXIT_BIND
    monitor = Monitor(
        sys.stdout,
        as_json=args.json,
        include_topic_index=bool(attrs.get("source_includes_topic_index")),
        hide_keepalives=bool(endpoint.daemons) and not args.show_keepalives,
    )
    sel = selectors.DefaultSelector()
    stopper = _Stopper(sel)
    start = time.monotonic()
    try:
        sel.register(endpoint.sock, selectors.EVENT_READ, None)
        _err(endpoint.ready)
        monitor.header()
        sys.stdout.flush()
        _loop(sel, endpoint, monitor, stopper, None if args.duration is None else start + args.duration)
    finally:
        seconds = time.monotonic() - start
        sel.close()
        stopper.close()
        endpoint.sock.close()
    if args.json:
        sys.stdout.write(json.dumps(monitor.summary(seconds)) + "\n")
    sys.stdout.flush()
    _err(monitor.summary_text(seconds))
    return EXIT_OK


def _warn_once(warned: set[str], message: str) -> None:
    """A monitor must not flood stderr: each distinct problem is reported once."""
    if message not in warned:
        warned.add(message)
        _err(message)


def _loop(
    sel: selectors.BaseSelector,
    endpoint: _Endpoint,
    monitor: Monitor,
    stopper: _Stopper,
    deadline: float | None,
) -> None:
    sock = endpoint.sock
    next_keepalive = time.monotonic() if endpoint.daemons else None
    warned: set[str] = set()
    while stopper.signum is None:
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            return
        if next_keepalive is not None and now >= next_keepalive:
            for host, port in endpoint.daemons:
                try:
                    sock.sendto(_KEEPALIVE, (host, port))
                except OSError as exc:
                    _warn_once(warned, f"cannot send a keepalive to {host}:{port}: {_reason(exc)}")
            next_keepalive = now + endpoint.keepalive_s
        waits = [t - now for t in (deadline, next_keepalive) if t is not None]
        for key, _ in sel.select(max(0.0, min(waits)) if waits else None):
            if key.data is stopper:
                stopper.drain()
            else:
                _drain(sock, monitor, warned)
        sys.stdout.flush()


def _drain(sock: socket.socket, monitor: Monitor, warned: set[str]) -> None:
    for _ in range(_BATCH):
        try:
            data, sender = sock.recvfrom(_MAX_DATAGRAM)
        except BlockingIOError:
            return
        except OSError as exc:  # e.g. ECONNREFUSED where the OS reports ICMP errors on UDP sockets
            _warn_once(warned, f"receive failed: {_reason(exc)}")
            return
        monitor.datagram(data, sender, time.time())
