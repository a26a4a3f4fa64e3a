"""Source strings: the text that names one source's transport session (seed 3.3.1).

Every source has a source string, unique within a topic resolution domain (seed 3.3.2), used as the key
of transport statistics, in source notifications and as a message's ``source``.  UM formats them as::

    TCP:src_ip:src_port[:session_id][topic_idx]        TCP:192.168.0.4:45789:f1789bcc[1539853954]
    LBTRM:src_ip:src_port:session_id:mc_group:dest_port[topic_idx]
                                          LBTRM:10.29.3.88:14390:e0679abb:231.13.13.13:14400[1539853954]
    LBT-RU:src_ip:src_port[:session_id][topic_idx]     LBT-RU:192.168.3.189:34678[1539853954]
    LBT-IPC:session_id:transport_id[topic_idx]         LBT-IPC:6481f8d4:20000[1539853954]
    LBT-SMX:session_id:transport_id[topic_idx]         LBT-SMX:6481f8d4:20000[1539853954]
    BROKER

The session id is hexadecimal (formatted as 8 lower-case digits, like Wireshark's LBM dissectors;
parsed from 1-8 digits of either case), everything else decimal.  Note the spellings: ``LBTRM`` has no
hyphen, ``LBT-RU``, ``LBT-IPC`` and ``LBT-SMX`` have one.  The ``[topic_idx]`` suffix is present when
``source_includes_topic_index (context)`` is 1.

:class:`SourceString` is UM's ``lbm_transport_source_info_t``: :meth:`SourceString.format` is
``lbm_transport_source_format()`` and :meth:`SourceString.parse` is ``lbm_transport_source_parse()``.
:meth:`SourceString.from_topic_info` builds one from an advertisement (an LBMR TIR).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, Self

from openum.wire.lbmr import (
    LbtipcTransport,
    LbtrmTransport,
    LbtruTransport,
    LbtsmxTransport,
    TcpTransport,
    TopicInfo,
)

__all__ = ["SourceString", "SourceStringError", "TransportKind", "from_topic_info"]


class SourceStringError(ValueError):
    """A source string could not be parsed, or a :class:`SourceString`'s fields do not fit its kind."""


class TransportKind(StrEnum):
    """The transport a source string names; the values are openum's transport names."""

    TCP = "tcp"
    LBTRM = "lbtrm"
    LBTRU = "lbtru"
    LBTIPC = "lbtipc"
    LBTSMX = "lbtsmx"
    BROKER = "broker"


#: The source string prefix of each kind (seed 3.3.1: "LBTRM" without a hyphen, the others with one).
PREFIXES: Final[dict[TransportKind, str]] = {
    TransportKind.TCP: "TCP",
    TransportKind.LBTRM: "LBTRM",
    TransportKind.LBTRU: "LBT-RU",
    TransportKind.LBTIPC: "LBT-IPC",
    TransportKind.LBTSMX: "LBT-SMX",
    TransportKind.BROKER: "BROKER",
}
_KIND_OF_PREFIX: Final = {prefix: kind for kind, prefix in PREFIXES.items()}

#: What each kind looks like, for error messages.
FORMATS: Final[dict[TransportKind, str]] = {
    TransportKind.TCP: "TCP:src_ip:src_port[:session_id][topic_idx]",
    TransportKind.LBTRM: "LBTRM:src_ip:src_port:session_id:mc_group:dest_port[topic_idx]",
    TransportKind.LBTRU: "LBT-RU:src_ip:src_port[:session_id][topic_idx]",
    TransportKind.LBTIPC: "LBT-IPC:session_id:transport_id[topic_idx]",
    TransportKind.LBTSMX: "LBT-SMX:session_id:transport_id[topic_idx]",
    TransportKind.BROKER: "BROKER",
}
_EXPECTED: Final = (
    "expected one of "
    + ", ".join(FORMATS.values())
    + " (session_id in hex, the other numbers in decimal, [topic_idx] optional)"
)
# Common misspellings of the prefixes (seed 3.3.1 stresses the hyphens).
_MISSPELT: Final = {"LBT-RM": "LBTRM", "LBTRU": "LBT-RU", "LBTIPC": "LBT-IPC", "LBTSMX": "LBT-SMX"}

