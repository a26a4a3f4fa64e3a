"""LBMC basics: type codes, limits, the extension-header base, its registry and fixed layouts.

Implements ``../shared/wire/lbmc-pdm-srs.md``:

* §2.1: the ver/type byte (:class:`MessageType`, version nibble 0), the 12-byte data and 4-byte
  control headers (their sizes), the one-byte ``hdr_len`` and the "may be ignored" bits;
* §2.3: every extension-header type code (:class:`HeaderType`), the code -> record registry
  (:func:`header_class`) and :class:`UnknownHeader` for codes Wireshark does not know (and TGIDX);
* §2.4-§2.10: the table that most header records declare their byte layout with (:func:`_layout`):
  one precompiled ``struct.Struct`` per header plus an optional name or bytes tail.
"""

from __future__ import annotations

import abc
import dataclasses
import struct
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, ClassVar, Final, TypeVar

from openum.wire._common import WireError, ip_from_bytes, ip_to_bytes

# --------------------------------------------------------------------------------------------------
# Constants (spec §2.1, §2.3)
# --------------------------------------------------------------------------------------------------

LBMC_VERSION: Final = 0
#: ``msglen`` is a u16 and counts the whole message (§2.1); larger messages need fragmentation.
MAX_MESSAGE_LEN: Final = 0xFFFF
DATA_HEADER_LEN: Final = 12
CONTROL_HEADER_LEN: Final = 4
#: ``hdr_len`` is one byte and counts the two-byte next/len prefix (§2.1).
MAX_HEADER_BODY_LEN: Final = 253
#: TOPICNAME carries the name plus a NUL in at most 251 bytes (§2.4).
MAX_TOPIC_NAME_LEN: Final = 250
#: The smallest extension header Wireshark walks is 4 bytes (next, len, 16-bit flags); §2.1.
_MIN_HEADER_LEN: Final = 4

_NHDR_DATA: Final = 0x00
_NHDR_NONE: Final = 0xFF
_IGNORE16: Final = 0x8000  # "May be ignored" in 16-bit flags (§2.1)
_IGNORE8: Final = 0x80


class MessageType(IntEnum):
    """The low nibble of the ver/type byte (§2.1)."""

    DATA = 0x0
    EOT = 0x1
    PROACTIVE_RETRANSMISSION = 0x2
    CONTROL = 0x8
    RETRANSMISSION = 0xA


#: Types with the 12-byte data header (topic index and sequence number).
DATA_TYPES: Final = frozenset(
    {MessageType.DATA, MessageType.PROACTIVE_RETRANSMISSION, MessageType.RETRANSMISSION}
)
_DATA_TYPE_VALUES: Final = frozenset(int(t) for t in DATA_TYPES)


class HeaderType(IntEnum):
    """Extension-header type codes, the complete list known to Wireshark's dissector (§2.3)."""

    DATA = 0x00
    FRAG = 0x01
    BATCH = 0x02
    TGIDX = 0x03
    REQUEST = 0x04
    TOPICNAME = 0x05
    APPHDR = 0x06
    APPHDR_CHAIN = 0x07
    UMQ_MSGID = 0x08
    UMQ_SQD_RCV = 0x09
    UMQ_RESUB = 0x0A
    OTID = 0x0B
    CTXINSTD = 0x0C
    CTXINSTR = 0x0D
    SRCIDX = 0x0E
    UMQ_ULB_MSG = 0x0F
    SSF_INIT = 0x10
    SSF_CREQ = 0x11
    UME_PREG = 0x12
    UME_PREG_RESP = 0x13
    UME_ACK = 0x14
    UME_RXREQ = 0x15
    UME_KEEPALIVE = 0x16
    UME_STOREID = 0x17
    UME_RANGED_ACK = 0x18
    UME_ACK_ID = 0x19
    UME_CAPABILITY = 0x1A
    UME_PROXY_SRC = 0x1B
    UME_STORE_GROUP = 0x1C
    UME_STORE_INFO = 0x1D
    UME_LJ_INFO = 0x1E
    TSNI = 0x20
    UMQ_REG = 0x30
    UMQ_REG_RESP = 0x31
    UMQ_ACK = 0x32
    UMQ_RCR = 0x33
    UMQ_KA = 0x34
    UMQ_RXREQ = 0x35
    UMQ_QMGMT = 0x36
    UMQ_RESUB_REQ = 0x37
    UMQ_RESUB_RESP = 0x38
    TOPIC_INTEREST = 0x39
    PATTERN_INTEREST = 0x3A
    ADVERTISEMENT = 0x3B
    UME_CTXINSTS = 0x3C
    UME_STORENAME = 0x3D
    UMQ_ULB_RCR = 0x3E
    UMQ_LF = 0x3F
    CTXINFO = 0x40
    UME_PSER = 0x41
    CTXINST = 0x42
    DOMAIN = 0x43
    TNWG_CAPABILITIES = 0x44
    PATIDX = 0x45
    UME_CLIENT_LIFETIME = 0x46
    UME_SID = 0x47
    UMQ_IDX_CMD = 0x48
    UMQ_IDX_CMD_RESP = 0x49
    ODOMAIN = 0x4A
    STREAM = 0x4B
    TOPIC_MD_INTEREST = 0x4C
    PATTERN_MD_INTEREST = 0x4D
    LJI_REQ = 0x4E
    TNWG_KA = 0x4F
    UME_RCV_KEEPALIVE = 0x50
    UMQ_CMD = 0x51
    UMQ_CMD_RESP = 0x52
    SRI_REQ = 0x53
    UME_STORE_DOMAIN = 0x54
    SRI = 0x55
    ROUTE_INFO = 0x56
    ROUTE_INFO_NEIGHBOR = 0x57
    GATEWAY_NAME = 0x58
    AUTHENTICATION = 0x60
    HMAC = 0x62
    UMQ_SID = 0x63
    DESTINATION = 0x64
    TOPIC_IDX = 0x65
    TOPIC_SOURCE = 0x67  # 0x66 is not a code (§2.3)
    TOPIC_SOURCE_EXFUNC = 0x68
    UME_STORE_INFO_EXT = 0x69
    UME_PSRC_ELECTION_TOKEN = 0x6A
    TCP_SID = 0x6B
    EXTOPT = 0xFE
    NONE = 0xFF


