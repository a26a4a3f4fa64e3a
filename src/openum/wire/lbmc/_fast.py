"""LBMC hot path: plain data messages packed and unpacked without building records.

Implements the data header of ``../shared/wire/lbmc-pdm-srs.md`` §2.1 (version 0, type DATA, no
extension headers) and, for a source's first message of a topic, §2.4's TOPICNAME header.  These
functions build no :class:`~openum.wire.lbmc.LbmcMessage`: they pack/unpack the 12-byte header
straight into/out of the caller's buffer and hand the payload back as a ``memoryview``.  Anything
else (extension headers, other types, errors) goes through the record API in ``_message.py``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, Final

from openum.wire._common import Buffer, WireError
from openum.wire.lbmc._base import (
    _NHDR_DATA,
    DATA_HEADER_LEN,
    MAX_MESSAGE_LEN,
    HeaderType,
)
from openum.wire.lbmc._headers_core import TopicNameHeader
from openum.wire.lbmc._message import _DATA_HDR

_pack_data_hdr = _DATA_HDR.pack_into
_unpack_data_hdr = _DATA_HDR.unpack_from
# One struct per payload size packs header and payload in a single call (about twice as fast as
# packing the header and slice-assigning the payload).  Bounded: sizes beyond it take the slow way.
_DATA_STRUCTS: dict[int, struct.Struct] = {}
_DATA_TOPIC_STRUCTS: dict[tuple[int, int], struct.Struct] = {}
_MAX_CACHED_SIZES: Final = 4096
# Payload types a struct ``s`` field packs as they are (a memoryview must take the slice-assign way).
_PACKABLE: Final = frozenset({bytes, bytearray})
# TOPICNAME's code as a plain int: packing the IntEnum member costs an attribute lookup and an
# ``__index__`` call per message (same byte on the wire).
_TOPICNAME: Final = int(HeaderType.TOPICNAME)


def _encode_error(offset: int, size: int, buf: bytearray | memoryview, exc: Exception) -> WireError:
    if size > MAX_MESSAGE_LEN:
        return WireError(f"LBMC message of {size} bytes exceeds {MAX_MESSAGE_LEN}; fragment it")
    return WireError(f"cannot encode a {size}-byte data message at {offset} in {len(buf)} bytes: {exc}")


def encode_data_into(
    buf: bytearray | memoryview, offset: int, topic_index: int, sqn: int, payload: Buffer
) -> int:
    """Write a plain data message (no extension headers) at ``offset``; return the end offset."""
    st = _DATA_STRUCTS.get(len(payload))
    if st is not None and offset >= 0 and type(payload) in _PACKABLE:
        try:
            st.pack_into(buf, offset, 0, 0, st.size, topic_index, sqn, payload)
        except struct.error as exc:
            raise _encode_error(offset, st.size, buf, exc) from None
        return offset + st.size
    size = DATA_HEADER_LEN + len(payload)
    end = offset + size
    if size > MAX_MESSAGE_LEN or end > len(buf) or offset < 0:
        raise _encode_error(offset, size, buf, ValueError("out of range"))
    try:
        _pack_data_hdr(buf, offset, 0, 0, size, topic_index, sqn)
    except struct.error as exc:
        raise _encode_error(offset, size, buf, exc) from None
    buf[offset + DATA_HEADER_LEN : end] = payload
    if st is None and len(_DATA_STRUCTS) < _MAX_CACHED_SIZES:
        _DATA_STRUCTS[len(payload)] = struct.Struct(f">BBHII{len(payload)}s")
    return end


def topic_name_block(topic: str) -> bytes:
    """The TOPICNAME header (next = DATA) for :func:`encode_data_topic_into`; build it once."""
    body = TopicNameHeader(topic).encode_body()
    return bytes((_NHDR_DATA, len(body) + 2)) + body


def encode_data_topic_into(
    buf: bytearray | memoryview, offset: int, topic_index: int, sqn: int, topic_block: bytes, payload: Buffer
) -> int:
    """Like :func:`encode_data_into` with a TOPICNAME header (``topic_block`` from
    :func:`topic_name_block`), as on a source's first message of a topic."""
    key = (len(topic_block), len(payload))
    st = _DATA_TOPIC_STRUCTS.get(key)
    if st is not None and offset >= 0 and type(payload) in _PACKABLE and type(topic_block) is bytes:
        try:
            st.pack_into(buf, offset, 0, _TOPICNAME, st.size, topic_index, sqn, topic_block, payload)
        except struct.error as exc:
            raise _encode_error(offset, st.size, buf, exc) from None
        return offset + st.size
    hdr_end = offset + DATA_HEADER_LEN + len(topic_block)
    end = hdr_end + len(payload)
    if end - offset > MAX_MESSAGE_LEN or end > len(buf) or offset < 0:
        raise _encode_error(offset, end - offset, buf, ValueError("out of range"))
    try:
        _pack_data_hdr(buf, offset, 0, _TOPICNAME, end - offset, topic_index, sqn)
    except struct.error as exc:
        raise _encode_error(offset, end - offset, buf, exc) from None
    buf[offset + DATA_HEADER_LEN : hdr_end] = topic_block
    buf[hdr_end:end] = payload
    if st is None and len(_DATA_TOPIC_STRUCTS) < _MAX_CACHED_SIZES:
        _DATA_TOPIC_STRUCTS[key] = struct.Struct(f">BBHII{key[0]}s{key[1]}s")
    return end


