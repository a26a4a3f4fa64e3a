"""LBT-RM (reliable multicast over UDP) packet codec.

Implements ``../shared/wire/lbtrm-lbtru-lbttcp-transports.md`` section 3 (byte layouts), with the
sender rules of section 7 and the quirks of section 10, as Wireshark/tshark 4.0 understands them.

Every LBT-RM datagram starts with an 8-byte base header (ver/type, next_hdr, ucast_port,
session_id; all big-endian) followed by one of four type-specific headers:

=====  ==============================  ============================================
type   record                          body
=====  ==============================  ============================================
0      :class:`RmData`                 sqn, trail_sqn, flags/FEC type, tgsz, fec_symbol, then LBMC
2      :class:`RmSessionMessage`       sm_sqn, lead_sqn, trail_sqn, flags/FEC type, tgsz
3      :class:`RmNak`                  num_naks, format, list of missing sqns
4      :class:`RmNcf`                  trail_sqn, num_ncfs, reason/format, list of sqns
=====  ==============================  ============================================

Addressing and heuristics (section 1.2, ARCHITECTURE.md 4):

* The source multicasts DATA, SM and NCF to ``224.10.10.10``-``224.10.10.14`` port ``14400`` and
  receivers unicast NAKs to the source's IP at port ``ucast_port`` (``14390``-``14399``).  Those are
  UM's defaults and exactly the ranges Wireshark's ``lbtrm_udp`` heuristic accepts; other groups or
  ports need ``-d udp.port==N,lbtrm`` or the ``lbtrm.*`` range preferences.
* The heuristic refuses a datagram whose base ``next_hdr`` is not 0, so senders should never put
  options on LBT-RM (no option type is defined anyway).  This codec can still encode options (for
  tests and relays) and skips unknown ones by length when decoding.
* ``ucast_port`` and ``session_id`` are the *source's* values in every packet, NAKs included:
  Wireshark finds the session of a NAK from them (section 3.5).

The DATA payload is one or more LBMC messages (encoded elsewhere) and is never interpreted here.
:func:`decode` hands it back as a zero-copy ``memoryview`` slice of the input; the hot-path pair
:func:`encode_data_into` / :func:`decode_data_header` avoids building records at all.

Decoders raise :class:`~openum.wire._common.WireError` and nothing else for malformed input
(PRACTICES.md 6).  Like Wireshark, bytes after a NAK/NCF list or an SM are ignored.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from openum.wire._common import Buffer, WireError, as_view
from openum.wire._datapath import NHDR_DATA as _NHDR_DATA
from openum.wire._datapath import RM_DATA as _DATA
from openum.wire._datapath import (
    RM_FLAG_RX,
    TYPE_DATA,
    HeaderTemplate,
    rm_data_header_fast,
    rm_header_packer,
    rm_header_template,
)

__all__ = [
    "BASE_HEADER_LEN",
    "DATA_HEADER_LEN",
    "DEFAULT_DPORT",
    "DEFAULT_MC_ADDRESS_HIGH",
    "DEFAULT_MC_ADDRESS_LOW",
    "DEFAULT_SOURCE_PORT_HIGH",
    "DEFAULT_SOURCE_PORT_LOW",
    "FLAG_LATE_JOIN",
    "FLAG_MCAST_NAKS",
    "FLAG_RX",
    "FLAG_UCAST_NAKS",
    "TYPE_DATA",
    "TYPE_NAK",
    "TYPE_NCF",
    "TYPE_SM",
    "NakFormat",
    "NcfReason",
    "RmData",
    "RmNak",
    "RmNcf",
    "RmOption",
    "RmRecord",
    "RmSessionMessage",
    "data_header_packer",
    "data_header_template",
    "decode",
    "decode_data_header",
    "encode",
    "encode_data_into",
    "packet_type",
]

# --- defaults (section 1.2; UM's transport_lbtrm_* defaults) ----------------------------------------

DEFAULT_MC_ADDRESS_LOW: Final = "224.10.10.10"
DEFAULT_MC_ADDRESS_HIGH: Final = "224.10.10.14"
DEFAULT_DPORT: Final = 14400
DEFAULT_SOURCE_PORT_LOW: Final = 14390  # the source's unicast NAK port range
DEFAULT_SOURCE_PORT_HIGH: Final = 14399

# --- packet types (section 3.2) --------------------------------------------------------------------

# TYPE_DATA (0) comes from openum.wire._datapath, with the DATA layout of the hot path.
TYPE_SM: Final = 2
TYPE_NAK: Final = 3
TYPE_NCF: Final = 4

# --- DATA/SM flags_fec_type high nibble (section 3.3) ----------------------------------------------

FLAG_UCAST_NAKS: Final = 0x80  # receivers unicast their NAKs to the source (UM always does)
FLAG_MCAST_NAKS: Final = 0x40
FLAG_RX: Final = RM_FLAG_RX  # 0x20, retransmission: Wireshark's sequence analysis keys on this bit alone
FLAG_LATE_JOIN: Final = 0x10
_FLAGS_MASK: Final = 0xF0
_FEC_TYPE_MASK: Final = 0x0F


class NakFormat(IntEnum):
    """Low nibble of the NAK ``format`` / NCF ``reason_format`` field (sections 3.5, 3.6)."""

    SELECTIVE = 0  # the list holds data sequence numbers
    PARITY = 1  # FEC parity NAKs


class NcfReason(IntEnum):
    """Why the source confirms a NAK without answering it now (section 3.6)."""

    DO_NOT_RETRY = 0  # behind the trailing edge: unrecoverable
    NAK_IGNORED = 1
    RETRANSMIT_DELAY = 2
    NAK_SHED = 3


# --- precompiled layouts -----------------------------------------------------------------------------

_BASE: Final = struct.Struct(">BBHI")  # ver_type, next_hdr, ucast_port, session_id
# _DATA (openum.wire._datapath.RM_DATA): base + sqn, trail_sqn, flags_fec_type, tgsz, fec_symbol
_SM: Final = struct.Struct(">BBHIIIIBBH")  # base + sm_sqn, lead, trail, flags_fec_type, tgsz, reserved
_NAK: Final = struct.Struct(">BBHIHH")  # base + num_naks, format
_NCF: Final = struct.Struct(">BBHIIHBB")  # base + trail_sqn, num_ncfs, reserved, reason_format
_OPT: Final = struct.Struct(">BBH")  # generic option header: next_hdr, hdr_len, reserved

BASE_HEADER_LEN: Final = _BASE.size  # 8
DATA_HEADER_LEN: Final = _DATA.size  # 20: where the LBMC payload starts when there are no options
_OPT_HEADER_LEN: Final = _OPT.size  # 4
_MAX_OPT_BODY: Final = 255 - _OPT_HEADER_LEN  # hdr_len is a u8 and counts the 4-byte header
# _NHDR_DATA (openum.wire._datapath.NHDR_DATA): the next_hdr value that ends the chain ("Data")
_MAX_LIST: Final = 0xFFFF  # num_naks / num_ncfs are u16


def _uint(value: object, bits: int, what: str) -> None:
    if not isinstance(value, int) or value < 0 or value >> bits:
        raise WireError(f"{what} must be an unsigned {bits}-bit integer, got {value!r}")


def _as_tuple(owner: object, name: str, values: object) -> tuple[object, ...]:
    """``values`` as a tuple, stored back on the frozen record when a list was passed."""
    if isinstance(values, tuple):
        return values
    if isinstance(values, str | bytes | bytearray | memoryview):
        raise WireError(f"{name} must be a sequence of values, not {type(values).__name__}")
    if not isinstance(values, Iterable):
        raise WireError(f"{name} must be a sequence, got {values!r}")
    result = tuple(values)
    object.__setattr__(owner, name, result)
    return result


def _sqn_list(owner: object, name: str, values: object) -> None:
    """Check a list of sequence numbers: a tuple of at most 65535 u32 (the count is a u16)."""
    items = _as_tuple(owner, name, values)
    if len(items) > _MAX_LIST:
        raise WireError(f"{name} holds {len(items)} entries; at most {_MAX_LIST} fit the u16 count")
    for sqn in items:
        _uint(sqn, 32, f"{name} entry")


def _option_tuple(owner: object, options: object) -> None:
    for opt in _as_tuple(owner, "options", options):
        if not isinstance(opt, RmOption):
            raise WireError(f"not an LBT-RM option: {opt!r}")


def _base_fields(ucast_port: int, session_id: int) -> None:
    _uint(ucast_port, 16, "ucast_port")
    _uint(session_id, 32, "session_id")


def _flags_fec(flags: int, fec_type: int, tgsz: int) -> None:
    _uint(flags, 8, "flags")
    if flags & ~_FLAGS_MASK:
        raise WireError(f"flags use only the high nibble (0x10-0x80), got {flags:#x}")
    _uint(fec_type, 4, "fec_type")
    _uint(tgsz, 8, "tgsz")


# --- records -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RmOption:
    """One option of the ``next_hdr`` chain (section 3.7).

    No option type is defined for LBT-RM, so every option is opaque: ``kind`` is its type (the
    ``next_hdr`` value that announced it, 1-255), ``body`` the bytes after its 4-byte header.
    """

    kind: int
    body: bytes = b""
    reserved: int = 0

    def __post_init__(self) -> None:
        _uint(self.kind, 8, "option kind")
        if self.kind == _NHDR_DATA:
            raise WireError("option kind 0 means 'Data' (end of the chain) and cannot be an option")
        if not isinstance(self.body, bytes):
            raise WireError("option body must be bytes")
        if len(self.body) > _MAX_OPT_BODY:
            raise WireError(f"option body is {len(self.body)} bytes; at most {_MAX_OPT_BODY} fit hdr_len")
        _uint(self.reserved, 16, "option reserved")

    @property
    def wire_len(self) -> int:
        return _OPT_HEADER_LEN + len(self.body)


@dataclass(frozen=True, slots=True)
class RmData:
    """DATA (type 0, section 3.3): one transport datagram carrying LBMC message(s) in ``payload``.

    ``flags`` is the high nibble of ``flags_fec_type`` (``FLAG_UCAST_NAKS``, ``FLAG_RX``, ...);
    ``fec_type`` the low nibble.  ``tgsz`` and ``fec_symbol`` are 0 when FEC is off.
    """

    ucast_port: int
    session_id: int
    sqn: int
    trail_sqn: int
    payload: Buffer = b""
    flags: int = 0
    fec_type: int = 0
    tgsz: int = 0
    fec_symbol: int = 0
    options: tuple[RmOption, ...] = ()

    def __post_init__(self) -> None:
        _base_fields(self.ucast_port, self.session_id)
        _uint(self.sqn, 32, "sqn")
        _uint(self.trail_sqn, 32, "trail_sqn")
        if not isinstance(self.payload, bytes | bytearray | memoryview):
            raise WireError("payload must be bytes-like")
        _flags_fec(self.flags, self.fec_type, self.tgsz)
        _uint(self.fec_symbol, 16, "fec_symbol")
        _option_tuple(self, self.options)

    @property
    def retransmission(self) -> bool:
        return bool(self.flags & FLAG_RX)


@dataclass(frozen=True, slots=True)
class RmSessionMessage:
    """SM (type 2, section 3.4): sent while idle so receivers learn the lead/trail edges."""

    ucast_port: int
    session_id: int
    sm_sqn: int
    lead_sqn: int
    trail_sqn: int
    flags: int = 0
    fec_type: int = 0
    tgsz: int = 0
    options: tuple[RmOption, ...] = ()

    def __post_init__(self) -> None:
        _base_fields(self.ucast_port, self.session_id)
        _uint(self.sm_sqn, 32, "sm_sqn")
        _uint(self.lead_sqn, 32, "lead_sqn")
        _uint(self.trail_sqn, 32, "trail_sqn")
        _flags_fec(self.flags, self.fec_type, self.tgsz)
        _option_tuple(self, self.options)


@dataclass(frozen=True, slots=True)
class RmNak:
    """NAK (type 3, section 3.5): receiver to source, unicast; ``ucast_port``/``session_id`` are the
    source's values."""

    ucast_port: int
    session_id: int
    sqns: tuple[int, ...]
    format: int = NakFormat.SELECTIVE
    options: tuple[RmOption, ...] = ()

    def __post_init__(self) -> None:
        _base_fields(self.ucast_port, self.session_id)
        _sqn_list(self, "sqns", self.sqns)
        _uint(self.format, 4, "format")
        _option_tuple(self, self.options)


