"""LBMC messages, the record API: :class:`LbmcMessage`, its encoder and its decoders.

Implements ``../shared/wire/lbmc-pdm-srs.md``:

* §1: carriers put several whole LBMC messages back to back in one datagram or TCP segment, each
  sized by its own ``msglen`` (:func:`decode_messages`, :func:`split_messages`);
* §2.1: the data header (types 0, 2, 0xA) and the control header (types 1, 8), and the extension
  header chain (``next_hdr``/``hdr_len``), ending with DATA (0x00) or NONE (0xFF);
* §2.5/§2.6: a message's properties block and the properties-length chain element that locates it,
  which the encoder writes and the decoder removes again (fragments excepted).
"""

from __future__ import annotations

import builtins
import struct
from dataclasses import dataclass
from typing import Final, TypeVar

from openum.wire._common import Buffer, WireError, as_view
from openum.wire.lbmc._base import (
    _DATA_TYPE_VALUES,
    _DECODERS,
    _MIN_HEADER_LEN,
    _NHDR_DATA,
    _NHDR_NONE,
    CONTROL_HEADER_LEN,
    DATA_HEADER_LEN,
    DATA_TYPES,
    LBMC_VERSION,
    MAX_HEADER_BODY_LEN,
    MAX_MESSAGE_LEN,
    Header,
    MessageType,
    UnknownHeader,
    _check_int,
)
from openum.wire.lbmc._chain import AppHeaderChain, PropertiesLengthElement
from openum.wire.lbmc._headers_core import FragmentHeader, TopicNameHeader
from openum.wire.lbmc._properties import PropertiesBlock, decode_properties, encode_properties

# Precompiled in the module that calls them, never imported (see the package docstring).
_DATA_HDR: Final = struct.Struct(">BBHII")
_CTL_HDR: Final = struct.Struct(">BBH")
_U16: Final = struct.Struct(">H")
_U32X2: Final = struct.Struct(">II")
_decoder_for = _DECODERS.get  # bound once: the registry is filled in place, never rebound

_HT = TypeVar("_HT", bound=Header)


@dataclass(frozen=True, slots=True)
class LbmcMessage:
    """One LBMC message.

    ``headers`` are the extension headers in chain order.  ``payload`` is the application data (for
    decoded messages a zero-copy ``memoryview`` into the decoded buffer).  ``properties`` is the
    message-properties block; the encoder appends it to the payload and writes the
    properties-length chain element itself (decoding removes that element again), so a record
    round-trips.  A message with a :class:`FragmentHeader` carries raw fragment bytes instead: the
    block belongs to the reassembled message, and its :class:`PropertiesLengthElement` is explicit.
    Control messages (EOT, CONTROL) have no topic index, sqn or payload.
    """

    type: MessageType = MessageType.DATA
    topic_index: int = 0
    sqn: int = 0
    headers: tuple[Header, ...] = ()
    payload: Buffer = b""
    properties: PropertiesBlock | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.type, MessageType):
            try:
                object.__setattr__(self, "type", MessageType(self.type))
            except ValueError as exc:
                raise WireError(f"unknown LBMC message type {self.type!r}") from exc
        if not isinstance(self.headers, tuple):
            object.__setattr__(self, "headers", tuple(self.headers))
        if not all(isinstance(h, Header) for h in self.headers):
            raise WireError("LbmcMessage.headers must be Header records")
        _check_int("LbmcMessage", "topic_index", self.topic_index, 0xFFFFFFFF)
        _check_int("LbmcMessage", "sqn", self.sqn, 0xFFFFFFFF)
        if not isinstance(self.payload, bytes | bytearray | memoryview):
            raise WireError("LbmcMessage.payload must be a bytes-like object")
        if self.properties is not None and not isinstance(self.properties, PropertiesBlock):
            raise WireError("LbmcMessage.properties must be a PropertiesBlock or None")
        fragment = any(isinstance(h, FragmentHeader) for h in self.headers)
        explicit_proplen = any(
            isinstance(h, AppHeaderChain) and any(isinstance(e, PropertiesLengthElement) for e in h.elements)
            for h in self.headers
        )
        if self.type in DATA_TYPES:
            if self.properties is not None and fragment:
                raise WireError("a fragment carries raw bytes; encode properties into the whole message")
            if explicit_proplen and not fragment:
                raise WireError("the properties-length element is written by the encoder; set properties")
        elif self.topic_index or self.sqn or len(self.payload) or self.properties is not None:
            raise WireError(f"a {self.type.name} message has no topic index, sqn, payload or properties")

    @property
    def is_data(self) -> bool:
        return self.type in DATA_TYPES

    def header(self, cls: builtins.type[_HT]) -> _HT | None:
        """The first header of class ``cls``, or ``None``."""
        for hdr in self.headers:
            if isinstance(hdr, cls):
                return hdr
        return None

    @property
    def topic_name(self) -> str | None:
        hdr = self.header(TopicNameHeader)
        return None if hdr is None else hdr.topic