# Which optional fields each kind carries: (required, allowed).
_FIELDS: Final[dict[TransportKind, tuple[frozenset[str], frozenset[str]]]] = {
    TransportKind.TCP: (frozenset({"ip", "port"}), frozenset({"ip", "port", "session_id"})),
    TransportKind.LBTRU: (frozenset({"ip", "port"}), frozenset({"ip", "port", "session_id"})),
    TransportKind.LBTRM: (
        frozenset({"ip", "port", "session_id", "group", "dest_port"}),
        frozenset({"ip", "port", "session_id", "group", "dest_port"}),
    ),
    TransportKind.LBTIPC: (
        frozenset({"session_id", "transport_id"}),
        frozenset({"session_id", "transport_id"}),
    ),
    TransportKind.LBTSMX: (
        frozenset({"session_id", "transport_id"}),
        frozenset({"session_id", "transport_id"}),
    ),
    TransportKind.BROKER: (frozenset(), frozenset()),
}
_OPTIONAL_FIELDS: Final = ("ip", "port", "session_id", "group", "dest_port", "transport_id")

_DEC: Final = re.compile(r"[0-9]{1,10}")
_HEX: Final = re.compile(r"[0-9a-fA-F]{1,8}")
_SUFFIX: Final = re.compile(r"\[([0-9]{1,10})\]\Z")


