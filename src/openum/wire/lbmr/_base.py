"""Building blocks of the LBMR codec: header numbers, validators, readers and the option form.

Holds what every record module shares: the packet and extended type numbers of the header (W1 §3.1,
§3.3), the field validators the records' constructors use, the bounds-checked readers of the
robust-parser rules (W1 §13), the common ``type, len, flags`` option form with its walker (W1 §6.1)
and the option layouts that several option families repeat (W1 §6.2, §9.5, §9.7, §10).
"""

from __future__ import annotations

import abc
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Final, Self, cast

from openum.wire._common import WireError, encode_cstring, ip_to_bytes

# W1 §3.1 packet types (low three bits of the first byte).
_T_NORMAL: Final = 0
_T_WILDCARD: Final = 1
_T_RCV_ALIVE: Final = 2
_T_SRC_ALIVE: Final = 3
_T_TOPIC_MGMT: Final = 4
_T_QUEUE: Final = 6
_T_EXT: Final = 7
_OPTS_BIT: Final = 0x08
# W1 §3.3 extended types (second byte when the type is 7).
_X_PSER: Final = 1
_X_QMGMT: Final = 2
_X_CTXINFO: Final = 3
_X_TRREQ: Final = 4
_X_TNWG: Final = 5
_X_RDR: Final = 6
_X_RCTXINFO: Final = 7

# UM limits topic names to 256 bytes including the NUL (LBM_MAX_TOPIC_NAME_LEN).
_NAME_MAX: Final = 255
# A name inside a u8-length option: 255 - 4-byte option header - NUL.
_OPT_NAME_MAX: Final = 250

_HDR: Final = struct.Struct(">BBH")  # ver_type, tqrs, tirs
_OPT_HDR: Final = struct.Struct(">BBH")  # type, len, flags (or total length)
_U16: Final = struct.Struct(">H")
_OPT_U32: Final = struct.Struct(">BBHI")  # rcr index, domain id, version
_OPT_INSTANCE: Final = struct.Struct(">BBH8s")  # source id, gateway/remote context instance

# --------------------------------------------------------------------------------------- validators


def _uint(value: object, bits: int, what: str) -> None:
    if not isinstance(value, int) or not 0 <= value < (1 << bits):
        raise WireError(f"{what} must be an integer in 0..{(1 << bits) - 1}, got {value!r}")


def _blob(value: object, size: int | None, what: str, max_size: int = 0xFFFF) -> None:
    if not isinstance(value, bytes):
        raise WireError(f"{what} must be bytes, got {type(value).__name__}")
    if size is not None and len(value) != size:
        raise WireError(f"{what} must be {size} bytes, got {len(value)}")
    if len(value) > max_size:
        raise WireError(f"{what} is {len(value)} bytes; at most {max_size} fit")


def _text(value: object, what: str) -> None:
    if not isinstance(value, str):
        raise WireError(f"{what} must be a str, got {type(value).__name__}")


def _items(value: object, allowed: tuple[type, ...], what: str, limit: int = 0xFFFF) -> None:
    if not isinstance(value, tuple):
        raise WireError(f"{what} must be a tuple, got {type(value).__name__}")
    if len(value) > limit:
        raise WireError(f"{what}: {len(value)} items; at most {limit} fit")
    for item in value:
        if not isinstance(item, allowed):
            raise WireError(f"{what}: {type(item).__name__} does not belong here")


# --------------------------------------------------------------------------------------- writers


def _cstr(text: str, what: str, max_len: int = _NAME_MAX) -> bytes:
    try:
        return encode_cstring(text, what, max_len=max_len)
    except UnicodeEncodeError as exc:
        raise WireError(f"{what} cannot be encoded: {text!r}") from exc


def _ip(addr: str, what: str = "IPv4 address") -> bytes:
    if not isinstance(addr, str):
        raise WireError(f"{what} must be a dotted-quad str, got {type(addr).__name__}")
    return ip_to_bytes(addr)