@dataclass(frozen=True, slots=True)
class RmNcf:
    """NCF (type 4, section 3.6): the source confirms NAKed ``sqns`` and says why (``reason``)."""

    ucast_port: int
    session_id: int
    trail_sqn: int
    sqns: tuple[int, ...]
    reason: int = NcfReason.RETRANSMIT_DELAY
    format: int = NakFormat.SELECTIVE
    options: tuple[RmOption, ...] = ()

    def __post_init__(self) -> None:
        _base_fields(self.ucast_port, self.session_id)
        _uint(self.trail_sqn, 32, "trail_sqn")
        _sqn_list(self, "sqns", self.sqns)
        _uint(self.reason, 4, "reason")
        _uint(self.format, 4, "format")
        _option_tuple(self, self.options)


RmRecord = RmData | RmSessionMessage | RmNak | RmNcf
_RECORD_TYPES: Final = (RmData, RmSessionMessage, RmNak, RmNcf)


# --- encoding ------------------------------------------------------------------------------------


def _options_len(options: tuple[RmOption, ...]) -> int:
    return sum(opt.wire_len for opt in options)


def _first_kind(options: tuple[RmOption, ...]) -> int:
    return options[0].kind if options else _NHDR_DATA


def _write_options(buf: bytearray | memoryview, offset: int, options: tuple[RmOption, ...]) -> int:
    """Write the chain at ``offset``; each option's next_hdr names the following option's kind."""
    last = len(options) - 1
    for i, opt in enumerate(options):
        nxt = options[i + 1].kind if i < last else _NHDR_DATA
        _OPT.pack_into(buf, offset, nxt, opt.wire_len, opt.reserved)
        end = offset + opt.wire_len
        buf[offset + _OPT_HEADER_LEN : end] = opt.body
        offset = end
    return offset


