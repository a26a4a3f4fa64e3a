"""RSocket framing of the LBMSRS TCP stream; :mod:`openum.wire.srs` re-exports its public names.

Implements ``../shared/wire/lbmc-pdm-srs.md`` section 4.1 as tshark 4.0 decodes it: a frame is a
``u24`` length (the bytes after it), a ``u32`` stream id, a 16-bit word of 6-bit frame type and
10 flag bits, the type-specific fields, optional ``u24``-prefixed metadata, then data.  The SRS
records (4.2-4.6) travel in that data and live in :mod:`openum.wire.srs`.

tshark 4.0 dissects frame types 1 and 3-11; every other type is kept as an :class:`OpaqueFrame`.
:class:`FrameDecoder` splits a TCP byte stream into frames.  Decoders raise
:class:`~openum.wire._common.WireError` and nothing else (PRACTICES.md 6).

Also home of the bounds-checked :class:`Reader` and the integer/bytes checks that the SRS records
share with the frames.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Final, TypeAlias

from openum.wire._common import Buffer, WireError, as_view, need

__all__ = [
    "FRAME_FLAG_COMPLETE",
    "FRAME_FLAG_FOLLOWS",
    "FRAME_FLAG_IGNORE",
    "FRAME_FLAG_LEASE",
    "FRAME_FLAG_METADATA",
    "FRAME_FLAG_NEXT",
    "FRAME_FLAG_RESPOND",
    "FRAME_FLAG_RESUME",
    "MAX_FRAME_LEN",
    "U8_MAX",
    "U16_MAX",
    "U32S",
    "U32_MAX",
    "U64_MAX",
    "CancelFrame",
    "ErrorCode",
    "ErrorFrame",
    "Frame",
    "FrameDecoder",
    "FrameType",
    "KeepaliveFrame",
    "OpaqueFrame",
    "PayloadFrame",
    "Reader",
    "RequestChannelFrame",
    "RequestFnfFrame",
    "RequestNFrame",
    "RequestResponseFrame",
    "RequestStreamFrame",
    "SetupFrame",
    "check_blob",
    "check_int",
    "check_u16",
    "check_u32",
    "decode",
    "decode_frames",
    "encode",
]

MAX_FRAME_LEN: Final = 0xFF_FFFF  # the u24 frame length (bytes after the length field)

# Flag bits of the 16-bit type/flags word (4.1).  The per-type bits share values.
FRAME_FLAG_IGNORE: Final = 0x0200
FRAME_FLAG_METADATA: Final = 0x0100
FRAME_FLAG_FOLLOWS: Final = 0x0080
FRAME_FLAG_RESUME: Final = 0x0080  # SETUP
FRAME_FLAG_RESPOND: Final = 0x0080  # KEEPALIVE
FRAME_FLAG_COMPLETE: Final = 0x0040
FRAME_FLAG_LEASE: Final = 0x0040  # SETUP
FRAME_FLAG_NEXT: Final = 0x0020

U8_MAX: Final = 0xFF
U16_MAX: Final = 0xFFFF
U32_MAX: Final = 0xFFFF_FFFF
U64_MAX: Final = 0xFFFF_FFFF_FFFF_FFFF
U32S: Final = struct.Struct(">I")

_STREAM_ID_MAX: Final = 0x7FFF_FFFF  # RSocket stream ids are 31 bits
_LENGTH_LEN: Final = 3  # the u24 frame length
_FRAME_HEAD: Final = struct.Struct(">IH")  # stream id, type<<10 | flags
_SETUP: Final = struct.Struct(">HHII")  # major, minor, keepalive interval, max lifetime
_U64S: Final = struct.Struct(">Q")


class FrameType(IntEnum):
    """RSocket frame types (4.1)."""

    SETUP = 1
    LEASE = 2
    KEEPALIVE = 3
    REQUEST_RESPONSE = 4
    REQUEST_FNF = 5
    REQUEST_STREAM = 6
    REQUEST_CHANNEL = 7
    REQUEST_N = 8
    CANCEL = 9
    PAYLOAD = 10
    ERROR = 11
    METADATA_PUSH = 12
    RESUME = 13
    RESUME_OK = 14
    EXT = 63


class ErrorCode(IntEnum):
    """RSocket ERROR frame codes (4.1)."""

    INVALID_SETUP = 0x001
    UNSUPPORTED_SETUP = 0x002
    REJECTED_SETUP = 0x003
    REJECTED_RESUME = 0x004
    CONNECTION_ERROR = 0x101
    CONNECTION_CLOSE = 0x102
    APPLICATION_ERROR = 0x201
    REJECTED = 0x202
    CANCELED = 0x203
    INVALID = 0x204


# --- checks and reader (shared with the SRS records) ---------------------------------------------


def check_int(what: str, value: object, low: int, high: int) -> None:
    if not isinstance(value, int) or not low <= value <= high:
        raise WireError(f"{what} must be an integer in [{low}, {high}], got {value!r}")


def check_u16(what: str, value: object) -> None:
    check_int(what, value, 0, U16_MAX)


def check_u32(what: str, value: object) -> None:
    check_int(what, value, 0, U32_MAX)


def check_blob(what: str, value: object, size: int | None = None) -> None:
    if not isinstance(value, bytes):
        raise WireError(f"{what} must be bytes, got {type(value).__name__}")
    if size is not None and len(value) != size:
        raise WireError(f"{what} must be {size} bytes, got {len(value)}")


class Reader:
    """A bounds-checked cursor over one frame body or SRS payload."""

    __slots__ = ("pos", "view")

    def __init__(self, view: memoryview, pos: int = 0) -> None:
        self.view = view
        self.pos = pos

    def take(self, size: int, what: str) -> memoryview:
        need(self.view, self.pos, size, what)
        out = self.view[self.pos : self.pos + size]
        self.pos += size
        return out

    def unpack(self, st: struct.Struct, what: str) -> tuple[Any, ...]:
        return st.unpack(self.take(st.size, what))

    def rest(self) -> bytes:
        """Everything after the cursor (a frame's data)."""
        return bytes(self.view[self.pos :])


def _stream_id(value: object) -> None:
    check_int("stream_id", value, 0, _STREAM_ID_MAX)


def _metadata(value: object) -> None:
    if value is None:
        return
    if not isinstance(value, bytes) or len(value) > MAX_FRAME_LEN:
        raise WireError(f"metadata must be bytes shorter than 16 MiB, got {type(value).__name__}")


def _data(data: object, metadata: object) -> None:
    check_blob("data", data)
    _metadata(metadata)


def _u24(buf: Buffer, pos: int) -> int:
    return int.from_bytes(buf[pos : pos + _LENGTH_LEN], "big")


# --- frame records --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SetupFrame:
    """SETUP (type 1, stream 0): protocol version, keepalive interval and lifetime (ms), MIME types.

    The defaults are those of the verified session (section 6.1), not values UM is known to use.
    """

    keepalive_interval: int = 5000
    max_lifetime: int = 30000
    metadata_mime: str = "application/octet-stream"
    data_mime: str = "application/octet-stream"
    major: int = 1
    minor: int = 0
    lease: bool = False
    resume_token: bytes | None = None
    metadata: bytes | None = None
    data: bytes = b""

    def __post_init__(self) -> None:
        check_u32("keepalive_interval", self.keepalive_interval)
        check_u32("max_lifetime", self.max_lifetime)
        for what, mime in (("metadata_mime", self.metadata_mime), ("data_mime", self.data_mime)):
            if not isinstance(mime, str) or len(mime.encode("utf-8", "surrogateescape")) > U8_MAX:
                raise WireError(f"{what} must be a str of at most 255 bytes, got {mime!r}")
        check_u16("major", self.major)
        check_u16("minor", self.minor)
        if self.resume_token is not None:
            check_blob("resume_token", self.resume_token)
            if len(self.resume_token) > U16_MAX:
                raise WireError("resume token longer than a u16 length")
        _metadata(self.metadata)
        check_blob("data", self.data)


@dataclass(frozen=True, slots=True)
class KeepaliveFrame:
    """KEEPALIVE (type 3, stream 0)."""

    last_received_position: int = 0
    respond: bool = False
    data: bytes = b""

    def __post_init__(self) -> None:
        check_int("last_received_position", self.last_received_position, 0, U64_MAX)
        check_blob("data", self.data)


@dataclass(frozen=True, slots=True)
class _DataFrame:
    """The fields of a frame that carries data (4.1): stream, data, optional metadata, FOLLOWS."""

    stream_id: int
    data: bytes = b""
    metadata: bytes | None = None
    follows: bool = False

    def __post_init__(self) -> None:
        _stream_id(self.stream_id)
        _data(self.data, self.metadata)


@dataclass(frozen=True, slots=True)
class _CreditedFrame:
    """The fields of a request that opens a stream (4.1): a :class:`_DataFrame` plus credits."""

    stream_id: int
    initial_request_n: int
    data: bytes = b""
    metadata: bytes | None = None
    follows: bool = False

    def __post_init__(self) -> None:
        _stream_id(self.stream_id)
        check_u32("initial_request_n", self.initial_request_n)
        _data(self.data, self.metadata)


@dataclass(frozen=True, slots=True)
class RequestResponseFrame(_DataFrame):
    """REQUEST_RESPONSE (type 4): carries a registration request (4.1)."""


@dataclass(frozen=True, slots=True)
class RequestFnfFrame(_DataFrame):
    """REQUEST_FNF (type 5, fire and forget): carries records from a client."""


@dataclass(frozen=True, slots=True)
class RequestStreamFrame(_CreditedFrame):
    """REQUEST_STREAM (type 6): carries the stream request; ``initial_request_n`` credits."""


@dataclass(frozen=True, slots=True)
class RequestChannelFrame(_CreditedFrame):
    """REQUEST_CHANNEL (type 7)."""

    complete: bool = False


@dataclass(frozen=True, slots=True)
class RequestNFrame:
    """REQUEST_N (type 8): more credits for a stream."""

    stream_id: int
    request_n: int

    def __post_init__(self) -> None:
        _stream_id(self.stream_id)
        check_u32("request_n", self.request_n)


@dataclass(frozen=True, slots=True)
class CancelFrame:
    """CANCEL (type 9)."""

    stream_id: int

    def __post_init__(self) -> None:
        _stream_id(self.stream_id)


@dataclass(frozen=True, slots=True)
class PayloadFrame(_DataFrame):
    """PAYLOAD (type 10): the SRS pushes record batches on the client's stream with these."""

    complete: bool = False
    next: bool = True


@dataclass(frozen=True, slots=True)
class ErrorFrame:
    """ERROR (type 11): ``error_code`` (:class:`ErrorCode`) and an optional UTF-8 message.

    tshark tries to read any data as SRS records and flags text as an invalid message id, so a
    Wireshark-clean sender leaves ``data`` empty.
    """

    stream_id: int
    error_code: int
    data: bytes = b""

    def __post_init__(self) -> None:
        _stream_id(self.stream_id)
        check_u32("error_code", self.error_code)
        check_blob("data", self.data)


@dataclass(frozen=True, slots=True)
class OpaqueFrame:
    """Any other frame type (LEASE, METADATA_PUSH, RESUME, RESUME_OK, EXT, ...): kept as raw bytes.

    tshark 4.0 dissects none of them beyond the type, so their bodies are not interpreted here.
    """

    frame_type: int
    stream_id: int
    flags: int = 0  # the 10 flag bits
    body: bytes = b""  # everything after the 6-byte stream id + type/flags

    def __post_init__(self) -> None:
        check_int("frame_type", self.frame_type, 1, 63)
        if self.frame_type in _TYPED:
            raise WireError(f"frame type {self.frame_type} has its own record")
        check_int("stream_id", self.stream_id, 0, U32_MAX)
        check_int("flags", self.flags, 0, 0x3FF)
        check_blob("body", self.body)


Frame: TypeAlias = (
    SetupFrame
    | KeepaliveFrame
    | RequestResponseFrame
    | RequestFnfFrame
    | RequestStreamFrame
    | RequestChannelFrame
    | RequestNFrame
    | CancelFrame
    | PayloadFrame
    | ErrorFrame
    | OpaqueFrame
)

_TYPED: Final = frozenset({1, 3, 4, 5, 6, 7, 8, 9, 10, 11})


# --- encode ---------------------------------------------------------------------------------------


def _with_metadata(metadata: bytes | None, data: bytes) -> bytes:
    if metadata is None:
        return data
    return len(metadata).to_bytes(_LENGTH_LEN, "big") + metadata + data


def _metadata_flag(metadata: bytes | None) -> int:
    return FRAME_FLAG_METADATA if metadata is not None else 0


def _frame_parts(frame: Frame) -> tuple[int, int, int, bytes]:
    """(frame type, stream id, flags, body after the type/flags word)."""
    if isinstance(frame, SetupFrame):
        flags = _metadata_flag(frame.metadata) | (FRAME_FLAG_LEASE if frame.lease else 0)
        body = _SETUP.pack(frame.major, frame.minor, frame.keepalive_interval, frame.max_lifetime)
        if frame.resume_token is not None:
            flags |= FRAME_FLAG_RESUME
            body += len(frame.resume_token).to_bytes(2, "big") + frame.resume_token
        for mime in (frame.metadata_mime, frame.data_mime):
            raw = mime.encode("utf-8", "surrogateescape")
            body += bytes((len(raw),)) + raw
        return FrameType.SETUP, 0, flags, body + _with_metadata(frame.metadata, frame.data)
    if isinstance(frame, KeepaliveFrame):
        flags = FRAME_FLAG_RESPOND if frame.respond else 0
        return FrameType.KEEPALIVE, 0, flags, _U64S.pack(frame.last_received_position) + frame.data
    if isinstance(frame, _DataFrame | _CreditedFrame):
        flags = _metadata_flag(frame.metadata) | (FRAME_FLAG_FOLLOWS if frame.follows else 0)
        body = _with_metadata(frame.metadata, frame.data)
        if isinstance(frame, RequestResponseFrame):
            return FrameType.REQUEST_RESPONSE, frame.stream_id, flags, body
        if isinstance(frame, RequestFnfFrame):
            return FrameType.REQUEST_FNF, frame.stream_id, flags, body
        if isinstance(frame, PayloadFrame):
            flags |= (FRAME_FLAG_COMPLETE if frame.complete else 0) | (FRAME_FLAG_NEXT if frame.next else 0)
            return FrameType.PAYLOAD, frame.stream_id, flags, body
        body = U32S.pack(frame.initial_request_n) + body
        if isinstance(frame, RequestChannelFrame):
            flags |= FRAME_FLAG_COMPLETE if frame.complete else 0
            return FrameType.REQUEST_CHANNEL, frame.stream_id, flags, body
        if isinstance(frame, RequestStreamFrame):
            return FrameType.REQUEST_STREAM, frame.stream_id, flags, body
    if isinstance(frame, RequestNFrame):
        return FrameType.REQUEST_N, frame.stream_id, 0, U32S.pack(frame.request_n)
    if isinstance(frame, CancelFrame):
        return FrameType.CANCEL, frame.stream_id, 0, b""
    if isinstance(frame, ErrorFrame):
        return FrameType.ERROR, frame.stream_id, 0, U32S.pack(frame.error_code) + frame.data
    if isinstance(frame, OpaqueFrame):
        return frame.frame_type, frame.stream_id, frame.flags, frame.body
    raise WireError(f"not an RSocket frame: {frame!r}")


def encode(frame: Frame) -> bytes:
    """One RSocket frame with its 3-byte length prefix, ready for the TCP stream (4.1)."""
    ftype, stream_id, flags, body = _frame_parts(frame)
    length = _FRAME_HEAD.size + len(body)
    if length > MAX_FRAME_LEN:
        raise WireError(f"RSocket frame of {length} bytes exceeds the u24 length")
    return length.to_bytes(_LENGTH_LEN, "big") + _FRAME_HEAD.pack(stream_id, (ftype << 10) | flags) + body


# --- decode ---------------------------------------------------------------------------------------


def _split_metadata(rd: Reader, flags: int, what: str) -> tuple[bytes | None, bytes]:
    metadata = None
    if flags & FRAME_FLAG_METADATA:
        length = _u24(rd.take(_LENGTH_LEN, f"{what} metadata length"), 0)
        metadata = bytes(rd.take(length, f"{what} metadata"))
    return metadata, rd.rest()


def _no_metadata(flags: int, what: str) -> None:
    if flags & FRAME_FLAG_METADATA:
        raise WireError(f"{what} frames carry no metadata")


def _decode_setup(rd: Reader, flags: int) -> SetupFrame:
    major, minor, keepalive, lifetime = rd.unpack(_SETUP, "SETUP")
    token = None
    if flags & FRAME_FLAG_RESUME:
        token_len = int.from_bytes(rd.take(2, "SETUP resume token length"), "big")
        token = bytes(rd.take(token_len, "SETUP resume token"))
    mimes = []
    for what in ("SETUP metadata MIME type", "SETUP data MIME type"):
        raw = bytes(rd.take(rd.take(1, what)[0], what))
        mimes.append(raw.decode("utf-8", "surrogateescape"))
    metadata, data = _split_metadata(rd, flags, "SETUP")
    lease = bool(flags & FRAME_FLAG_LEASE)
    return SetupFrame(keepalive, lifetime, mimes[0], mimes[1], major, minor, lease, token, metadata, data)


def _decode_body(view: memoryview) -> Frame:
    """Decode a frame body (the bytes after the u24 length)."""
    need(view, 0, _FRAME_HEAD.size, "RSocket frame header")
    stream_id, word = _FRAME_HEAD.unpack_from(view, 0)
    ftype, flags = word >> 10, word & 0x3FF
    rd = Reader(view, _FRAME_HEAD.size)
    if ftype in (FrameType.SETUP, FrameType.KEEPALIVE) and stream_id:
        raise WireError(f"frame type {ftype} must use stream 0, got {stream_id}")
    if ftype == FrameType.SETUP:
        return _decode_setup(rd, flags)
    if ftype == FrameType.KEEPALIVE:
        _no_metadata(flags, "KEEPALIVE")
        (position,) = rd.unpack(_U64S, "KEEPALIVE position")
        return KeepaliveFrame(position, bool(flags & FRAME_FLAG_RESPOND), rd.rest())
    follows = bool(flags & FRAME_FLAG_FOLLOWS)
    complete = bool(flags & FRAME_FLAG_COMPLETE)
    if ftype in (FrameType.REQUEST_RESPONSE, FrameType.REQUEST_FNF):
        metadata, data = _split_metadata(rd, flags, "request")
        kind = RequestResponseFrame if ftype == FrameType.REQUEST_RESPONSE else RequestFnfFrame
        return kind(stream_id, data, metadata, follows)
    if ftype in (FrameType.REQUEST_STREAM, FrameType.REQUEST_CHANNEL):
        (request_n,) = rd.unpack(U32S, "initial request_n")
        metadata, data = _split_metadata(rd, flags, "request")
        if ftype == FrameType.REQUEST_STREAM:
            return RequestStreamFrame(stream_id, request_n, data, metadata, follows)
        return RequestChannelFrame(stream_id, request_n, data, metadata, follows, complete)
    if ftype == FrameType.PAYLOAD:
        metadata, data = _split_metadata(rd, flags, "PAYLOAD")
        return PayloadFrame(stream_id, data, metadata, follows, complete, bool(flags & FRAME_FLAG_NEXT))
    if ftype in (FrameType.REQUEST_N, FrameType.CANCEL, FrameType.ERROR):
        name = FrameType(ftype).name
        _no_metadata(flags, name)
        if ftype == FrameType.CANCEL:
            frame: Frame = CancelFrame(stream_id)
        else:
            (number,) = rd.unpack(U32S, name)
            if ftype == FrameType.ERROR:
                return ErrorFrame(stream_id, number, rd.rest())
            frame = RequestNFrame(stream_id, number)
        if rd.pos != len(view):
            raise WireError(f"{len(view) - rd.pos} bytes after a {name} frame")
        return frame
    if ftype == 0:
        raise WireError("RSocket frame type 0 is reserved")
    return OpaqueFrame(ftype, stream_id, flags, rd.rest())


def decode(buf: Buffer) -> Frame:
    """Decode exactly one RSocket frame, its 3-byte length prefix included."""
    view = as_view(buf)
    need(view, 0, _LENGTH_LEN, "RSocket frame length")
    length = _u24(view, 0)
    if length != len(view) - _LENGTH_LEN:
        raise WireError(f"RSocket frame length {length} but {len(view) - _LENGTH_LEN} bytes follow", offset=0)
    return _decode_body(view[_LENGTH_LEN:])


def decode_frames(buf: Buffer) -> tuple[Frame, ...]:
    """Decode a buffer of whole frames back to back (e.g. one captured TCP segment)."""
    view = as_view(buf)
    frames = []
    pos = 0
    while pos < len(view):
        need(view, pos, _LENGTH_LEN, "RSocket frame length")
        start, end = pos + _LENGTH_LEN, pos + _LENGTH_LEN + _u24(view, pos)
        need(view, start, end - start, "RSocket frame")
        frames.append(_decode_body(view[start:end]))
        pos = end
    return tuple(frames)


class FrameDecoder:
    """Splits an SRS TCP byte stream into RSocket frames (sans I/O).

    Feed whatever ``recv`` returned; :meth:`feed` returns the frames completed so far and keeps a
    partial frame for the next call.  A malformed frame raises :class:`WireError`, after the good
    frames before it have been returned; once that happens the stream has lost its framing and every
    later call raises too (close the connection).
    """

    __slots__ = ("_buf", "_error")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._error: WireError | None = None

    @property
    def buffered(self) -> int:
        """Bytes held back waiting for the rest of a frame."""
        return len(self._buf)

    def feed(self, chunk: Buffer = b"") -> list[Frame]:
        if self._error is not None:
            raise WireError(f"SRS stream already failed: {self._error}")
        self._buf += chunk
        frames: list[Frame] = []
        pos = 0
        buf = self._buf
        try:
            while len(buf) - pos >= _LENGTH_LEN:
                length = _u24(buf, pos)
                if length < _FRAME_HEAD.size:
                    raise WireError(f"RSocket frame length {length} is shorter than its header")
                start, end = pos + _LENGTH_LEN, pos + _LENGTH_LEN + length
                if len(buf) < end:
                    break
                body = bytes(buf[start:end])  # a copy: buf is resized below
                try:
                    frames.append(_decode_body(memoryview(body)))
                except WireError:
                    if frames:  # hand over the good frames first; the bad one raises next time
                        break
                    raise
                pos = end
        except WireError as exc:
            self._error = exc
            self._buf.clear()
            raise
        del buf[:pos]
        return frames
