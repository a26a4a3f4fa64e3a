"""The source's transmission window: sent datagrams kept for retransmission (seed 6.3, 17.2).

``transport_*_transmission_window_size`` bounds the payload bytes kept (default 24 MB);
``transport_*_transmission_window_limit``, when non-zero, also bounds payload *plus overhead* (the
transport header of each kept datagram).  The oldest datagrams are dropped first; the *trailing edge*
(``trail``) is the oldest sequence number still retransmittable and travels in every DATA, SM and NCF
so that receivers stop NAKing what is gone (``unrecovered_txw``).

Datagrams are copied into storage chunks (mapped memory of 64 KB to 1 MB), one after the other, not kept
as the objects sent.  A window that grows (the default 24 MB holds a quarter of a million 64-byte
messages) otherwise puts every datagram into memory the process never touched: a page fault on the send
path every 30-odd datagrams (in round trips across processes on a virtual machine, about 5 us each; the
median LBT-RU round trip was 0.8 us longer with the default window than with a 64 KB one, and the copies
brought 0.5 us of it back).  Chunks are mapped with their pages present (``MAP_POPULATE`` on Linux: one
system call per chunk instead of a fault per page) and reused as the window moves, and the datagram object
sent is freed after its send, so the next one reuses its memory.  The newest chunk is written in order
(one ``write`` per datagram, no slice objects), and the index is one ring of integers (each datagram's
stream position and length in one entry: one store per datagram), written when allocated and doubling
when full.  A retransmission is a copy with the RX flag and the current trailing edge patched in.

Sequence numbers here are absolute (unbounded ints counted from the session's first datagram);
:meth:`TransmissionWindow.lookup` maps a wire (u32) sequence number into the window.
"""

from __future__ import annotations

import mmap
from array import array
from collections import deque
from typing import Final

from openum.protocol.reliable._common import sqn_diff

__all__ = ["TransmissionWindow"]

#: Storage chunk sizes: a power of two between these, about a quarter of the window (the largest
#: datagram, 64 KB, always fits one chunk).
_MIN_CHUNK_SHIFT: Final = 16
_MAX_CHUNK_SHIFT: Final = 20
#: Chunks kept for reuse once the window no longer needs them.
_SPARE_CHUNKS: Final = 1
#: Index capacity (datagrams) to begin with: one per this many bytes of the window, within these bounds;
#: it doubles when full (a copy, rare).
_INDEX_BYTES_PER_ENTRY: Final = 256
_INDEX_MIN: Final = 1024
_INDEX_MAX: Final = 1 << 14
#: Mapping flags of a chunk whose pages are present at once (Linux), else 0: a plain buffer.
_POPULATE: Final = (
    mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE
    if hasattr(mmap, "MAP_POPULATE") and hasattr(mmap, "MAP_ANONYMOUS")
    else 0
)


def _chunk_shift(size_bytes: int) -> int:
    shift = _MIN_CHUNK_SHIFT
    while shift < _MAX_CHUNK_SHIFT and (1 << shift) < size_bytes // 4:
        shift += 1
    return shift


class _BufferChunk:
    """A chunk in a plain buffer where no mapping could be made: the part of ``mmap``'s interface the
    window uses (``write`` at the current position, ``seek``, slices as bytes)."""

    __slots__ = ("_buf", "_pos")

    def __init__(self, size: int) -> None:
        self._buf = bytearray(size)
        self._pos = 0

    def write(self, data: bytes | bytearray | memoryview) -> int:
        n = len(data)
        if self._pos + n > len(self._buf):
            raise ValueError("data out of range")
        self._buf[self._pos : self._pos + n] = data
        self._pos += n
        return n

    def seek(self, pos: int) -> None:
        self._pos = pos

    def __getitem__(self, where: slice) -> bytes:
        return bytes(self._buf[where])


_Chunk = mmap.mmap | _BufferChunk