def _write_list(buf: bytearray, offset: int, sqns: tuple[int, ...]) -> int:
    if sqns:
        struct.pack_into(f">{len(sqns)}I", buf, offset, *sqns)
    return offset + 4 * len(sqns)


def encode(record: RmRecord) -> bytes:
    """The UDP payload for ``record``; :class:`WireError` if it cannot be encoded."""
    if not isinstance(record, _RECORD_TYPES):
        raise WireError(f"not an LBT-RM record: {type(record).__name__}")
    opts = record.options
    nh = _first_kind(opts)
    if isinstance(record, RmData):
        payload = as_view(record.payload)
        off = DATA_HEADER_LEN + _options_len(opts)
        buf = bytearray(off + len(payload))
        _DATA.pack_into(
            buf,
            0,
            TYPE_DATA,
            nh,
            record.ucast_port,
            record.session_id,
            record.sqn,
            record.trail_sqn,
            record.flags | record.fec_type,
            record.tgsz,
            record.fec_symbol,
        )
        _write_options(buf, DATA_HEADER_LEN, opts)
        buf[off:] = payload
        return bytes(buf)
    if isinstance(record, RmSessionMessage):
        buf = bytearray(_SM.size + _options_len(opts))
        _SM.pack_into(
            buf,
            0,
            TYPE_SM,
            nh,
            record.ucast_port,
            record.session_id,
            record.sm_sqn,
            record.lead_sqn,
            record.trail_sqn,
            record.flags | record.fec_type,
            record.tgsz,
            0,
        )
        _write_options(buf, _SM.size, opts)
        return bytes(buf)
    if isinstance(record, RmNak):
        buf = bytearray(_NAK.size + 4 * len(record.sqns) + _options_len(opts))
        _NAK.pack_into(
            buf, 0, TYPE_NAK, nh, record.ucast_port, record.session_id, len(record.sqns), record.format
        )
        _write_options(buf, _write_list(buf, _NAK.size, record.sqns), opts)
        return bytes(buf)
    if isinstance(record, RmNcf):
        buf = bytearray(_NCF.size + 4 * len(record.sqns) + _options_len(opts))
        _NCF.pack_into(
            buf,
            0,
            TYPE_NCF,
            nh,
            record.ucast_port,
            record.session_id,
            record.trail_sqn,
            len(record.sqns),
            0,
            (record.reason << 4) | record.format,
        )
        _write_options(buf, _write_list(buf, _NCF.size, record.sqns), opts)
        return bytes(buf)
    raise WireError(f"not an LBT-RM record: {type(record).__name__}")