def data_message_packer(size: int) -> Callable[[Any, int, int, int, int, bytes | bytearray], None]:
    """A single-call encoder of a plain data message (§2.1: version 0, type DATA, no extension headers)
    with a ``size``-byte payload, for a sender that keeps one per payload size it sends.

    Call it as ``pack(buf, offset, msglen, topic_index, sqn, payload)`` with ``msglen ==
    DATA_HEADER_LEN + size`` and ``payload`` a ``bytes`` or ``bytearray`` of exactly ``size`` bytes (a
    ``memoryview`` cannot be packed this way: use :func:`encode_data_into`).  It writes ``msglen`` bytes
    at ``offset`` (the version/type and next-header bytes are the struct's zero pad bytes) and raises
    ``struct.error`` when they do not fit or a field is out of range; it is ``struct.Struct.pack_into``
    itself, so no Python frame runs per message."""
    if not 0 <= size <= MAX_MESSAGE_LEN - DATA_HEADER_LEN:
        raise ValueError(f"payload size {size} is outside 0..{MAX_MESSAGE_LEN - DATA_HEADER_LEN}")
    return struct.Struct(f">2xHII{size}s").pack_into


#: A data message whose only extension header is FRAG (§2.4): the data header, then FRAG's next-header
#: (DATA), length (16), flags, first sqn, offset and total length.  ``FRAGMENT_HEADER_LEN`` bytes.
_FRAG_MSG: Final = struct.Struct(">BBHIIBBHIII")
FRAGMENT_HEADER_LEN: Final = _FRAG_MSG.size  # 28
_FRAG: Final = int(HeaderType.FRAG)
_FRAG_HDR_LEN: Final = _FRAG_MSG.size - DATA_HEADER_LEN  # 16: FRAG's hdr_len
_unpack_frag_fields: Final = struct.Struct(">BBHIII").unpack_from  # FRAG from its next-header byte on


def encode_fragment_into(
    buf: bytearray | memoryview,
    offset: int,
    topic_index: int,
    sqn: int,
    first_sqn: int,
    fragment_offset: int,
    total_length: int,
    payload: Buffer,
) -> int:
    """Write one fragment of a large message (a data message with a FRAG header and nothing else) at
    ``offset``; return the end offset.

    The bytes equal :func:`~openum.wire.lbmc.encode_message` of ``LbmcMessage(MessageType.DATA,
    topic_index, sqn, (FragmentHeader(first_sqn, fragment_offset, total_length),), payload)``, written
    with one ``struct`` call and one copy of the payload.  Raises :class:`WireError` when it does not fit
    in ``buf`` or in one LBMC message, or a field is out of range."""
    size = FRAGMENT_HEADER_LEN + len(payload)
    end = offset + size
    if size > MAX_MESSAGE_LEN or end > len(buf) or offset < 0:
        raise _encode_error(offset, size, buf, ValueError("out of range"))
    try:
        _FRAG_MSG.pack_into(
            buf,
            offset,
            0,
            _FRAG,
            size,
            topic_index,
            sqn,
            _NHDR_DATA,
            _FRAG_HDR_LEN,
            0,
            first_sqn,
            fragment_offset,
            total_length,
        )
    except struct.error as exc:
        raise _encode_error(offset, size, buf, exc) from None
    buf[offset + FRAGMENT_HEADER_LEN : end] = payload
    return end


def decode_fragment_fields(view: memoryview, offset: int, msglen: int) -> tuple[int, int, int] | None:
    """Hot path for a receiver: ``(first_sqn, fragment_offset, total_length)`` when the data message at
    ``offset`` (``msglen`` bytes, already checked to fit in ``view``, version 0, type DATA, first
    extension header FRAG) has FRAG as its only extension header, as :func:`encode_fragment_into` writes
    it; its payload starts at ``offset + FRAGMENT_HEADER_LEN``.  ``None`` for anything else: decode that
    with :func:`decode_message_at`."""
    if msglen < FRAGMENT_HEADER_LEN:
        return None
    nxt, hlen, _flags, first_sqn, fragment_offset, total_length = _unpack_frag_fields(
        view, offset + DATA_HEADER_LEN
    )
    if nxt != _NHDR_DATA or hlen != _FRAG_HDR_LEN:
        return None
    return first_sqn, fragment_offset, total_length


def encode_data(topic_index: int, sqn: int, payload: Buffer) -> bytes:
    """A plain data message as bytes (convenience over :func:`encode_data_into`)."""
    buf = bytearray(DATA_HEADER_LEN + len(payload))
    encode_data_into(buf, 0, topic_index, sqn, payload)
    return bytes(buf)


def decode_data_fast(view: memoryview, offset: int = 0) -> tuple[int, int, memoryview, int] | None:
    """Decode a plain data message at ``offset`` without building a record.

    Returns ``(topic_index, sqn, payload_view, next_offset)`` when the message is version 0, type
    DATA, has no extension headers and fits in ``view``; otherwise ``None``: use
    :func:`decode_message_at`, which decodes everything else or raises WireError.
    """
    try:
        ver_type, first, msglen, tidx, sqn = _unpack_data_hdr(view, offset)
    except struct.error:
        return None
    end = offset + msglen
    if ver_type or first or msglen < DATA_HEADER_LEN or end > len(view) or offset < 0:
        return None
    return tidx, sqn, view[offset + DATA_HEADER_LEN : end], end
