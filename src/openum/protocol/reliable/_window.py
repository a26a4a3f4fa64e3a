"""The source's transmission window: sent datagrams kept for retransmission (seed 6.3, 17.2).

``transport_*_transmission_window_size`` bounds the payload bytes kept (default 24 MB);
``transport_*_transmission_window_limit``, when non-zero, also bounds payload *plus overhead* (the
transport header of each kept datagram).  The oldest datagrams are dropped first; the *trailing edge*
(``trail``) is the oldest sequence number still retransmittable and travels in every DATA, SM and NCF
so that receivers stop NAKing what is gone (``unrecovered_txw``).

Datagrams are kept whole, exactly as first sent, so that the original send costs no extra copy; a
retransmission is a copy with the RX flag and the current trailing edge patched in.

Sequence numbers here are absolute (unbounded ints counted from the session's first datagram);
:meth:`TransmissionWindow.lookup` maps a wire (u32) sequence number into the window.
"""

from __future__ import annotations

from collections import deque

from openum.protocol.reliable._common import sqn_diff

__all__ = ["TransmissionWindow"]


class TransmissionWindow:
    """Sent datagrams by absolute sequence number, oldest first, bounded by bytes."""

    __slots__ = ("_bytes", "_entries", "_header_len", "_limit", "_size", "_trail")

    def __init__(self, *, size_bytes: int, limit_bytes: int, header_len: int, first_sqn: int = 0) -> None:
        if size_bytes < 0 or limit_bytes < 0:
            raise ValueError("transmission window size and limit must be >= 0")
        self._size = size_bytes
        self._limit = limit_bytes
        self._header_len = header_len
        self._entries: deque[bytes] = deque()
        self._trail = first_sqn
        self._bytes = 0  # payload bytes held

    @property
    def trail(self) -> int:
        """The oldest sequence number held (== :attr:`next` when empty)."""
        return self._trail

    @property
    def next(self) -> int:
        """The sequence number the next appended datagram gets."""
        return self._trail + len(self._entries)

    @property
    def msgs(self) -> int:
        return len(self._entries)

    @property
    def payload_bytes(self) -> int:
        return self._bytes

    def _over(self, extra_payload: int, extra_entries: int) -> bool:
        payload = self._bytes + extra_payload
        if payload > self._size:
            return True
        if self._limit:
            overhead = (len(self._entries) + extra_entries) * self._header_len
            return payload + overhead > self._limit
        return False

    def make_room(self, payload_len: int) -> int:
        """Drop the oldest datagrams until one more of ``payload_len`` payload bytes fits; return the
        sequence number it will get (:attr:`next`).

        A datagram bigger than the whole window empties it; it is still kept after :meth:`append`
        (until the next call), so a window of 0 bytes retains only the newest datagram.
        """
        entries = self._entries
        if self._bytes + payload_len > self._size or self._limit:  # else it fits: the common case
            hdr = self._header_len
            while entries and self._over(payload_len, 1):
                self._bytes -= len(entries.popleft()) - hdr
                self._trail += 1
        return self._trail + len(entries)

    def append(self, datagram: bytes) -> int:
        """Keep ``datagram`` (call :meth:`make_room` first); return its sequence number."""
        sqn = self._trail + len(self._entries)
        self._entries.append(datagram)
        self._bytes += len(datagram) - self._header_len
        return sqn

    def get(self, sqn: int) -> bytes | None:
        """The datagram with absolute ``sqn``, or None when it is not (any longer) held."""
        i = sqn - self._trail
        if 0 <= i < len(self._entries):
            return self._entries[i]
        return None

    def lookup(self, wire_sqn: int) -> int | None:
        """The absolute sequence number of ``wire_sqn`` if the window holds it."""
        i = sqn_diff(wire_sqn, self._trail)
        if 0 <= i < len(self._entries):
            return self._trail + i
        return None

    def is_ahead(self, wire_sqn: int) -> bool:
        """``wire_sqn`` was never sent (at or beyond :attr:`next`)."""
        return sqn_diff(wire_sqn, self.next) >= 0