def _check_uint(value: object, bits: int, what: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 1 << bits:
        raise SourceStringError(f"{what} must be an integer in 0..{(1 << bits) - 1}, got {value!r}")


def _check_ip(value: object, what: str) -> str:
    try:
        return str(ipaddress.IPv4Address(value))
    except (ipaddress.AddressValueError, ValueError, TypeError):
        raise SourceStringError(f"{what} must be a dotted IPv4 address, got {value!r}") from None


@dataclass(frozen=True, slots=True)
class SourceString:
    """The parts of a source string (UM's ``lbm_transport_source_info_t``; seed 3.3.1).

    Which fields a kind uses: TCP and LBT-RU ``ip``, ``port`` and an optional ``session_id``; LBT-RM
    ``ip`` and ``port`` (the source's NAK address), ``session_id``, ``group`` and ``dest_port``;
    LBT-IPC and LBT-SMX ``session_id`` and ``transport_id``; BROKER none.  The others stay None.
    ``topic_index`` is optional for every kind except BROKER.
    """

    transport: TransportKind
    ip: str | None = None
    port: int | None = None
    session_id: int | None = None
    group: str | None = None
    dest_port: int | None = None
    transport_id: int | None = None
    topic_index: int | None = None

    def __post_init__(self) -> None:
        try:
            kind = TransportKind(self.transport)
        except ValueError:
            kinds = ", ".join(k.value for k in TransportKind)
            raise SourceStringError(f"transport must be one of {kinds}, got {self.transport!r}") from None
        object.__setattr__(self, "transport", kind)
        required, allowed = _FIELDS[kind]
        for name in _OPTIONAL_FIELDS:
            value = getattr(self, name)
            if value is None and name in required:
                raise SourceStringError(f"a {PREFIXES[kind]} source string needs {name} ({FORMATS[kind]})")
            if value is not None and name not in allowed:
                raise SourceStringError(f"a {PREFIXES[kind]} source string has no {name} ({FORMATS[kind]})")
        if self.ip is not None:
            object.__setattr__(self, "ip", _check_ip(self.ip, "ip"))
        if self.group is not None:
            object.__setattr__(self, "group", _check_ip(self.group, "group"))
        for name, bits in (("port", 16), ("dest_port", 16), ("transport_id", 16), ("session_id", 32)):
            value = getattr(self, name)
            if value is not None:
                _check_uint(value, bits, name)
        if self.topic_index is not None:
            if kind is TransportKind.BROKER:
                raise SourceStringError("a BROKER source string has no topic index")
            _check_uint(self.topic_index, 32, "topic_index")

    def format(self, include_topic_index: bool = True) -> str:
        """The source string; ``[topic_idx]`` only when ``include_topic_index`` and the index is known."""
        kind = self.transport
        sid = None if self.session_id is None else f"{self.session_id:08x}"
        if kind in (TransportKind.TCP, TransportKind.LBTRU):
            parts = [PREFIXES[kind], str(self.ip), str(self.port)]
            if sid is not None:
                parts.append(sid)
        elif kind is TransportKind.LBTRM:
            parts = [
                PREFIXES[kind],
                str(self.ip),
                str(self.port),
                str(sid),
                str(self.group),
                str(self.dest_port),
            ]
        elif kind is TransportKind.BROKER:
            return PREFIXES[kind]
        else:  # LBT-IPC, LBT-SMX
            parts = [PREFIXES[kind], str(sid), str(self.transport_id)]
        text = ":".join(parts)
        if include_topic_index and self.topic_index is not None:
            text += f"[{self.topic_index}]"
        return text

    def __str__(self) -> str:
        return self.format()

    @classmethod
    def parse(cls, text: str) -> Self:
        """Parse a source string in any of UM's formats; :class:`SourceStringError` when it is not one."""
        if not isinstance(text, str):
            raise SourceStringError(f"a source string must be a str, got {type(text).__name__}")
        topic_index: int | None = None
        body = text
        match = _SUFFIX.search(text)
        if match is not None:
            topic_index = int(match.group(1))
            body = text[: match.start()]
        prefix, _, rest = body.partition(":")
        kind = _KIND_OF_PREFIX.get(prefix)
        if kind is None:
            hint = f" ({prefix} is spelt {_MISSPELT[prefix]})" if prefix in _MISSPELT else ""
            raise SourceStringError(f"not a source string: {text!r}{hint}; {_EXPECTED}")
        if kind is TransportKind.BROKER:
            if body != prefix or match is not None:
                raise SourceStringError(
                    f"not a source string: {text!r}; a broker source string is just BROKER"
                )
            return cls(kind)
        fields = rest.split(":") if rest else []
        try:
            return cls._from_fields(kind, fields, topic_index)
        except SourceStringError as exc:
            raise SourceStringError(
                f"bad {prefix} source string {text!r}: {exc}; expected {FORMATS[kind]}"
            ) from None

    @classmethod
    def _from_fields(cls, kind: TransportKind, fields: list[str], topic_index: int | None) -> Self:
        def dec(value: str, what: str) -> int:
            if not _DEC.fullmatch(value):
                raise SourceStringError(f"{what} {value!r} is not a decimal number")
            return int(value)

        def hexa(value: str) -> int:
            if not _HEX.fullmatch(value):
                raise SourceStringError(f"session id {value!r} is not 1-8 hexadecimal digits")
            return int(value, 16)

        def ip(value: str, what: str) -> str:
            try:
                if re.fullmatch(r"[0-9.]+", value):
                    return _check_ip(value, what)
            except SourceStringError:
                pass
            raise SourceStringError(f"{what} {value!r} is not a dotted IPv4 address")

        n = len(fields)
        if kind in (TransportKind.TCP, TransportKind.LBTRU):
            if n not in (2, 3):
                raise SourceStringError(f"{n} field(s) after the prefix, need 2 or 3")
            sid = hexa(fields[2]) if n == 3 else None
            return cls(kind, ip(fields[0], "ip"), dec(fields[1], "port"), sid, topic_index=topic_index)
        if kind is TransportKind.LBTRM:
            if n != 5:
                raise SourceStringError(f"{n} field(s) after the prefix, need 5")
            return cls(
                kind,
                ip(fields[0], "source ip"),
                dec(fields[1], "source port"),
                hexa(fields[2]),
                ip(fields[3], "multicast group"),
                dec(fields[4], "destination port"),
                topic_index=topic_index,
            )
        if n != 2:
            raise SourceStringError(f"{n} field(s) after the prefix, need 2")
        return cls(
            kind,
            session_id=hexa(fields[0]),
            transport_id=dec(fields[1], "transport id"),
            topic_index=topic_index,
        )

    @classmethod
    def from_topic_info(cls, info: TopicInfo) -> Self:
        """The source string an advertisement (an LBMR TIR) describes, with its topic index.

        :class:`SourceStringError` for a transport that has no source string format (LBT-RDMA, unknown
        transport types).
        """
        xport = info.transport
        if isinstance(xport, TcpTransport):
            return cls(TransportKind.TCP, xport.ip, xport.port, xport.session_id, topic_index=info.index)
        if isinstance(xport, LbtruTransport):
            return cls(TransportKind.LBTRU, xport.ip, xport.port, xport.session_id, topic_index=info.index)
        if isinstance(xport, LbtrmTransport):
            return cls(
                TransportKind.LBTRM,
                xport.source_ip,
                xport.source_port,
                xport.session_id,
                xport.group,
                xport.dest_port,
                topic_index=info.index,
            )
        if isinstance(xport, LbtipcTransport | LbtsmxTransport):
            kind = TransportKind.LBTIPC if isinstance(xport, LbtipcTransport) else TransportKind.LBTSMX
            return cls(
                kind, session_id=xport.session_id, transport_id=xport.transport_id, topic_index=info.index
            )
        raise SourceStringError(f"{type(xport).__name__} has no source string format")


def from_topic_info(info: TopicInfo) -> SourceString:
    """:meth:`SourceString.from_topic_info`."""
    return SourceString.from_topic_info(info)