def encode_data_into(
    buf: bytearray | memoryview,
    offset: int,
    sqn: int,
    trail_sqn: int,
    flags: int = FLAG_UCAST_NAKS,
    *,
    ucast_port: int,
    session_id: int,
    fec_type: int = 0,
    tgsz: int = 0,
    fec_symbol: int = 0,
    payload_len: int = 0,
) -> int:
    """Hot path: write a DATA header (no options) at ``buf[offset:]``; return its length (20).

    ``ucast_port`` and ``session_id`` are the session's constants.  The caller writes the LBMC
    payload at ``offset + 20`` itself (it is usually encoded straight
    into the same preallocated buffer).  ``payload_len`` is only used to check that header and
    payload fit.  Values are range-checked by ``struct`` itself; any failure is a :class:`WireError`.
    """
    try:
        if offset < 0 or offset + DATA_HEADER_LEN + payload_len > len(buf):
            raise WireError(
                f"buffer too small: {len(buf)} bytes for a {DATA_HEADER_LEN}-byte header and "
                f"{payload_len}-byte payload at offset {offset}"
            )
        if flags & ~_FLAGS_MASK or fec_type & ~_FEC_TYPE_MASK:
            raise WireError(f"bad flags {flags:#x} / fec_type {fec_type:#x}")
        _DATA.pack_into(
            buf,
            offset,
            TYPE_DATA,
            _NHDR_DATA,
            ucast_port,
            session_id,
            sqn,
            trail_sqn,
            flags | fec_type,
            tgsz,
            fec_symbol,
        )
    except (struct.error, TypeError) as exc:
        raise WireError(f"cannot encode LBT-RM DATA header: {exc}") from exc
    return DATA_HEADER_LEN