# --------------------------------------------------------------------------------------------------
# Extension headers: the base, the table-driven fixed layouts, the registry
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Header(abc.ABC):
    """One LBMC extension header.  ``code`` is its type code; ``encode_body`` gives the bytes after
    the two-byte ``next_hdr``/``hdr_len`` prefix (which the message encoder writes)."""

    code: ClassVar[int] = -1

    def type_code(self) -> int:
        """The wire type code (a class constant except for :class:`UnknownHeader`)."""
        return self.code

    @abc.abstractmethod
    def encode_body(self) -> bytes:
        """The header's bytes after its ``next_hdr``/``hdr_len`` prefix."""


_DECODERS: dict[int, Callable[[memoryview], Header]] = {}
_CLASSES: dict[int, type[Header]] = {}

_INT_RANGES: Final = {"B": 0xFF, "H": 0xFFFF, "I": 0xFFFFFFFF, "Q": 0xFFFFFFFFFFFFFFFF}


def _check_int(owner: str, name: str, value: object, limit: int) -> None:
    if not isinstance(value, int) or not 0 <= value <= limit:
        raise WireError(f"{owner}.{name} must be an integer in 0..{limit:#x}, got {value!r}")


def _check_field(owner: str, name: str, kind: str, value: object) -> None:
    limit = _INT_RANGES.get(kind)
    if limit is not None:
        _check_int(owner, name, value, limit)
    elif kind == "ip":
        if not isinstance(value, str):
            raise WireError(f"{owner}.{name} must be a dotted-quad string, got {value!r}")
        ip_to_bytes(value)
    else:  # "<n>s": fixed-size opaque bytes (context instances, OTIDs, HMACs)
        size = int(kind[:-1])
        if not isinstance(value, bytes) or len(value) != size:
            raise WireError(f"{owner}.{name} must be {size} bytes, got {value!r}")


def _encode_name(owner: str, value: object, *, optional: bool) -> bytes:
    if not isinstance(value, str):
        raise WireError(f"{owner}: name must be a string, got {value!r}")
    if optional and not value:
        return b""
    raw = _utf8(owner, value)
    if b"\x00" in raw:
        raise WireError(f"{owner}: name contains a NUL byte: {value!r}")
    return raw + b"\x00"