def _counted(first: int, queries: Sequence[bytes], infos: Sequence[bytes]) -> bytes:
    """The header with its 8-bit query and 16-bit info counts, then the packed records (W1 §3.2)."""
    return _HDR.pack(first, len(queries), len(infos)) + b"".join(queries) + b"".join(infos)


# --------------------------------------------------------------------------------------- readers


def _need(off: int, size: int, end: int, what: str) -> None:
    if off + size > end:
        raise WireError(f"truncated {what}: need {size} bytes, {max(0, end - off)} left", offset=off)


def _u16(data: bytes, off: int) -> int:
    return cast(int, _U16.unpack_from(data, off)[0])


def _read_name(data: bytes, off: int, end: int, what: str, max_len: int = _NAME_MAX) -> tuple[str, int]:
    """A NUL-terminated name in ``data[off:end]``; returns ``(name, offset after the NUL)``."""
    nul = data.find(b"\x00", off, end)
    if nul < 0:
        raise WireError(f"{what} is not NUL-terminated", offset=off)
    if nul - off > max_len:
        raise WireError(f"{what} is {nul - off} bytes long; at most {max_len} are allowed", offset=off)
    # surrogateescape: any byte sequence decodes and re-encodes unchanged
    return data[off:nul].decode("utf-8", "surrogateescape"), nul + 1


# --------------------------------------------------------------------------------------- bodies


class _Body(abc.ABC):
    __slots__ = ()

    @abc.abstractmethod
    def _encode(self, vt: int) -> bytes:
        """The whole message; ``vt`` is the first byte's version and options bits."""


# --------------------------------------------------------------------------------------- options


class _Option(abc.ABC):
    """Base of the fixed-type options; subclasses are frozen slotted dataclasses."""

    __slots__ = ()
    TYPE: ClassVar[int]
    #: Smallest valid ``len``; for fixed-size options the only valid one.
    SIZE: ClassVar[int]
    VARIABLE: ClassVar[bool] = False

    @abc.abstractmethod
    def _pack(self) -> bytes:
        """The option's whole bytes (its 4-byte header included)."""

    @classmethod
    @abc.abstractmethod
    def _unpack(cls, data: bytes, off: int, olen: int) -> Self:
        """Decode the ``olen``-byte option at ``data[off:]``; WireError if malformed."""


def _option_bytes(otype: int, flags: int, payload: bytes) -> bytes:
    """An option of the common form whose ``len`` covers its 4-byte header and ``payload`` (W1 §6.1)."""
    return _OPT_HDR.pack(otype, 4 + len(payload), flags) + payload


@dataclass(frozen=True, slots=True)
class UnknownOption:
    """An option whose type this codec does not know: kept so that it round-trips (W1 §6.1, §13)."""

    type: int
    flags: int
    data: bytes

    def __post_init__(self) -> None:
        _uint(self.type, 8, "option type")
        _uint(self.flags, 16, "option flags")
        _blob(self.data, None, "option data", 255 - 4)

    def _pack(self) -> bytes:
        return _option_bytes(self.type, self.flags, self.data)


def _walk_options(
    data: bytes,
    off: int,
    end: int,
    table: Mapping[int, type[_Option]],
    *,
    exact: bool,
    what: str,
    skip: int = -1,
) -> tuple[_Option | UnknownOption, ...]:
    """Options of the common ``type, len, flags`` form in ``data[off:end]``, stepped by ``len``.

    ``exact``: the container's dissector steps known options by their fixed size, so ``len`` must equal
    it; otherwise a longer ``len`` is accepted and its extra bytes ignored (a newer peer's extension).
    ``skip``: a 4-byte option type that carries nothing worth keeping (the packet length option).
    """
    out: list[_Option | UnknownOption] = []
    while off < end:
        _need(off, 4, end, f"{what} option header")
        otype = data[off]
        olen = data[off + 1]
        if olen < 4:  # zero length would loop forever (W1 §6.1)
            raise WireError(f"{what} option 0x{otype:02x} has length {olen}", offset=off)
        _need(off, olen, end, f"{what} option 0x{otype:02x}")
        if otype == skip:
            if olen != 4:
                raise WireError(f"{what} length option has length {olen}", offset=off)
            off += 4
            continue
        cls = table.get(otype)
        if cls is None:
            out.append(UnknownOption(otype, _u16(data, off + 2), data[off + 4 : off + olen]))
        else:
            if olen < cls.SIZE or (exact and not cls.VARIABLE and olen != cls.SIZE):
                raise WireError(f"{what} option 0x{otype:02x} has length {olen}, not {cls.SIZE}", offset=off)
            out.append(cls._unpack(data, off, olen))
        off += olen
    return tuple(out)