def data_header_packer(
    ucast_port: int, session_id: int, flags: int = FLAG_UCAST_NAKS
) -> Callable[[int, int], bytes]:
    """Hot path: ``pack(sqn, trail_sqn)`` returning one session's 20-byte DATA header (no options, no FEC).

    The session's constants are checked and bound once; each call is one precompiled ``struct`` pack,
    and its bytes equal what :func:`encode_data_into` writes for the same values.  ``sqn`` and
    ``trail_sqn`` must be u32 (``struct.error`` otherwise: the caller masks them).
    """
    _base_fields(ucast_port, session_id)
    _flags_fec(flags, 0, 0)
    return rm_header_packer(ucast_port, session_id, flags)


def data_header_template(ucast_port: int, session_id: int, flags: int = FLAG_UCAST_NAKS) -> HeaderTemplate:
    """Hot path: :func:`data_header_packer` as ``(pack, prefix, suffix)``, for a caller that keeps the
    parts (one call per header instead of two): ``pack(prefix, sqn, trail_sqn, suffix)`` is the header."""
    _base_fields(ucast_port, session_id)
    _flags_fec(flags, 0, 0)
    return rm_header_template(ucast_port, session_id, flags)


# --- decoding ------------------------------------------------------------------------------------


def packet_type(buf: Buffer) -> int:
    """The packet type nibble (``TYPE_DATA`` ...) for dispatching; checks length and version only."""
    if len(buf) < BASE_HEADER_LEN:
        raise WireError(f"truncated LBT-RM base header: {len(buf)} of {BASE_HEADER_LEN} bytes", offset=0)
    ver_type = buf[0]
    if ver_type & 0xF0:
        raise WireError(f"unsupported LBT-RM version {ver_type >> 4}", offset=0)
    return ver_type & 0x0F


def _skip_options(buf: Buffer, offset: int, next_hdr: int) -> int:
    """Walk the option chain without keeping it; return the offset after it."""
    end = len(buf)
    while next_hdr != _NHDR_DATA:
        if offset + _OPT_HEADER_LEN > end:
            raise WireError("truncated LBT-RM option header", offset=offset)
        next_hdr = buf[offset]
        hdr_len = buf[offset + 1]
        # hdr_len counts the 4-byte header; smaller values (0 above all) would never advance.
        if hdr_len < _OPT_HEADER_LEN or offset + hdr_len > end:
            raise WireError(f"bad LBT-RM option length {hdr_len}", offset=offset)
        offset += hdr_len
    return offset


def _read_options(view: memoryview, offset: int, next_hdr: int) -> tuple[tuple[RmOption, ...], int]:
    """Walk the chain, keeping every option (all are unknown to Wireshark and to us) opaque."""
    options: list[RmOption] = []
    end = len(view)
    kind = next_hdr
    while kind != _NHDR_DATA:
        if offset + _OPT_HEADER_LEN > end:
            raise WireError("truncated LBT-RM option header", offset=offset)
        nxt, hdr_len, reserved = _OPT.unpack_from(view, offset)
        if hdr_len < _OPT_HEADER_LEN or offset + hdr_len > end:
            raise WireError(f"bad LBT-RM option length {hdr_len}", offset=offset)
        options.append(RmOption(kind, bytes(view[offset + _OPT_HEADER_LEN : offset + hdr_len]), reserved))
        offset += hdr_len
        kind = nxt
    return tuple(options), offset


