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
    "RU_DATA",
    "RU_DATA_SID",
    "RU_NHDR_SID",
    "TYPE_DATA",
    "rm_data_header_fast",
    "rm_header_packer",
    "ru_data_header_fast",
    "ru_header_packer",
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


def ru_header_packer(session_id: int | None) -> Callable[[int, int], bytes]:
    """``pack(sqn, trail_sqn)``: one LBT-RU session's header for original data, with the SID option or,
    for None, without options.  ``session_id`` must be checked by the caller (u32)."""
    if session_id is None:
        pack_plain = RU_DATA.pack

        def pack_header_plain(sqn: int, trail_sqn: int) -> bytes:
            return pack_plain(TYPE_DATA, NHDR_DATA, 0, sqn, trail_sqn)

        return pack_header_plain
    sid: int = session_id
    pack = RU_DATA_SID.pack

    def pack_header(sqn: int, trail_sqn: int) -> bytes:
        return pack(TYPE_DATA, RU_NHDR_SID, 0, sqn, trail_sqn, NHDR_DATA, _RU_SID_OPTION_LEN, 0, sid)

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


def rm_header_packer(ucast_port: int, session_id: int, flags: int) -> Callable[[int, int], bytes]:
    """``pack(sqn, trail_sqn)``: one LBT-RM session's 20-byte header (no options, no FEC); the caller
    checks the session's values."""
    pack = RM_DATA.pack

    def pack_header(sqn: int, trail_sqn: int) -> bytes:
        return pack(TYPE_DATA, NHDR_DATA, ucast_port, session_id, sqn, trail_sqn, flags, 0, 0)

    return pack_header


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
