"""The LBT-RU and LBT-RM DATA headers of every message: packed per send, parsed per datagram read.

:mod:`openum.wire.lbtru` and :mod:`openum.wire.lbtrm` define the layouts (sections 4.3 and 3.3) and
re-export these functions' work through their public ``data_header_packer`` and ``decode_data_header``;
the functions live apart so that :mod:`openum._accel` can compile them with the send and receive paths
that call them.  The codec modules themselves stay interpreted: their records accept any sequence where
they keep a tuple, and report a wrongly typed field as a :class:`~openum.wire.WireError` naming it,
where compiled classes would refuse the call with a bare ``TypeError`` first.

Only the layouts openum writes have a fast path here; the ``*_fast`` parsers answer None for any other
(options, another version or type, too short), and the codec module's ``decode_data_header`` then reads
it the general way and reports what is wrong.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Final

from openum.wire._common import Buffer

__all__ = [
    "NHDR_DATA",
    "RM_DATA",
    "RM_FLAG_RX",
    "RU_DATA",
    "RU_DATA_SID",
    "RU_NHDR_SID",
    "TYPE_DATA",
    "HeaderPack",
    "HeaderTemplate",
    "rm_data_header_fast",
    "rm_header_packer",
    "rm_header_template",
    "rm_original_sqn",
    "ru_data_header_fast",
    "ru_header_packer",
    "ru_header_template",
    "ru_original_sqn",
]

TYPE_DATA: Final = 0  # both protocols: version nibble 0 and type DATA in the first byte
NHDR_DATA: Final = 0  # both protocols: next_hdr ending the option chain (the payload follows)
RU_NHDR_SID: Final = 1  # LBT-RU's session id option

#: LBT-RU DATA: ver_type, next_hdr, flags, sqn, trail_sqn.
RU_DATA: Final = struct.Struct(">BBHII")
#: LBT-RU DATA with exactly the SID option, what openum sends: ... next_hdr, hdr_len, flags, session_id.
RU_DATA_SID: Final = struct.Struct(">BBHIIBBHI")
#: LBT-RM DATA: ver_type, next_hdr, ucast_port, session_id, sqn, trail_sqn, flags_fec_type, tgsz,
#: fec_symbol.
RM_DATA: Final = struct.Struct(">BBHIIIBBH")

_RU_SID_OPTION_LEN: Final = 8  # hdr_len of the SID option

#: The words of an original LBT-RU DATA header openum writes that :func:`ru_original_sqn` checks: the first
#: (ver_type, next_hdr, flags 0) and, with the SID option, the option's first (next_hdr, hdr_len, 0).
_RU_FIRST_SID: Final = RU_NHDR_SID << 16
_RU_FIRST_PLAIN: Final = NHDR_DATA << 16
_RU_SID_OPTION_WORD: Final = (NHDR_DATA << 24) | (_RU_SID_OPTION_LEN << 16)
#: Two 64-bit words of an LBT-RU DATA header with the SID option: ver_type+next_hdr+flags+sqn, (trail
#: skipped), option word+session_id; in what openum sends both are below 2**62, which compiled code keeps
#: unboxed.
_RU_SID_WORDS: Final = struct.Struct(">Q4xQ").unpack_from
#: ver_type+next_hdr+flags+sqn without options.
_RU_PLAIN_WORD: Final = struct.Struct(">Q").unpack_from
#: LBT-RM: ver_type+next_hdr+ucast_port+session_id, sqn, (trail skipped), flags_fec_type+tgsz+fec_symbol.
_RM_WORDS: Final = struct.Struct(">QI4xI").unpack_from
#: LBT-RM's first word without the port: ver_type (DATA), next_hdr (no options).
_RM_FIRST: Final = (TYPE_DATA << 24) | (NHDR_DATA << 16)
#: The low 32 bits: a sequence number.
_SQN_BITS: Final = 0xFFFFFFFF
#: LBT-RM's retransmission flag (in flags_fec_type).
RM_FLAG_RX: Final = 0x20


#: Packs a DATA header from its template: ``pack(prefix, sqn, trail_sqn, suffix)``.
HeaderPack = Callable[[bytes, int, int, bytes], bytes]
#: One session's DATA header for original data: ``(pack, prefix, suffix)``, where ``prefix`` and ``suffix``
#: are the header's bytes before and after the two sequence numbers (sqn, trail_sqn, both u32), the only
#: fields that change from datagram to datagram.  Packing two numbers and two byte strings costs less than
#: packing every field again.
HeaderTemplate = tuple[HeaderPack, bytes, bytes]


def _template(prefix: bytes, suffix: bytes) -> HeaderTemplate:
    return struct.Struct(f">{len(prefix)}sII{len(suffix)}s").pack, prefix, suffix


def ru_header_template(session_id: int | None) -> HeaderTemplate:
    """One LBT-RU session's header for original data, with the SID option or, for None, without options.
    ``session_id`` must be checked by the caller (u32)."""
    if session_id is None:
        return _template(RU_DATA.pack(TYPE_DATA, NHDR_DATA, 0, 0, 0)[:4], b"")
    header = RU_DATA_SID.pack(TYPE_DATA, RU_NHDR_SID, 0, 0, 0, NHDR_DATA, _RU_SID_OPTION_LEN, 0, session_id)
    return _template(header[:4], header[12:])


def ru_header_packer(session_id: int | None) -> Callable[[int, int], bytes]:
    """``pack(sqn, trail_sqn)``: :func:`ru_header_template` as one function."""
    return _packer(ru_header_template(session_id))


def _packer(template: HeaderTemplate) -> Callable[[int, int], bytes]:
    pack, prefix, suffix = template

    def pack_header(sqn: int, trail_sqn: int) -> bytes:
        return pack(prefix, sqn, trail_sqn, suffix)

    return pack_header


def ru_data_header_fast(
    buf: Buffer,
) -> tuple[int, int, int, int | None, int] | None:
    """``(flags, sqn, trail_sqn, session_id, payload_offset)`` of an LBT-RU DATA datagram with the SID
    option or no option; None for any other datagram."""
    size = len(buf)
    if size >= RU_DATA_SID.size:
        ver_type, next_hdr, flags, sqn, trail, opt_next, opt_len, _, sid = RU_DATA_SID.unpack_from(buf, 0)
        if ver_type == TYPE_DATA and next_hdr == RU_NHDR_SID:
            if opt_next == NHDR_DATA and opt_len == _RU_SID_OPTION_LEN:
                return flags, sqn, trail, sid, RU_DATA_SID.size
            return None
    elif size < RU_DATA.size:
        return None
    ver_type, next_hdr, flags, sqn, trail = RU_DATA.unpack_from(buf, 0)
    if ver_type == TYPE_DATA and next_hdr == NHDR_DATA:
        return flags, sqn, trail, None, RU_DATA.size
    return None


def ru_original_sqn(buf: Buffer, session_id: int | None) -> int:
    """Hot path of reception: the sequence number of an original LBT-RU DATA datagram laid out as openum
    writes them for session ``session_id`` (no flags; the SID option only, or no option for None), -1
    for anything else (a retransmission, another layout or session, too short), which the general
    decoder then reads.  The payload starts at the header's length (20 bytes, or 12 without the option).
    Four of the header's words are read, not its nine fields."""
    if session_id is None:
        if len(buf) < RU_DATA.size:
            return -1
        head: int = _RU_PLAIN_WORD(buf, 0)[0]
        return head & _SQN_BITS if head >> 32 == _RU_FIRST_PLAIN else -1
    if len(buf) < RU_DATA_SID.size:
        return -1
    tail: int
    head, tail = _RU_SID_WORDS(buf, 0)
    if head >> 32 == _RU_FIRST_SID and tail == (_RU_SID_OPTION_WORD << 32) | session_id:
        return head & _SQN_BITS
    return -1


