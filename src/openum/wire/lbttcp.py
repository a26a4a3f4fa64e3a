"""LBT-TCP stream framing: a TCP byte stream of whole LBMC messages, back to back.

Implements ``../shared/wire/lbtrm-lbtru-lbttcp-transports.md``:

* §5.1: LBT-TCP has no header of its own; each direction of the connection is a concatenation of
  LBMC messages framed by LBMC's own ``msglen`` (u16 at byte 2, counting the whole message), so a
  message is at most 65535 bytes and may straddle TCP segments, and a segment may hold many;
* §5.3: the session id travels in an LBMC control message with the TCP_SID header (0x6B);
* §1.5: SMPP's heuristic claims a stream that starts with a data message whose topic index looks
  like an SMPP command id, so every connection starts with the session-id control message
  (:class:`StreamEncoder` does this);
* §6.2: the LBMC header test (version 0, type in {0, 1, 2, 8, 0xA}, msglen not 0), which
  :class:`StreamDecoder` applies to every message start.

Pure: no sockets.  The transport layer feeds what ``recv`` returned and writes what the encoder
produced.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Final

from openum.wire._common import Buffer, WireError, as_view
from openum.wire.lbmc import (
    CONTROL_HEADER_LEN,
    DATA_HEADER_LEN,
    MAX_MESSAGE_LEN,
    LbmcMessage,
    encode_data_into,
    encode_message,
)

__all__ = [
    "REQUEST_TCP_PORT_HIGH",
    "REQUEST_TCP_PORT_LOW",
    "SESSION_ID_MESSAGE_LEN",
    "TRANSPORT_TCP_PORT_HIGH",
    "TRANSPORT_TCP_PORT_LOW",
    "StreamDecoder",
    "StreamEncoder",
    "encode_stream",
    "session_id_message",
]

#: UM's default ``transport_tcp_port_low/high`` and ``request_tcp_port_low/high`` (§5.2).
TRANSPORT_TCP_PORT_LOW: Final = 14371
TRANSPORT_TCP_PORT_HIGH: Final = 14390
REQUEST_TCP_PORT_LOW: Final = 14391
REQUEST_TCP_PORT_HIGH: Final = 14395

# ver/type, next_hdr=TCP_SID, msglen=12 | next=NONE, hdr_len=8, flags, session id (§5.3)
_SID_MESSAGE: Final = struct.Struct(">BBHBBHI")
SESSION_ID_MESSAGE_LEN: Final = _SID_MESSAGE.size
_FRAME_HEAD: Final = struct.Struct(">BxH")  # ver/type, (next_hdr), msglen
_DATA_TYPES: Final = frozenset({0x0, 0x2, 0xA})
_CONTROL_TYPES: Final = frozenset({0x1, 0x8})


def session_id_message(session_id: int) -> bytes:
    """The control message carrying the TCP session id: the first message of every connection."""
    if not isinstance(session_id, int) or not 0 <= session_id <= 0xFFFFFFFF:
        raise WireError(f"LBT-TCP session id must be a 32-bit unsigned integer, got {session_id!r}")
    return _SID_MESSAGE.pack(0x08, 0x6B, SESSION_ID_MESSAGE_LEN, 0xFF, 8, 0, session_id)


def _check_frame(ver_type: int, msglen: int, offset: int) -> None:
    """The dissector's per-message header test (§6.2), plus a msglen that covers the header."""
    mtype = ver_type & 0x0F
    if ver_type >> 4:
        raise WireError(f"LBMC version {ver_type >> 4} in the TCP stream", offset=offset)
    if mtype in _DATA_TYPES:
        minimum = DATA_HEADER_LEN
    elif mtype in _CONTROL_TYPES:
        minimum = CONTROL_HEADER_LEN
    else:
        raise WireError(f"invalid LBMC type {mtype:#x} in the TCP stream", offset=offset)
    if msglen < minimum:
        raise WireError(f"impossible LBMC msglen {msglen} in the TCP stream", offset=offset)