def _check_options(
    options: object, table: Mapping[int, type[_Option]], what: str, reserved: int = -1
) -> None:
    _items(options, (*table.values(), UnknownOption), what)
    for opt in cast(tuple[object, ...], options):
        if isinstance(opt, UnknownOption) and (opt.type in table or opt.type == reserved):
            raise WireError(f"{what}: UnknownOption type 0x{opt.type:02x} is reserved; use its class")


# ---- option layouts shared by several option families
#
# Each concrete option subclasses one of these with its own ``TYPE`` and the labels its errors use; the
# subclasses stay distinct types, so an option of one family is never accepted in another's table.


@dataclass(frozen=True, slots=True)
class _DomainOption(_Option):
    """``type, len, flags, domain id``: topic 0x0D, packet 0x84, gateway 2, remote context 3."""

    SIZE: ClassVar[int] = 8
    _WHAT: ClassVar[str]
    _FLAGS_WHAT: ClassVar[str]
    domain_id: int
    flags: int = 0

    def __post_init__(self) -> None:
        _uint(self.domain_id, 32, self._WHAT)
        _uint(self.flags, 16, self._FLAGS_WHAT)

    def _pack(self) -> bytes:
        return _OPT_U32.pack(self.TYPE, self.SIZE, self.flags, self.domain_id)

    @classmethod
    def _unpack(cls, data: bytes, off: int, olen: int) -> Self:
        _, _, flags, domain = _OPT_U32.unpack_from(data, off)
        return cls(domain, flags)


@dataclass(frozen=True, slots=True)
class _InstanceOption(_Option):
    """``type, len, flags, 8-byte context instance``: gateway option 0, remote context option 2."""

    SIZE: ClassVar[int] = 12
    _WHAT: ClassVar[str]
    _FLAGS_WHAT: ClassVar[str]
    instance: bytes
    flags: int = 0

    def __post_init__(self) -> None:
        _blob(self.instance, 8, self._WHAT)
        _uint(self.flags, 16, self._FLAGS_WHAT)

    def _pack(self) -> bytes:
        return _OPT_INSTANCE.pack(self.TYPE, self.SIZE, self.flags, self.instance)

    @classmethod
    def _unpack(cls, data: bytes, off: int, olen: int) -> Self:
        _, _, flags, inst = _OPT_INSTANCE.unpack_from(data, off)
        return cls(inst, flags)


def _read_name_option(data: bytes, off: int, olen: int, what: str) -> tuple[str, int]:
    """The NUL-terminated name and the flags of a variable-length name option at ``off``."""
    name, _ = _read_name(data, off + 4, off + olen, what, _OPT_NAME_MAX)
    return name, _u16(data, off + 2)


@dataclass(frozen=True, slots=True)
class _NameOption(_Option):
    """``type, len, flags, NUL-terminated name``: gateway option 3, remote context option 4."""

    SIZE: ClassVar[int] = 5
    VARIABLE: ClassVar[bool] = True
    _WHAT: ClassVar[str]
    _FLAGS_WHAT: ClassVar[str]
    name: str
    flags: int = 0

    def __post_init__(self) -> None:
        _text(self.name, self._WHAT)
        _uint(self.flags, 16, self._FLAGS_WHAT)

    def _pack(self) -> bytes:
        return _option_bytes(self.TYPE, self.flags, _cstr(self.name, self._WHAT, _OPT_NAME_MAX))

    @classmethod
    def _unpack(cls, data: bytes, off: int, olen: int) -> Self:
        return cls(*_read_name_option(data, off, olen, cls._WHAT))