def _utf8(owner: str, text: str) -> bytes:
    """UTF-8 with ``surrogateescape``, so names decoded from arbitrary bytes encode back unchanged."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as exc:
        raise WireError(f"{owner}: {text!r} cannot be encoded as UTF-8") from exc


def _decode_name(owner: str, raw: bytes, *, optional: bool) -> str:
    """A name that fills the rest of a header: NUL-terminated (the NUL is optional, §2.4)."""
    if not raw:
        if optional:
            return ""
        raise WireError(f"{owner}: empty name (header length incorrect)")
    nul = raw.find(b"\x00")
    if nul >= 0:
        if raw[nul:].strip(b"\x00"):
            raise WireError(f"{owner}: bytes after the terminating NUL of the name")
        raw = raw[:nul]
    return raw.decode("utf-8", "surrogateescape")


@dataclass(frozen=True, slots=True)
class _Fixed(Header):
    """A header described by a layout table: fixed fields, optionally followed by a variable tail."""

    _struct: ClassVar[struct.Struct]
    _spec: ClassVar[tuple[tuple[str, str], ...]]
    _tail: ClassVar[tuple[str, str] | None]

    def __post_init__(self) -> None:
        owner = type(self).__name__
        for name, kind in self._spec:
            _check_field(owner, name, kind, getattr(self, name))
        self._tail_bytes()  # validates the tail and the total length

    def _tail_bytes(self) -> bytes:
        tail = self._tail
        if tail is None:
            return b""
        name, kind = tail
        value = getattr(self, name)
        owner = type(self).__name__
        if kind == "bytes":
            if not isinstance(value, bytes):
                raise WireError(f"{owner}.{name} must be bytes, got {value!r}")
            raw = value
        else:
            raw = _encode_name(owner, value, optional=kind == "optname")
        if self._struct.size + len(raw) > MAX_HEADER_BODY_LEN:
            raise WireError(f"{owner}.{name} is too long for a one-byte header length ({len(raw)} bytes)")
        return raw

    def encode_body(self) -> bytes:
        values = [ip_to_bytes(getattr(self, n)) if k == "ip" else getattr(self, n) for n, k in self._spec]
        return self._struct.pack(*values) + self._tail_bytes()

    @classmethod
    def decode_body(cls, body: memoryview) -> Header:
        st = cls._struct
        size = len(body)
        if size < st.size or (cls._tail is None and size != st.size):
            raise WireError(f"{cls.__name__}: header length {size + 2}, layout needs {st.size + 2}")
        kwargs: dict[str, Any] = {}
        for (name, kind), value in zip(cls._spec, st.unpack_from(body, 0), strict=True):
            kwargs[name] = ip_from_bytes(value) if kind == "ip" else value
        if cls._tail is not None:
            name, kind = cls._tail
            raw = bytes(body[st.size :])
            kwargs[name] = (
                raw if kind == "bytes" else _decode_name(cls.__name__, raw, optional=kind == "optname")
            )
        return cls(**kwargs)


_F = TypeVar("_F", bound=type[_Fixed])


def _register(code: int, decoder: Callable[[memoryview], Header], cls: type[Header]) -> None:
    if code in _DECODERS:  # a programming error caught at import time
        raise TypeError(f"LBMC header code {code:#04x} registered twice")
    _DECODERS[code] = decoder
    _CLASSES[code] = cls


def _layout(code: HeaderType, spec: str, *, tail: str | None = None) -> Callable[[_F], _F]:
    """Attach a layout (``"name:kind ..."``, kinds B/H/I/Q, ip, <n>s) to a header dataclass."""

    def apply(cls: _F) -> _F:
        items = tuple((tok.split(":")[0], tok.split(":")[1]) for tok in spec.split())
        tail_item = (tail.split(":")[0], tail.split(":")[1]) if tail else None
        fmt = ">" + "".join("4s" if kind == "ip" else kind for _, kind in items)
        names = {n for n, _ in items} | ({tail_item[0]} if tail_item else set())
        if names != {f.name for f in dataclasses.fields(cls)}:
            raise TypeError(f"{cls.__name__}: layout names {sorted(names)} do not match its fields")
        cls._struct = struct.Struct(fmt)
        cls._spec = items
        cls._tail = tail_item
        cls.code = int(code)
        _register(int(code), cls.decode_body, cls)
        return cls

    return apply


def header_class(code: int) -> type[Header] | None:
    """The record class decoding extension-header ``code`` (``None``: it decodes to UnknownHeader)."""
    return _CLASSES.get(code)


@dataclass(frozen=True, slots=True)
class UnknownHeader(Header):
    """A header whose type code openum (and Wireshark) does not know, e.g. TGIDX 0x03.

    Decoding keeps its bytes so that a message forwarded unchanged round-trips.  openum never
    creates one itself: Wireshark flags unknown codes as Error/Malformed (§2.3).
    """

    header_code: int
    body: bytes

    def __post_init__(self) -> None:
        _check_int("UnknownHeader", "header_code", self.header_code, 0xFF)
        if self.header_code in (_NHDR_DATA, _NHDR_NONE) or self.header_code in _DECODERS:
            raise WireError(f"UnknownHeader: code {self.header_code:#04x} is not an unknown header type")
        if not isinstance(self.body, bytes) or not 2 <= len(self.body) <= MAX_HEADER_BODY_LEN:
            raise WireError(f"UnknownHeader.body must be 2..{MAX_HEADER_BODY_LEN} bytes")

    def type_code(self) -> int:
        return self.header_code

    def encode_body(self) -> bytes:
        return self.body