def _read_list(view: memoryview, offset: int, count: int, what: str) -> tuple[int, ...]:
    size = 4 * count
    if offset + size > len(view):
        raise WireError(f"truncated {what}: {count} entries need {size} bytes", offset=offset)
    return struct.unpack_from(f">{count}I", view, offset) if count else ()


def decode_data_header(buf: Buffer) -> tuple[int, int, int, int, int, int]:
    """Hot path: ``(ucast_port, session_id, sqn, trail_sqn, flags_fec_type, payload_offset)``.

    ``buf`` must be a DATA datagram (check :func:`packet_type` first); options are skipped, and the
    LBMC payload is ``buf[payload_offset:]``.  Test ``flags_fec_type & FLAG_RX`` for
    retransmissions.
    """
    fast = rm_data_header_fast(buf)  # what openum sends: no options
    if fast is not None:
        return fast
    if len(buf) < DATA_HEADER_LEN:
        raise WireError(f"truncated LBT-RM DATA header: {len(buf)} of {DATA_HEADER_LEN} bytes", offset=0)
    ver_type, next_hdr, port, sid, sqn, trail, flags, _tgsz, _sym = _DATA.unpack_from(buf, 0)
    if ver_type != TYPE_DATA:  # version nibble 0 and type DATA in one compare
        raise WireError(f"not an LBT-RM DATA packet (ver/type {ver_type:#04x})", offset=0)
    offset = DATA_HEADER_LEN if next_hdr == _NHDR_DATA else _skip_options(buf, DATA_HEADER_LEN, next_hdr)
    return port, sid, sqn, trail, flags, offset


def decode(buf: Buffer) -> RmRecord:
    """Decode one LBT-RM datagram (the UDP payload).  DATA payloads are zero-copy slices of ``buf``."""
    view = as_view(buf)
    ptype = packet_type(view)
    size = len(view)
    if ptype == TYPE_DATA:
        if size < DATA_HEADER_LEN:
            raise WireError(f"truncated LBT-RM DATA: {size} of {DATA_HEADER_LEN} bytes", offset=0)
        _, nh, port, sid, sqn, trail, ffec, tgsz, sym = _DATA.unpack_from(view, 0)
        options, off = _read_options(view, DATA_HEADER_LEN, nh)
        return RmData(
            port, sid, sqn, trail, view[off:], ffec & _FLAGS_MASK, ffec & _FEC_TYPE_MASK, tgsz, sym, options
        )
    if ptype == TYPE_SM:
        if size < _SM.size:
            raise WireError(f"truncated LBT-RM SM: {size} of {_SM.size} bytes", offset=0)
        _, nh, port, sid, sm_sqn, lead, trail, ffec, tgsz, _res = _SM.unpack_from(view, 0)
        options, _ = _read_options(view, _SM.size, nh)
        return RmSessionMessage(
            port, sid, sm_sqn, lead, trail, ffec & _FLAGS_MASK, ffec & _FEC_TYPE_MASK, tgsz, options
        )
    if ptype == TYPE_NAK:
        if size < _NAK.size:
            raise WireError(f"truncated LBT-RM NAK: {size} of {_NAK.size} bytes", offset=0)
        _, nh, port, sid, count, fmt = _NAK.unpack_from(view, 0)
        sqns = _read_list(view, _NAK.size, count, "LBT-RM NAK list")
        options, _ = _read_options(view, _NAK.size + 4 * count, nh)
        # format is a u16 on the wire but only its low nibble is defined (section 3.5)
        return RmNak(port, sid, sqns, fmt & 0x0F, options)
    if ptype == TYPE_NCF:
        if size < _NCF.size:
            raise WireError(f"truncated LBT-RM NCF: {size} of {_NCF.size} bytes", offset=0)
        _, nh, port, sid, trail, count, _res, reason_format = _NCF.unpack_from(view, 0)
        sqns = _read_list(view, _NCF.size, count, "LBT-RM NCF list")
        options, _ = _read_options(view, _NCF.size + 4 * count, nh)
        return RmNcf(port, sid, trail, sqns, reason_format >> 4, reason_format & 0x0F, options)
    raise WireError(f"unknown LBT-RM packet type {ptype}", offset=0)