def _new_chunk(size: int) -> _Chunk:
    if _POPULATE:
        try:
            return mmap.mmap(-1, size, flags=_POPULATE)
        except OSError:  # e.g. a memory limit on mappings: a plain buffer (its pages come on first use)
            pass
    return _BufferChunk(size)


#: An index entry: the datagram's stream position (modulo 2**42, far beyond any window's span) above its
#: length (a datagram fits one chunk: at most 1 MB).
_LEN_BITS: Final = 21
_LEN_MASK: Final = (1 << _LEN_BITS) - 1
_POS_MASK: Final = (1 << (63 - _LEN_BITS)) - 1


def _index(capacity: int) -> array[int]:
    """``capacity`` zeros, written now (so the pages are present before the send path needs them)."""
    return array("q", bytes(8 * capacity))


class TransmissionWindow:
    """Sent datagrams by absolute sequence number, oldest first, bounded by bytes.

    Datagram ``trail + i`` has index entry ``_index[(_head + i) & _mask]``: its position in an unbounded
    byte stream cut into chunks of ``1 << _shift`` bytes (modulo 2**42; :meth:`_position`) and its length.
    ``_chunks[0]`` holds stream chunk ``_first_chunk``; ``_tail`` is the newest chunk, written up to
    ``_write``, which ends at stream position ``_tail_end``.  A datagram never straddles two chunks (the
    rest of a chunk it does not fit is skipped).  Chunks before the oldest datagram's are released (one
    kept for reuse).  The index (a ring of a power-of-two capacity) doubles when full.
    """

    __slots__ = (
        "_bytes",
        "_chunks",
        "_count",
        "_first_chunk",
        "_head",
        "_header_len",
        "_index",
        "_limit",
        "_mask",
        "_shift",
        "_size",
        "_spare",
        "_tail",
        "_tail_end",
        "_trail",
        "_write",
    )

    def __init__(self, *, size_bytes: int, limit_bytes: int, header_len: int, first_sqn: int = 0) -> None:
        if size_bytes < 0 or limit_bytes < 0:
            raise ValueError("transmission window size and limit must be >= 0")
        self._size = size_bytes
        self._limit = limit_bytes
        self._header_len = header_len
        self._trail = first_sqn
        self._bytes = 0  # payload bytes held
        self._shift = _chunk_shift(size_bytes)
        capacity = _INDEX_MIN
        while capacity < _INDEX_MAX and capacity * _INDEX_BYTES_PER_ENTRY < size_bytes:
            capacity *= 2
        self._index = _index(capacity)  # (stream position << _LEN_BITS) | length of each datagram held
        self._mask = capacity - 1
        self._head = 0  # ring index of the oldest datagram held
        self._count = 0  # datagrams held
        self._chunks: deque[_Chunk] = deque()
        self._first_chunk = 0  # the stream chunk number of _chunks[0]
        self._spare: list[_Chunk] = []
        self._write = 0  # where the next datagram goes in the stream
        self._tail: _Chunk = _BufferChunk(0)  # the chunk written now (none yet: the first append takes one)
        self._tail_end = -1  # the stream position where _tail ends (-1: the first append takes a chunk)

    @property
    def trail(self) -> int:
        """The oldest sequence number held (== :attr:`next` when empty)."""
        return self._trail

    @property
    def next(self) -> int:
        """The sequence number the next appended datagram gets."""
        return self._trail + self._count

    @property
    def msgs(self) -> int:
        return self._count

    @property
    def payload_bytes(self) -> int:
        return self._bytes

    def _over(self, extra_payload: int, extra_entries: int) -> bool:
        payload = self._bytes + extra_payload
        if payload > self._size:
            return True
        if self._limit:
            overhead = (self._count + extra_entries) * self._header_len
            return payload + overhead > self._limit
        return False

    def make_room(self, payload_len: int) -> int:
        """Drop the oldest datagrams until one more of ``payload_len`` payload bytes fits; return the
        sequence number it will get (:attr:`next`).

        A datagram bigger than the whole window empties it; it is still kept after :meth:`append`
        (until the next call), so a window of 0 bytes retains only the newest datagram.
        """
        if self._bytes + payload_len > self._size or self._limit:  # else it fits: the common case
            index = self._index
            hdr = self._header_len
            mask = self._mask
            dropped = False
            while self._count and self._over(payload_len, 1):
                self._bytes -= (index[self._head] & _LEN_MASK) - hdr
                self._head = (self._head + 1) & mask
                self._count -= 1
                self._trail += 1
                dropped = True
            if dropped:
                self._release()
        return self._trail + self._count

    def _position(self, entry: int) -> int:
        """The stream position of the datagram whose index entry is ``entry``."""
        return self._write - ((self._write - (entry >> _LEN_BITS)) & _POS_MASK)

    def _release(self) -> None:
        """Let go of the chunks before the oldest datagram held."""
        oldest = self._position(self._index[self._head]) if self._count else self._write
        keep_from = oldest >> self._shift
        chunks = self._chunks
        while self._first_chunk < keep_from and chunks:
            chunk = chunks.popleft()
            self._first_chunk += 1
            if len(self._spare) < _SPARE_CHUNKS:
                self._spare.append(chunk)

    def _grow_index(self) -> None:
        """Double the full index ring, oldest first (array copies, not a loop per datagram)."""
        head = self._head
        index = self._index[head:] + self._index[:head]
        index.frombytes(bytes(8 * len(index)))
        self._index = index
        self._mask = len(index) - 1
        self._head = 0

    def _next_tail(self, pos: int) -> int:
        """Make the next chunk the one written (the rest of the current one is skipped); return the
        stream position where it begins."""
        size = 1 << self._shift
        pos = (pos + size - 1) & -size  # the next chunk boundary (pos itself if it is one)
        chunks = self._chunks
        if not chunks:
            self._first_chunk = pos >> self._shift
        index = (pos >> self._shift) - self._first_chunk
        while index >= len(chunks):
            chunks.append(self._spare.pop() if self._spare else _new_chunk(size))
        tail = chunks[index]
        tail.seek(0)
        self._tail = tail
        self._tail_end = pos + size
        return pos

    def append(self, datagram: bytes | bytearray | memoryview) -> int:
        """Keep a copy of ``datagram`` (call :meth:`make_room` first); return its sequence number."""
        n = len(datagram)
        pos = self._write
        if pos + n > self._tail_end:  # it does not fit the rest of this chunk: the next one
            pos = self._next_tail(pos)
        self._tail.write(datagram)
        count = self._count
        if count > self._mask:
            self._grow_index()
        self._index[(self._head + count) & self._mask] = ((pos & _POS_MASK) << _LEN_BITS) | n
        self._count = count + 1
        self._write = pos + n
        self._bytes += n - self._header_len
        return self._trail + count

    def get(self, sqn: int) -> bytes | None:
        """The datagram with absolute ``sqn`` (a copy), or None when it is not (any longer) held."""
        i = sqn - self._trail
        if 0 <= i < self._count:
            entry = self._index[(self._head + i) & self._mask]
            n = entry & _LEN_MASK
            if not n:
                return b""  # (its position may be the start of a chunk never taken)
            pos = self._position(entry)
            offset = pos & ((1 << self._shift) - 1)
            chunk = self._chunks[(pos >> self._shift) - self._first_chunk]
            return chunk[offset : offset + n]
        return None

    def lookup(self, wire_sqn: int) -> int | None:
        """The absolute sequence number of ``wire_sqn`` if the window holds it."""
        i = sqn_diff(wire_sqn, self._trail)
        if 0 <= i < self._count:
            return self._trail + i
        return None

    def is_ahead(self, wire_sqn: int) -> bool:
        """``wire_sqn`` was never sent (at or beyond :attr:`next`)."""
        return sqn_diff(wire_sqn, self.next) >= 0
