"""Shared pieces of the wire codecs: the one error type and small, strict readers.

Every decoder in :mod:`openum.wire` raises :class:`WireError` and nothing else for malformed input
(PRACTICES.md 6): truncated buffers, lengths that point past the end, zero lengths that would loop,
unknown mandatory types.  Callers count and drop.
"""

from __future__ import annotations

import ipaddress
import struct
from typing import Final

from openum._errors import LBM_EINVAL, OpenUMError

__all__ = [
    "Buffer",
    "WireError",
    "as_view",
    "encode_cstring",
    "ip_from_bytes",
    "ip_from_int",
    "ip_to_bytes",
    "ip_to_int",
    "need",
    "read_cstring",
]

#: Anything a decoder accepts: ``bytes``, ``bytearray`` or a ``memoryview`` of bytes.
Buffer = bytes | bytearray | memoryview


class WireError(OpenUMError, ValueError):
    """A datagram, stream chunk or record is malformed or cannot be encoded.

    ``offset`` is where in the decoded buffer the problem was found (``None`` for encode errors).
    """

    errnum = LBM_EINVAL

    def __init__(self, message: str, *, offset: int | None = None) -> None:
        self.offset = offset
        super().__init__(message if offset is None else f"{message} (at offset {offset})")


def as_view(buf: Buffer) -> memoryview:
    """A byte ``memoryview`` over ``buf`` (zero-copy), format ``B``."""
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    if view.format != "B" or view.ndim != 1:
        try:
            view = view.cast("B")
        except TypeError as exc:  # not C-contiguous
            raise WireError("buffer is not a contiguous byte buffer") from exc
    return view


def need(buf: Buffer, offset: int, size: int, what: str) -> None:
    """Raise :class:`WireError` unless ``size`` bytes of ``what`` are available at ``offset``."""
    if size < 0 or offset < 0 or offset + size > len(buf):
        raise WireError(
            f"truncated {what}: need {size} bytes, {max(0, len(buf) - offset)} available", offset=offset
        )


_IP: Final = struct.Struct(">I")


def ip_to_bytes(addr: str) -> bytes:
    """``"127.0.0.1"`` -> 4 bytes in network order; :class:`WireError` when not an IPv4 address."""
    try:
        return ipaddress.IPv4Address(addr).packed
    except (ipaddress.AddressValueError, ValueError) as exc:
        raise WireError(f"not an IPv4 address: {addr!r}") from exc


def ip_from_bytes(raw: Buffer) -> str:
    """4 bytes in network order -> dotted quad."""
    if len(raw) != 4:
        raise WireError(f"an IPv4 address needs 4 bytes, got {len(raw)}")
    return f"{raw[0]}.{raw[1]}.{raw[2]}.{raw[3]}"


def ip_to_int(addr: str) -> int:
    """Dotted quad -> 32-bit integer (network order value)."""
    value: int = _IP.unpack(ip_to_bytes(addr))[0]
    return value


def ip_from_int(value: int) -> str:
    """32-bit integer -> dotted quad."""
    if not 0 <= value <= 0xFFFFFFFF:
        raise WireError(f"not a 32-bit IPv4 address value: {value}")
    return ip_from_bytes(_IP.pack(value))


def read_cstring(buf: Buffer, offset: int, what: str, *, limit: int | None = None) -> tuple[str, int]:
    """Read a NUL-terminated string at ``offset``; return ``(text, offset after the NUL)``.

    ``limit`` bounds the search (exclusive end offset).  Bytes are decoded as UTF-8 with
    ``surrogateescape`` so that any byte sequence round-trips through :func:`encode_cstring`.
    """
    end = len(buf) if limit is None else min(limit, len(buf))
    view = as_view(buf)
    raw = bytes(view[offset:end]) if offset < end else b""
    nul = raw.find(b"\x00")
    if nul < 0:
        raise WireError(f"{what} is not NUL-terminated", offset=offset)
    return raw[:nul].decode("utf-8", "surrogateescape"), offset + nul + 1


def encode_cstring(text: str, what: str, *, max_len: int | None = None) -> bytes:
    """Encode ``text`` plus a terminating NUL; refuse embedded NULs and over-long strings."""
    raw = text.encode("utf-8", "surrogateescape")
    if b"\x00" in raw:
        raise WireError(f"{what} contains a NUL byte: {text!r}")
    if max_len is not None and len(raw) > max_len:
        raise WireError(f"{what} is {len(raw)} bytes long; at most {max_len} are allowed")
    return raw + b"\x00"