def data_message(
    topic_index: int,
    sqn: int,
    payload: Buffer = b"",
    *headers: Header,
    properties: PropertiesBlock | None = None,
    msg_type: MessageType = MessageType.DATA,
) -> LbmcMessage:
    """A data message (type DATA unless ``msg_type`` says RETRANSMISSION/PROACTIVE_RETRANSMISSION)."""
    return LbmcMessage(msg_type, topic_index, sqn, headers, payload, properties)


def control_message(*headers: Header, msg_type: MessageType = MessageType.CONTROL) -> LbmcMessage:
    """A control message carrying ``headers`` (TSNI, UME, TCP session id, ...)."""
    return LbmcMessage(msg_type, 0, 0, headers)


def _with_properties_length(headers: tuple[Header, ...], length: int) -> tuple[Header, ...]:
    elem = PropertiesLengthElement(length)
    for i, hdr in enumerate(headers):
        if isinstance(hdr, AppHeaderChain):
            merged = AppHeaderChain((elem, *hdr.elements), hdr.res)
            return (*headers[:i], merged, *headers[i + 1 :])
    return (*headers, AppHeaderChain((elem,)))


def _encode_parts(msg: LbmcMessage) -> list[bytes | bytearray | memoryview]:
    headers = msg.headers
    payload: bytes | bytearray | memoryview = msg.payload
    tail = b""
    if msg.properties is not None:
        tail = encode_properties(msg.properties)
        headers = _with_properties_length(headers, len(tail))
    is_data = msg.type in DATA_TYPES
    terminator = _NHDR_DATA if is_data else _NHDR_NONE
    parts: list[bytes | bytearray | memoryview] = [b""]
    size = DATA_HEADER_LEN if is_data else CONTROL_HEADER_LEN
    count = len(headers)
    for i, hdr in enumerate(headers):
        body = hdr.encode_body()
        if len(body) > MAX_HEADER_BODY_LEN:
            raise WireError(f"{type(hdr).__name__} is too long ({len(body) + 2} bytes)")
        nxt = headers[i + 1].type_code() if i + 1 < count else terminator
        parts.append(bytes((nxt, len(body) + 2)))
        parts.append(body)
        size += len(body) + 2
    first = headers[0].type_code() if headers else terminator
    size += len(payload) + len(tail)
    if size > MAX_MESSAGE_LEN:
        raise WireError(f"LBMC message of {size} bytes exceeds {MAX_MESSAGE_LEN}; fragment it")
    if is_data:
        parts[0] = _DATA_HDR.pack(msg.type, first, size, msg.topic_index, msg.sqn)
        parts.append(payload)
        if tail:
            parts.append(tail)
    else:
        parts[0] = _CTL_HDR.pack(msg.type, first, size)
    return parts


def encode_message(msg: LbmcMessage) -> bytes:
    """Encode one message (the record API; see :func:`encode_data_into` for the hot path)."""
    return b"".join(_encode_parts(msg))


def encode_message_into(buf: bytearray | memoryview, offset: int, msg: LbmcMessage) -> int:
    """Encode ``msg`` into ``buf`` at ``offset``; return the offset after it."""
    raw = encode_message(msg)
    end = offset + len(raw)
    if offset < 0 or end > len(buf):
        raise WireError(f"buffer too small: need {end} bytes, have {len(buf)}")
    buf[offset:end] = raw
    return end


def message_length(buf: Buffer, offset: int = 0) -> int | None:
    """The ``msglen`` of the message at ``offset``, or ``None`` when fewer than 4 bytes are there."""
    if offset < 0 or offset + 4 > len(buf):
        return None
    value: int = _U16.unpack_from(buf, offset + 2)[0]
    return value


def _decode_chain(view: memoryview, pos: int, end: int, code: int) -> tuple[list[Header], int, int]:
    headers: list[Header] = []
    while code not in (_NHDR_DATA, _NHDR_NONE):
        if pos + _MIN_HEADER_LEN > end:
            raise WireError(f"truncated LBMC header {code:#04x}", offset=pos)
        nxt = view[pos]
        hlen = view[pos + 1]
        if hlen < _MIN_HEADER_LEN:  # 0 would loop forever; the dissector aborts (§2.1)
            raise WireError(f"LBMC header {code:#04x} has length {hlen}", offset=pos)
        if pos + hlen > end:
            raise WireError(f"LBMC header {code:#04x} runs past the message end", offset=pos)
        body = view[pos + 2 : pos + hlen]
        decoder = _decoder_for(code)
        try:
            hdr = UnknownHeader(code, bytes(body)) if decoder is None else decoder(body)
        except WireError as exc:
            raise WireError(str(exc), offset=pos) from None
        headers.append(hdr)
        pos += hlen
        code = nxt
    return headers, pos, code