def rm_original_sqn(buf: Buffer, ucast_port: int, session_id: int) -> int:
    """Hot path of reception: the sequence number of an original (not retransmitted) LBT-RM DATA datagram
    without options of the session (``ucast_port``, ``session_id``), -1 for anything else (the general
    decoder then reads it).  The payload starts at byte 20."""
    if len(buf) < RM_DATA.size:
        return -1
    head: int
    sqn: int
    last: int
    head, sqn, last = _RM_WORDS(buf, 0)
    if head == ((_RM_FIRST | ucast_port) << 32) | session_id and not (last >> 24) & RM_FLAG_RX:
        return sqn
    return -1


def rm_header_template(ucast_port: int, session_id: int, flags: int) -> HeaderTemplate:
    """One LBT-RM session's 20-byte header (no options, no FEC); the caller checks the session's values."""
    header = RM_DATA.pack(TYPE_DATA, NHDR_DATA, ucast_port, session_id, 0, 0, flags, 0, 0)
    return _template(header[:8], header[16:])


def rm_header_packer(ucast_port: int, session_id: int, flags: int) -> Callable[[int, int], bytes]:
    """``pack(sqn, trail_sqn)``: :func:`rm_header_template` as one function."""
    return _packer(rm_header_template(ucast_port, session_id, flags))


def rm_data_header_fast(
    buf: Buffer,
) -> tuple[int, int, int, int, int, int] | None:
    """``(ucast_port, session_id, sqn, trail_sqn, flags_fec_type, payload_offset)`` of an LBT-RM DATA
    datagram without options; None for any other datagram."""
    if len(buf) < RM_DATA.size:
        return None
    ver_type, next_hdr, port, sid, sqn, trail, flags, _tgsz, _sym = RM_DATA.unpack_from(buf, 0)
    if ver_type != TYPE_DATA or next_hdr != NHDR_DATA:
        return None
    return port, sid, sqn, trail, flags, RM_DATA.size
