"""LBT-RU (reliable unicast over UDP) packet codec.

Implements ``../shared/wire/lbtrm-lbtru-lbttcp-transports.md`` section 4 (byte layouts), with the
sender rules of section 7 and the quirks of sections 1.5 and 10, as Wireshark/tshark 4.0
understands them.

Every LBT-RU datagram starts with a 4-byte base header (ver/type, next_hdr, flags_or_res; all
big-endian), then a type-specific body, then the option chain, then (DATA only) the LBMC payload:

=====  ============================  ==========================  ================================
type   record                        sent by                     bytes 2-3 of the base header
=====  ============================  ==========================  ================================
0      :class:`RuData`               source                      flags (``FLAG_RX``)
2      :class:`RuSessionMessage`     source                      flags (``FLAG_SYN``)
3      :class:`RuNak`                receiver                    reserved
4      :class:`RuNcf`                source                      reserved
5      :class:`RuAck`                receiver                    reserved
6      :class:`RuCreq`               receiver                    request (``CREQ_SYN``)
7      :class:`RuRst`                source                      reason (``RST_DEFAULT``)
=====  ============================  ==========================  ================================

Options are 8 bytes each on the wire and chained through ``next_hdr``: :class:`RuSidOption` (the
session ID, which keys the transport) and :class:`RuCidOption` (the client ID).  Options of other
types are skipped by their ``hdr_len`` and kept as opaque :class:`RuUnknownOption` records.

Addressing and heuristics (section 1.3, ARCHITECTURE.md 4):

* The source listens on UDP ``14380``-``14389`` and receivers use ``14360``-``14379``: UM's
  defaults and the only port pairs Wireshark's ``lbtru_udp`` heuristic accepts (it checks ports,
  never the payload).  Other ports need ``-d udp.port==N,lbtru``.
* **Always send the SID option** (``make_options(session_id)``), in both directions, on every
  packet except RST.  Besides keeping every packet of a session on one Wireshark transport, it
  makes byte 1 non-zero, so the WireGuard heuristic (tried before ``lbtru_udp``) never steals an
  option-less packet whose length happens to match a WireGuard message (section 1.5).
* **Send RST bare** (``07 00 00 00``): Wireshark 4.0 starts an RST's option walk at offset 2 and
  reports a zero-length header error for a RST with options (section 4.4).  This codec reads an
  RST's options where they logically are, at offset 4, but senders should leave them out.
* Wireshark flags unknown option types as errors, so never *send* :class:`RuUnknownOption`.

The DATA payload is one or more LBMC messages (encoded elsewhere) and is never interpreted here.
:func:`decode` hands it back as a zero-copy ``memoryview`` slice of the input; the hot-path pair
:func:`encode_data_into` / :func:`decode_data_header` avoids building records at all.

Decoders raise :class:`~openum.wire._common.WireError` and nothing else for malformed input
(PRACTICES.md 6).  Like Wireshark, bytes after the option chain of a non-DATA packet are ignored.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

from openum.wire._common import Buffer, WireError, as_view
from openum.wire._datapath import (
    NHDR_DATA,
    TYPE_DATA,
    HeaderTemplate,
    ru_data_header_fast,
    ru_header_packer,
    ru_header_template,
)
from openum.wire._datapath import RU_DATA as _DATA
from openum.wire._datapath import RU_DATA_SID as _DATA_SID
from openum.wire._datapath import RU_NHDR_SID as NHDR_SID
from openum.wire.lbtrm import NakFormat, NcfReason

__all__ = [
    "BASE_HEADER_LEN",
    "CREQ_SYN",
    "DATA_HEADER_LEN",
    "DEFAULT_RECEIVER_PORT_HIGH",
    "DEFAULT_RECEIVER_PORT_LOW",
    "DEFAULT_SOURCE_PORT_HIGH",
    "DEFAULT_SOURCE_PORT_LOW",
    "FLAG_RX",
    "FLAG_SYN",
    "NHDR_CID",
    "NHDR_DATA",
    "NHDR_SID",
    "OPTION_FLAG_IGNORE",
    "RST_DEFAULT",
    "TYPE_ACK",
    "TYPE_CREQ",
    "TYPE_DATA",
    "TYPE_NAK",
    "TYPE_NCF",
    "TYPE_RST",
    "TYPE_SM",
    "NakFormat",
    "NcfReason",
    "RuAck",
    "RuCidOption",
    "RuCreq",
    "RuData",
    "RuNak",
    "RuNcf",
    "RuOption",
    "RuRecord",
    "RuRst",
    "RuSessionMessage",
    "RuSidOption",
    "RuUnknownOption",
    "data_header_packer",
    "data_header_template",
    "decode",
    "decode_data_header",
    "encode",
    "encode_data_into",
    "make_options",
    "packet_type",
]

# --- defaults (section 1.3; UM's transport_lbtru_port_low/high on each side) -------------------------

DEFAULT_SOURCE_PORT_LOW: Final = 14380
DEFAULT_SOURCE_PORT_HIGH: Final = 14389
DEFAULT_RECEIVER_PORT_LOW: Final = 14360
DEFAULT_RECEIVER_PORT_HIGH: Final = 14379

# --- packet types and header values (sections 4.2-4.4) ---------------------------------------------

# TYPE_DATA (0) comes from openum.wire._datapath, with the DATA layouts of the hot path.
TYPE_SM: Final = 2
TYPE_NAK: Final = 3
TYPE_NCF: Final = 4
TYPE_ACK: Final = 5
TYPE_CREQ: Final = 6
TYPE_RST: Final = 7

FLAG_RX: Final = 0x4000  # DATA: retransmission
FLAG_SYN: Final = 0x8000  # SM: answer to a CREQ SYN
CREQ_SYN: Final = 0  # the only CREQ request code defined
RST_DEFAULT: Final = 0  # the only RST reason defined

# NHDR_DATA (0, the end of the option chain: the payload follows for DATA) comes from _datapath.
# NHDR_SID (1, the session id option) comes from _datapath too.
NHDR_CID: Final = 2
OPTION_FLAG_IGNORE: Final = 0x8000

# --- precompiled layouts -----------------------------------------------------------------------------

_BASE: Final = struct.Struct(">BBH")  # ver_type, next_hdr, flags_or_res
# _DATA (openum.wire._datapath.RU_DATA): base + sqn, trail_sqn
_SM: Final = struct.Struct(">BBHIII")  # base + sm_sqn, lead_sqn, trail_sqn
_NAK: Final = struct.Struct(">BBHHH")  # base + num_naks, format
_NCF: Final = struct.Struct(">BBHIHBB")  # base + trail_sqn, num_ncfs, reserved, reason_format
_ACK: Final = struct.Struct(">BBHI")  # base + ack_sqn
_OPT: Final = struct.Struct(">BBH")  # next_hdr, hdr_len, flags
_OPT_U32: Final = struct.Struct(">BBHI")  # SID / CID option: header + u32 value
# The hot-path DATA headers: no options / SID (openum.wire._datapath.RU_DATA_SID as _DATA_SID) / SID +
# CID, packed in one call.
_DATA_SID_CID: Final = struct.Struct(">BBHIIBBHIBBHI")

BASE_HEADER_LEN: Final = _BASE.size  # 4
DATA_HEADER_LEN: Final = _DATA.size  # 12: where options (then the payload) start in DATA
_OPT_HEADER_LEN: Final = _OPT.size  # 4
_OPT_U32_LEN: Final = _OPT_U32.size  # 8: hdr_len of SID and CID
_MAX_OPT_BODY: Final = 255 - _OPT_HEADER_LEN  # hdr_len is a u8 and counts the 4-byte header
_MAX_LIST: Final = 0xFFFF  # num_naks / num_ncfs are u16


def _uint(value: object, bits: int, what: str) -> None:
    if not isinstance(value, int) or value < 0 or value >> bits:
        raise WireError(f"{what} must be an unsigned {bits}-bit integer, got {value!r}")


def _as_tuple(owner: object, name: str, values: object) -> tuple[object, ...]:
    """``values`` as a tuple, stored back on the frozen record when a list was passed."""
    if isinstance(values, tuple):
        return values
    if isinstance(values, str | bytes | bytearray | memoryview) or not isinstance(values, Iterable):
        raise WireError(f"{name} must be a sequence, got {type(values).__name__}")
    result = tuple(values)
    object.__setattr__(owner, name, result)
    return result


def _sqn_list(owner: object, name: str, values: object) -> None:
    items = _as_tuple(owner, name, values)
    if len(items) > _MAX_LIST:
        raise WireError(f"{name} holds {len(items)} entries; at most {_MAX_LIST} fit the u16 count")
    for sqn in items:
        _uint(sqn, 32, f"{name} entry")


# --- options (section 4.4) -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RuSidOption:
    """SID option (type 1): the source-chosen session ID that keys the transport."""

    session_id: int
    flags: int = 0

    def __post_init__(self) -> None:
        _uint(self.session_id, 32, "session_id")
        _uint(self.flags, 16, "option flags")

    @property
    def kind(self) -> int:
        return NHDR_SID

    @property
    def wire_len(self) -> int:
        return _OPT_U32_LEN


@dataclass(frozen=True, slots=True)
class RuCidOption:
    """CID option (type 2): the client ID the source assigned to this receiver."""

    client_id: int
    flags: int = 0

    def __post_init__(self) -> None:
        _uint(self.client_id, 32, "client_id")
        _uint(self.flags, 16, "option flags")

    @property
    def kind(self) -> int:
        return NHDR_CID

    @property
    def wire_len(self) -> int:
        return _OPT_U32_LEN


@dataclass(frozen=True, slots=True)
class RuUnknownOption:
    """An option of a type this codec does not know: ``kind`` (3-255) and the bytes after its
    4-byte header.  Kept so relays can see it; Wireshark reports these as errors."""

    kind: int
    body: bytes = b""
    flags: int = 0

    def __post_init__(self) -> None:
        _uint(self.kind, 8, "option kind")
        if self.kind in (NHDR_DATA, NHDR_SID, NHDR_CID):
            raise WireError(f"option kind {self.kind} is not unknown; use RuSidOption/RuCidOption")
        if not isinstance(self.body, bytes):
            raise WireError("option body must be bytes")
        if len(self.body) > _MAX_OPT_BODY:
            raise WireError(f"option body is {len(self.body)} bytes; at most {_MAX_OPT_BODY} fit hdr_len")
        _uint(self.flags, 16, "option flags")

    @property
    def wire_len(self) -> int:
        return _OPT_HEADER_LEN + len(self.body)


RuOption = RuSidOption | RuCidOption | RuUnknownOption


def make_options(session_id: int | None = None, client_id: int | None = None) -> tuple[RuOption, ...]:
    """The usual chain: SID (always send it, see the module docstring), then CID if given."""
    opts: list[RuOption] = []
    if session_id is not None:
        opts.append(RuSidOption(session_id))
    if client_id is not None:
        opts.append(RuCidOption(client_id))
    return tuple(opts)


class _HasOptions:
    """``session_id`` / ``client_id`` read from the option chain (``None`` when absent)."""

    __slots__ = ()
    options: tuple[RuOption, ...]

    @property
    def session_id(self) -> int | None:
        for opt in self.options:
            if isinstance(opt, RuSidOption):
                return opt.session_id
        return None

    @property
    def client_id(self) -> int | None:
        for opt in self.options:
            if isinstance(opt, RuCidOption):
                return opt.client_id
        return None

    def _check_options(self) -> None:
        for opt in _as_tuple(self, "options", self.options):
            if not isinstance(opt, RuSidOption | RuCidOption | RuUnknownOption):
                raise WireError(f"not an LBT-RU option: {opt!r}")


# --- records (section 4.3) -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RuData(_HasOptions):
    """DATA (type 0): one transport datagram carrying LBMC message(s) in ``payload``."""

    sqn: int
    trail_sqn: int
    payload: Buffer = b""
    flags: int = 0
    options: tuple[RuOption, ...] = ()

    def __post_init__(self) -> None:
        _uint(self.sqn, 32, "sqn")
        _uint(self.trail_sqn, 32, "trail_sqn")
        if not isinstance(self.payload, bytes | bytearray | memoryview):
            raise WireError("payload must be bytes-like")
        _uint(self.flags, 16, "flags")
        self._check_options()

    @property
    def retransmission(self) -> bool:
        return bool(self.flags & FLAG_RX)


@dataclass(frozen=True, slots=True)
class RuSessionMessage(_HasOptions):
    """SM (type 2): lead/trail edges while idle; with ``FLAG_SYN`` the answer to a CREQ."""

    sm_sqn: int
    lead_sqn: int
    trail_sqn: int
    flags: int = 0
    options: tuple[RuOption, ...] = ()

    def __post_init__(self) -> None:
        _uint(self.sm_sqn, 32, "sm_sqn")
        _uint(self.lead_sqn, 32, "lead_sqn")
        _uint(self.trail_sqn, 32, "trail_sqn")
        _uint(self.flags, 16, "flags")
        self._check_options()

    @property
    def syn(self) -> bool:
        return bool(self.flags & FLAG_SYN)


@dataclass(frozen=True, slots=True)
class RuNak(_HasOptions):
    """NAK (type 3): receiver to source, the missing data ``sqns``."""

    sqns: tuple[int, ...]
    format: int = NakFormat.SELECTIVE
    options: tuple[RuOption, ...] = ()

    def __post_init__(self) -> None:
        _sqn_list(self, "sqns", self.sqns)
        _uint(self.format, 4, "format")
        self._check_options()


@dataclass(frozen=True, slots=True)
class RuNcf(_HasOptions):
    """NCF (type 4): the source confirms NAKed ``sqns`` and says why (``reason``)."""

    trail_sqn: int
    sqns: tuple[int, ...]
    reason: int = NcfReason.RETRANSMIT_DELAY
    format: int = NakFormat.SELECTIVE
    options: tuple[RuOption, ...] = ()

    def __post_init__(self) -> None:
        _uint(self.trail_sqn, 32, "trail_sqn")
        _sqn_list(self, "sqns", self.sqns)
        _uint(self.reason, 4, "reason")
        _uint(self.format, 4, "format")
        self._check_options()


@dataclass(frozen=True, slots=True)
class RuAck(_HasOptions):
    """ACK (type 5): receiver to source, the highest sqn held in order."""

    ack_sqn: int
    options: tuple[RuOption, ...] = ()

    def __post_init__(self) -> None:
        _uint(self.ack_sqn, 32, "ack_sqn")
        self._check_options()


@dataclass(frozen=True, slots=True)
class RuCreq(_HasOptions):
    """CREQ (type 6): receiver to source, connection request (``CREQ_SYN``)."""

    request: int = CREQ_SYN
    options: tuple[RuOption, ...] = ()

    def __post_init__(self) -> None:
        _uint(self.request, 16, "request")
        self._check_options()


@dataclass(frozen=True, slots=True)
class RuRst(_HasOptions):
    """RST (type 7): the source tears the session down.  Send it without options (module docstring)."""

    reason: int = RST_DEFAULT
    options: tuple[RuOption, ...] = ()

    def __post_init__(self) -> None:
        _uint(self.reason, 16, "reason")
        self._check_options()


RuRecord = RuData | RuSessionMessage | RuNak | RuNcf | RuAck | RuCreq | RuRst
_RECORD_TYPES: Final = (RuData, RuSessionMessage, RuNak, RuNcf, RuAck, RuCreq, RuRst)


# --- encoding ------------------------------------------------------------------------------------


def _options_len(options: tuple[RuOption, ...]) -> int:
    return sum(opt.wire_len for opt in options)


def _first_kind(options: tuple[RuOption, ...]) -> int:
    return options[0].kind if options else NHDR_DATA


def _write_options(buf: bytearray, offset: int, options: tuple[RuOption, ...]) -> int:
    """Write the chain at ``offset``; each option's next_hdr names the following option's kind."""
    last = len(options) - 1
    for i, opt in enumerate(options):
        nxt = options[i + 1].kind if i < last else NHDR_DATA
        if isinstance(opt, RuSidOption):
            _OPT_U32.pack_into(buf, offset, nxt, _OPT_U32_LEN, opt.flags, opt.session_id)
        elif isinstance(opt, RuCidOption):
            _OPT_U32.pack_into(buf, offset, nxt, _OPT_U32_LEN, opt.flags, opt.client_id)
        else:
            _OPT.pack_into(buf, offset, nxt, opt.wire_len, opt.flags)
            buf[offset + _OPT_HEADER_LEN : offset + opt.wire_len] = opt.body
        offset += opt.wire_len
    return offset


def _write_list(buf: bytearray, offset: int, sqns: tuple[int, ...]) -> int:
    if sqns:
        struct.pack_into(f">{len(sqns)}I", buf, offset, *sqns)
    return offset + 4 * len(sqns)


def encode(record: RuRecord) -> bytes:
    """The UDP payload for ``record``; :class:`WireError` if it cannot be encoded."""
    if not isinstance(record, _RECORD_TYPES):
        raise WireError(f"not an LBT-RU record: {type(record).__name__}")
    opts = record.options
    nh = _first_kind(opts)
    olen = _options_len(opts)
    if isinstance(record, RuData):
        payload = as_view(record.payload)
        off = DATA_HEADER_LEN + olen
        buf = bytearray(off + len(payload))
        _DATA.pack_into(buf, 0, TYPE_DATA, nh, record.flags, record.sqn, record.trail_sqn)
        _write_options(buf, DATA_HEADER_LEN, opts)
        buf[off:] = payload
        return bytes(buf)
    if isinstance(record, RuSessionMessage):
        buf = bytearray(_SM.size + olen)
        _SM.pack_into(buf, 0, TYPE_SM, nh, record.flags, record.sm_sqn, record.lead_sqn, record.trail_sqn)
        _write_options(buf, _SM.size, opts)
        return bytes(buf)
    if isinstance(record, RuNak):
        buf = bytearray(_NAK.size + 4 * len(record.sqns) + olen)
        _NAK.pack_into(buf, 0, TYPE_NAK, nh, 0, len(record.sqns), record.format)
        _write_options(buf, _write_list(buf, _NAK.size, record.sqns), opts)
        return bytes(buf)
    if isinstance(record, RuNcf):
        buf = bytearray(_NCF.size + 4 * len(record.sqns) + olen)
        _NCF.pack_into(
            buf,
            0,
            TYPE_NCF,
            nh,
            0,
            record.trail_sqn,
            len(record.sqns),
            0,
            (record.reason << 4) | record.format,
        )
        _write_options(buf, _write_list(buf, _NCF.size, record.sqns), opts)
        return bytes(buf)
    if isinstance(record, RuAck):
        buf = bytearray(_ACK.size + olen)
        _ACK.pack_into(buf, 0, TYPE_ACK, nh, 0, record.ack_sqn)
        _write_options(buf, _ACK.size, opts)
        return bytes(buf)
    if isinstance(record, RuCreq | RuRst):
        is_creq = isinstance(record, RuCreq)
        code = record.request if isinstance(record, RuCreq) else record.reason
        buf = bytearray(BASE_HEADER_LEN + olen)
        _BASE.pack_into(buf, 0, TYPE_CREQ if is_creq else TYPE_RST, nh, code)
        _write_options(buf, BASE_HEADER_LEN, opts)
        return bytes(buf)
    raise WireError(f"not an LBT-RU record: {type(record).__name__}")


def encode_data_into(
    buf: bytearray | memoryview,
    offset: int,
    sqn: int,
    trail_sqn: int,
    flags: int = 0,
    *,
    session_id: int | None,
    client_id: int | None = None,
    payload_len: int = 0,
) -> int:
    """Hot path: write a DATA header and its SID (and CID) options at ``buf[offset:]``.

    Returns the header length (20 with a SID, 28 with SID and CID, 12 with neither); the caller
    writes the LBMC payload right after it.  ``session_id`` is required by keyword so that leaving
    the SID out (``None``) is a visible decision.  ``payload_len`` is only used to check that
    header and payload fit.  Any failure is a :class:`WireError`.
    """
    try:
        if session_id is not None:
            size = _DATA_SID.size if client_id is None else _DATA_SID_CID.size
        elif client_id is not None:
            raise WireError("a CID option without a SID option is not supported by the hot path")
        else:
            size = DATA_HEADER_LEN
        if offset < 0 or offset + size + payload_len > len(buf):
            raise WireError(
                f"buffer too small: {len(buf)} bytes for a {size}-byte header and "
                f"{payload_len}-byte payload at offset {offset}"
            )
        if session_id is None:
            _DATA.pack_into(buf, offset, TYPE_DATA, NHDR_DATA, flags, sqn, trail_sqn)
        elif client_id is None:
            _DATA_SID.pack_into(
                buf, offset, TYPE_DATA, NHDR_SID, flags, sqn, trail_sqn, NHDR_DATA, 8, 0, session_id
            )
        else:
            _DATA_SID_CID.pack_into(
                buf,
                offset,
                TYPE_DATA,
                NHDR_SID,
                flags,
                sqn,
                trail_sqn,
                NHDR_CID,
                8,
                0,
                session_id,
                NHDR_DATA,
                8,
                0,
                client_id,
            )
    except (struct.error, TypeError) as exc:
        raise WireError(f"cannot encode LBT-RU DATA header: {exc}") from exc
    return size


# --- decoding ------------------------------------------------------------------------------------


def data_header_packer(session_id: int | None) -> Callable[[int, int], bytes]:
    """Hot path: ``pack(sqn, trail_sqn)`` returning one session's DATA header for original data (no
    flags): with the SID option (20 bytes) or, for ``None``, without options (12 bytes).

    The session id is checked and bound once; each call is one precompiled ``struct`` pack, and its
    bytes equal what :func:`encode_data_into` writes for the same values.  ``sqn`` and ``trail_sqn``
    must be u32 (``struct.error`` otherwise: the caller masks them).
    """
    if session_id is not None:
        _uint(session_id, 32, "session_id")
    return ru_header_packer(session_id)


def data_header_template(session_id: int | None) -> HeaderTemplate:
    """Hot path: :func:`data_header_packer` as ``(pack, prefix, suffix)``, for a caller that keeps the
    parts (one call per header instead of two): ``pack(prefix, sqn, trail_sqn, suffix)`` is the header."""
    if session_id is not None:
        _uint(session_id, 32, "session_id")
    return ru_header_template(session_id)


def packet_type(buf: Buffer) -> int:
    """The packet type nibble (``TYPE_DATA`` ...) for dispatching; checks length and version only."""
    if len(buf) < BASE_HEADER_LEN:
        raise WireError(f"truncated LBT-RU base header: {len(buf)} of {BASE_HEADER_LEN} bytes", offset=0)
    ver_type = buf[0]
    if ver_type & 0xF0:
        raise WireError(f"unsupported LBT-RU version {ver_type >> 4}", offset=0)
    return ver_type & 0x0F


def _read_options(view: Buffer, offset: int, kind: int) -> tuple[tuple[RuOption, ...], int]:
    """Walk the chain that starts with option type ``kind``; return the options and the end offset."""
    options: list[RuOption] = []
    end = len(view)
    while kind != NHDR_DATA:
        if offset + _OPT_HEADER_LEN > end:
            raise WireError("truncated LBT-RU option header", offset=offset)
        nxt, hdr_len, flags = _OPT.unpack_from(view, offset)
        # hdr_len counts the 4-byte header; smaller values (0 above all) would never advance.
        if hdr_len < _OPT_HEADER_LEN or offset + hdr_len > end:
            raise WireError(f"bad LBT-RU option length {hdr_len}", offset=offset)
        if kind in (NHDR_SID, NHDR_CID):
            if hdr_len < _OPT_U32_LEN:
                raise WireError(f"LBT-RU option {kind} needs 8 bytes, hdr_len is {hdr_len}", offset=offset)
            value: int = struct.unpack_from(">I", view, offset + _OPT_HEADER_LEN)[0]
            options.append(RuSidOption(value, flags) if kind == NHDR_SID else RuCidOption(value, flags))
        else:
            body = bytes(view[offset + _OPT_HEADER_LEN : offset + hdr_len])
            options.append(RuUnknownOption(kind, body, flags))
        offset += hdr_len
        kind = nxt
    return tuple(options), offset


def _read_list(view: memoryview, offset: int, count: int, what: str) -> tuple[int, ...]:
    size = 4 * count
    if offset + size > len(view):
        raise WireError(f"truncated {what}: {count} entries need {size} bytes", offset=offset)
    return struct.unpack_from(f">{count}I", view, offset) if count else ()


def decode_data_header(buf: Buffer) -> tuple[int, int, int, int | None, int]:
    """Hot path: ``(flags, sqn, trail_sqn, session_id, payload_offset)`` of a DATA datagram.

    ``session_id`` is ``None`` without a SID option.  Check :func:`packet_type` first; the LBMC
    payload is ``buf[payload_offset:]``.  Test ``flags & FLAG_RX`` for retransmissions.
    """
    fast = ru_data_header_fast(buf)  # what openum sends: no option, or exactly the SID option
    if fast is not None:
        return fast
    size = len(buf)
    if size < DATA_HEADER_LEN:
        raise WireError(f"truncated LBT-RU DATA header: {size} of {DATA_HEADER_LEN} bytes", offset=0)
    ver_type, next_hdr, flags, sqn, trail = _DATA.unpack_from(buf, 0)
    if ver_type != TYPE_DATA:  # version nibble 0 and type DATA in one compare
        raise WireError(f"not an LBT-RU DATA packet (ver/type {ver_type:#04x})", offset=0)
    if next_hdr == NHDR_DATA:
        return flags, sqn, trail, None, DATA_HEADER_LEN
    options, offset = _read_options(buf, DATA_HEADER_LEN, next_hdr)
    sid = next((o.session_id for o in options if isinstance(o, RuSidOption)), None)
    return flags, sqn, trail, sid, offset


def decode(buf: Buffer) -> RuRecord:
    """Decode one LBT-RU datagram (the UDP payload).  DATA payloads are zero-copy slices of ``buf``."""
    view = as_view(buf)
    ptype = packet_type(view)
    size = len(view)
    if ptype == TYPE_DATA:
        if size < DATA_HEADER_LEN:
            raise WireError(f"truncated LBT-RU DATA: {size} of {DATA_HEADER_LEN} bytes", offset=0)
        _, nh, flags, sqn, trail = _DATA.unpack_from(view, 0)
        options, off = _read_options(view, DATA_HEADER_LEN, nh)
        return RuData(sqn, trail, view[off:], flags, options)
    if ptype == TYPE_SM:
        if size < _SM.size:
            raise WireError(f"truncated LBT-RU SM: {size} of {_SM.size} bytes", offset=0)
        _, nh, flags, sm_sqn, lead, trail = _SM.unpack_from(view, 0)
        options, _ = _read_options(view, _SM.size, nh)
        return RuSessionMessage(sm_sqn, lead, trail, flags, options)
    if ptype == TYPE_NAK:
        if size < _NAK.size:
            raise WireError(f"truncated LBT-RU NAK: {size} of {_NAK.size} bytes", offset=0)
        _, nh, _res, count, fmt = _NAK.unpack_from(view, 0)
        sqns = _read_list(view, _NAK.size, count, "LBT-RU NAK list")
        options, _ = _read_options(view, _NAK.size + 4 * count, nh)
        # format is a u16 on the wire but only its low nibble is defined (section 4.3)
        return RuNak(sqns, fmt & 0x0F, options)
    if ptype == TYPE_NCF:
        if size < _NCF.size:
            raise WireError(f"truncated LBT-RU NCF: {size} of {_NCF.size} bytes", offset=0)
        _, nh, _res, trail, count, _res2, reason_format = _NCF.unpack_from(view, 0)
        sqns = _read_list(view, _NCF.size, count, "LBT-RU NCF list")
        options, _ = _read_options(view, _NCF.size + 4 * count, nh)
        return RuNcf(trail, sqns, reason_format >> 4, reason_format & 0x0F, options)
    if ptype == TYPE_ACK:
        if size < _ACK.size:
            raise WireError(f"truncated LBT-RU ACK: {size} of {_ACK.size} bytes", offset=0)
        _, nh, _res, ack_sqn = _ACK.unpack_from(view, 0)
        options, _ = _read_options(view, _ACK.size, nh)
        return RuAck(ack_sqn, options)
    if ptype in (TYPE_CREQ, TYPE_RST):
        _, nh, code = _BASE.unpack_from(view, 0)
        options, _ = _read_options(view, BASE_HEADER_LEN, nh)
        return RuCreq(code, options) if ptype == TYPE_CREQ else RuRst(code, options)
    raise WireError(f"unknown LBT-RU packet type {ptype}", offset=0)