def _split_properties(
    headers: list[Header], payload: memoryview
) -> tuple[tuple[Header, ...], memoryview, PropertiesBlock | None]:
    if not any(isinstance(h, AppHeaderChain) for h in headers) or any(
        isinstance(h, FragmentHeader) for h in headers
    ):
        return tuple(headers), payload, None
    total = 0
    found = False
    kept: list[Header] = []
    for hdr in headers:
        if isinstance(hdr, AppHeaderChain):
            rest = tuple(e for e in hdr.elements if not isinstance(e, PropertiesLengthElement))
            if len(rest) != len(hdr.elements):
                found = True
                total += sum(e.length for e in hdr.elements if isinstance(e, PropertiesLengthElement))
                if rest:
                    kept.append(AppHeaderChain(rest, hdr.res))
                continue
        kept.append(hdr)
    if not found:
        return tuple(headers), payload, None
    if total > len(payload):
        raise WireError(f"properties length {total} exceeds the payload ({len(payload)} bytes)")
    if total == 0:
        return tuple(kept), payload, None
    split = len(payload) - total
    return tuple(kept), payload[:split], decode_properties(payload[split:])


_MESSAGE_TYPES: Final = {int(t): t for t in MessageType}
_new_object = object.__new__
_set_field = object.__setattr__


def _trusted_message(
    mtype: MessageType,
    tidx: int,
    sqn: int,
    headers: tuple[Header, ...],
    payload: memoryview,
    props: PropertiesBlock | None,
) -> LbmcMessage:
    """Build a decoded message without re-running the validation its parts already passed."""
    msg: LbmcMessage = _new_object(LbmcMessage)
    _set_field(msg, "type", mtype)
    _set_field(msg, "topic_index", tidx)
    _set_field(msg, "sqn", sqn)
    _set_field(msg, "headers", headers)
    _set_field(msg, "payload", payload)
    _set_field(msg, "properties", props)
    return msg


def _decode_at(view: memoryview, offset: int) -> tuple[LbmcMessage, int]:
    size = len(view)
    if offset < 0 or offset + CONTROL_HEADER_LEN > size:
        raise WireError("truncated LBMC message header", offset=offset)
    ver_type, first, msglen = _CTL_HDR.unpack_from(view, offset)
    mtype = _MESSAGE_TYPES.get(ver_type)  # version nibble 0 and a known type
    if mtype is None:
        if ver_type >> 4 != LBMC_VERSION:
            raise WireError(f"LBMC version {ver_type >> 4} (only 0 exists)", offset=offset)
        raise WireError(f"invalid LBMC type {ver_type & 0x0F:#04x}", offset=offset)
    is_data = ver_type in _DATA_TYPE_VALUES
    hdr_len = DATA_HEADER_LEN if is_data else CONTROL_HEADER_LEN
    if msglen < hdr_len:
        raise WireError(f"LBMC msglen {msglen} is shorter than its {hdr_len}-byte header", offset=offset)
    end = offset + msglen
    if end > size:
        raise WireError(f"LBMC message of {msglen} bytes truncated to {size - offset}", offset=offset)
    if is_data:
        tidx, sqn = _U32X2.unpack_from(view, offset + CONTROL_HEADER_LEN)
        if first == _NHDR_DATA:  # the common case: no extension headers
            return _trusted_message(mtype, tidx, sqn, (), view[offset + hdr_len : end], None), end
    headers, pos, last = _decode_chain(view, offset + hdr_len, end, first)
    if is_data:
        if last != _NHDR_DATA:
            raise WireError("data message header chain does not end with DATA (0x00)", offset=pos)
        hdrs, payload, props = _split_properties(headers, view[pos:end])
        return _trusted_message(mtype, tidx, sqn, hdrs, payload, props), end
    if last != _NHDR_NONE:
        raise WireError("control message header chain does not end with NONE (0xFF)", offset=pos)
    if pos != end:
        raise WireError(f"{end - pos} bytes after a control message's headers", offset=pos)
    return _trusted_message(mtype, 0, 0, tuple(headers), view[end:end], None), end


def decode_message_at(buf: Buffer, offset: int = 0) -> tuple[LbmcMessage, int]:
    """Decode the message at ``offset``; return it and the offset of the next message."""
    return _decode_at(as_view(buf), offset)


def decode_message(buf: Buffer) -> LbmcMessage:
    """Decode a buffer holding exactly one LBMC message."""
    view = as_view(buf)
    msg, end = _decode_at(view, 0)
    if end != len(view):
        raise WireError(f"{len(view) - end} bytes after the LBMC message", offset=end)
    return msg


def decode_messages(buf: Buffer) -> list[LbmcMessage]:
    """Decode every message of a datagram or segment holding LBMC messages back to back (§1)."""
    view = as_view(buf)
    out: list[LbmcMessage] = []
    pos = 0
    size = len(view)
    while pos < size:
        msg, pos = _decode_at(view, pos)
        out.append(msg)
    return out


def split_messages(buf: Buffer) -> list[memoryview]:
    """Split a datagram into its messages (zero-copy views) by ``msglen``, without decoding them."""
    view = as_view(buf)
    out: list[memoryview] = []
    pos = 0
    size = len(view)
    while pos < size:
        if pos + CONTROL_HEADER_LEN > size:
            raise WireError("truncated LBMC message header", offset=pos)
        msglen = _U16.unpack_from(view, pos + 2)[0]
        if msglen < CONTROL_HEADER_LEN or pos + msglen > size:
            raise WireError(f"LBMC msglen {msglen} is impossible here", offset=pos)
        out.append(view[pos : pos + msglen])
        pos += msglen
    return out