class StreamDecoder:
    """Splits one direction of an LBT-TCP connection into LBMC messages.

    :meth:`feed` takes whatever ``recv`` returned (any chunking: a message split over reads, one byte
    at a time, many messages per read) and returns the messages it completed, as ``memoryview``
    slices.  Whole messages found inside the fed chunk are zero-copy views of it, valid while the
    caller leaves that buffer alone; a message that straddled reads is copied once into a fresh
    buffer that the view then owns.  At most one partial message (under 64 KiB) is ever buffered.

    The stream cannot be resynchronised after garbage, so a bad header raises
    :class:`~openum.wire._common.WireError` and every later :meth:`feed` raises it again.
    """

    __slots__ = ("_failure", "_fed", "_need", "_pending")

    def __init__(self) -> None:
        self._pending = bytearray()
        self._need = 0  # total length of the pending message once its 4-byte head is known
        self._fed = 0  # bytes fed before the current call: stream offsets for error messages
        self._failure: WireError | None = None

    @property
    def buffered(self) -> int:
        """Bytes of an incomplete message held back (always < 65536)."""
        return len(self._pending)

    def _fail(self, exc: WireError) -> WireError:
        self._failure = exc
        self._pending = bytearray()
        return exc

    def feed(self, data: Buffer) -> list[memoryview]:
        """Consume ``data``; return the LBMC messages completed by it, in stream order."""
        if self._failure is not None:
            raise WireError(f"LBT-TCP stream already failed: {self._failure}")
        view = as_view(data)
        size = len(view)
        out: list[memoryview] = []
        pos = 0
        if self._pending:
            pos = self._fill(view, out)
            if self._pending:  # still incomplete: everything was consumed
                self._fed += size
                return out
        unpack = _FRAME_HEAD.unpack_from
        while pos + CONTROL_HEADER_LEN <= size:
            ver_type, msglen = unpack(view, pos)
            if ver_type & 0xF0 or ver_type not in (0x00, 0x08) or msglen < DATA_HEADER_LEN:
                try:  # the common cases (data, control >= 12 bytes) skip the full test
                    _check_frame(ver_type, msglen, self._fed + pos)
                except WireError as exc:
                    raise self._fail(exc) from None
            end = pos + msglen
            if end > size:
                break
            out.append(view[pos:end])
            pos = end
        if pos < size:
            self._pending = bytearray(view[pos:])
            self._need = 0
            if len(self._pending) >= CONTROL_HEADER_LEN:
                self._need = _FRAME_HEAD.unpack_from(self._pending, 0)[1]
        self._fed += size
        return out

    def _fill(self, view: memoryview, out: list[memoryview]) -> int:
        """Complete the pending message from ``view``; return how many bytes of ``view`` were used."""
        pending = self._pending
        pos = 0
        size = len(view)
        if len(pending) < CONTROL_HEADER_LEN:
            take = min(CONTROL_HEADER_LEN - len(pending), size)
            pending += view[:take]
            pos = take
            if len(pending) < CONTROL_HEADER_LEN:
                return pos
            ver_type, msglen = _FRAME_HEAD.unpack_from(pending, 0)
            try:
                _check_frame(ver_type, msglen, self._fed - len(pending) + take)
            except WireError as exc:
                raise self._fail(exc) from None
            self._need = msglen
        take = min(self._need - len(pending), size - pos)
        pending += view[pos : pos + take]
        pos += take
        if len(pending) == self._need:
            # A fresh bytearray each time: the caller's view keeps this one alive and unresized.
            out.append(memoryview(pending).toreadonly())
            self._pending = bytearray()
            self._need = 0
        return pos

    def close(self) -> None:
        """The connection ended: raise WireError if it stopped inside a message."""
        if self._pending:
            raise self._fail(WireError(f"LBT-TCP stream ended inside a message ({len(self._pending)} bytes)"))


class StreamEncoder:
    """Encodes one direction of an LBT-TCP connection.

    The first bytes it produces are the session-id control message (§5.3, §1.5); after that, LBMC
    messages as they are.  Use one encoder per connection.
    """

    __slots__ = ("_started", "session_id")

    def __init__(self, session_id: int) -> None:
        self._started = False
        session_id_message(session_id)  # validates
        self.session_id = session_id

    @property
    def started(self) -> bool:
        """Whether the session-id message has been produced."""
        return self._started

    def opening(self) -> bytes:
        """The session-id message, once; ``b""`` when it was already produced."""
        if self._started:
            return b""
        self._started = True
        return session_id_message(self.session_id)

    def encode(self, *messages: LbmcMessage | Buffer) -> bytes:
        """The stream bytes for ``messages`` (records, or already-encoded LBMC messages)."""
        parts: list[Buffer] = [self.opening()]
        for msg in messages:
            parts.append(encode_message(msg) if isinstance(msg, LbmcMessage) else msg)
        return b"".join(parts)

    def encode_data_into(
        self, buf: bytearray | memoryview, offset: int, topic_index: int, sqn: int, payload: Buffer
    ) -> int:
        """Hot path: a plain data message into ``buf`` (after the session-id message the first time)."""
        if not self._started:
            end = offset + SESSION_ID_MESSAGE_LEN
            if offset < 0 or end > len(buf):
                raise WireError("buffer too small for the session-id message")
            buf[offset:end] = self.opening()
            offset = end
        return encode_data_into(buf, offset, topic_index, sqn, payload)


def encode_stream(messages: Iterable[LbmcMessage | Buffer], *, session_id: int | None = None) -> bytes:
    """A whole stream: the session-id message (when ``session_id`` is given), then ``messages``."""
    parts: list[Buffer] = [] if session_id is None else [session_id_message(session_id)]
    for msg in messages:
        raw = encode_message(msg) if isinstance(msg, LbmcMessage) else msg
        if len(raw) > MAX_MESSAGE_LEN:
            raise WireError(f"LBMC message of {len(raw)} bytes cannot be framed on LBT-TCP")
        parts.append(raw)
    return b"".join(parts)
