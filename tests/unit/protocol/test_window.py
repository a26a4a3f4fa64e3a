"""TransmissionWindow: datagrams copied into storage chunks behave as the datagrams themselves kept in a deque
(the model below, the window before its storage), whatever the sizes, limits and sequence of sends."""

from __future__ import annotations

from collections import deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openum._accel import COMPILED
from openum.protocol.reliable import _window
from openum.protocol.reliable._window import TransmissionWindow


class Model:
    """The window as it was: the datagram objects in a deque."""

    def __init__(self, size: int, limit: int, header_len: int, first_sqn: int) -> None:
        self.size, self.limit, self.hdr = size, limit, header_len
        self.entries: deque[bytes] = deque()
        self.trail = first_sqn
        self.bytes = 0

    def over(self, extra_payload: int) -> bool:
        payload = self.bytes + extra_payload
        if payload > self.size:
            return True
        return bool(self.limit) and payload + (len(self.entries) + 1) * self.hdr > self.limit

    def make_room(self, payload_len: int) -> int:
        while self.entries and self.over(payload_len):
            self.bytes -= len(self.entries.popleft()) - self.hdr
            self.trail += 1
        return self.trail + len(self.entries)

    def append(self, datagram: bytes) -> None:
        self.entries.append(datagram)
        self.bytes += len(datagram) - self.hdr


def _datagram(sqn: int, length: int) -> bytes:
    return (sqn.to_bytes(8, "big") * (length // 8 + 1))[:length]


def _check(window: TransmissionWindow, model: Model) -> None:
    assert window.trail == model.trail
    assert window.next == model.trail + len(model.entries)
    assert window.msgs == len(model.entries)
    assert window.payload_bytes == model.bytes
    for i, datagram in enumerate(model.entries):
        assert window.get(model.trail + i) == datagram
    assert window.get(model.trail - 1) is None
    assert window.get(window.next) is None


@settings(max_examples=150, deadline=None)
@given(
    size=st.sampled_from([0, 100, 5_000, 70_000, 300_000, 1 << 22]),
    limit=st.sampled_from([0, 0, 2_000, 150_000]),
    header_len=st.sampled_from([12, 20]),
    first_sqn=st.integers(0, (1 << 32) + 5),
    lengths=st.lists(
        st.one_of(st.integers(20, 200), st.integers(200, 9_000), st.just(65_000)), min_size=1, max_size=300
    ),
)
def test_the_window_keeps_what_the_model_keeps(
    size: int, limit: int, header_len: int, first_sqn: int, lengths: list[int]
) -> None:
    window = TransmissionWindow(
        size_bytes=size, limit_bytes=limit, header_len=header_len, first_sqn=first_sqn
    )
    model = Model(size, limit, header_len, first_sqn)
    for n, length in enumerate(lengths):
        sqn = model.make_room(length - header_len)
        assert window.make_room(length - header_len) == sqn
        datagram = _datagram(sqn, length)
        assert window.append(datagram) == sqn
        model.append(datagram)
        if n % 37 == 0 or n == len(lengths) - 1:
            _check(window, model)


@pytest.mark.parametrize("limit", [3_000, 40_000])
def test_the_limit_counts_the_headers_of_the_datagrams_still_held(limit: int) -> None:
    """A large datagram after many small ones drops several at once; each one dropped takes its header
    out of the overhead, so no more are dropped than the limit needs."""
    window = TransmissionWindow(size_bytes=1 << 20, limit_bytes=limit, header_len=40, first_sqn=7)
    model = Model(1 << 20, limit, 40, 7)
    lengths = [60] * 400 + [limit // 2] + [60] * 50 + [limit - 100] + [60] * 10
    for length in lengths:
        sqn = model.make_room(length - 40)
        assert window.make_room(length - 40) == sqn
        window.append(_datagram(sqn, length))
        model.append(_datagram(sqn, length))
        _check(window, model)


def test_a_long_run_reuses_its_chunks() -> None:
    """A quarter of a million datagrams through a 1 MB window: the storage stays about the window's size
    (released chunks are reused, the index ring within twice the datagrams held), and the newest datagrams
    read back."""
    window = TransmissionWindow(size_bytes=1 << 20, limit_bytes=0, header_len=20)
    model = Model(1 << 20, 0, 20, 0)
    for sqn in range(250_000):
        length = 60 + sqn % 90
        assert window.make_room(length - 20) == sqn
        model.make_room(length - 20)
        datagram = _datagram(sqn, length)
        window.append(datagram)
        model.append(datagram)
    _check(window, model)
    chunk = 1 << window._shift
    assert len(window._chunks) * chunk <= (1 << 20) + 2 * chunk
    assert 4096 < len(window._index) <= 2 * len(model.entries)  # grew from 4,096 (the window / 256)


def test_a_window_of_zero_bytes_keeps_only_the_newest_datagram() -> None:
    window = TransmissionWindow(size_bytes=0, limit_bytes=0, header_len=12)
    for sqn in range(5):
        assert window.make_room(50) == sqn
        window.append(_datagram(sqn, 62))
        assert window.msgs == 1
        assert window.get(sqn) == _datagram(sqn, 62)
        assert window.get(sqn - 1) is None


def test_wire_sequence_numbers_map_into_the_window_across_the_wrap() -> None:
    first = (1 << 32) - 3
    window = TransmissionWindow(size_bytes=1 << 16, limit_bytes=0, header_len=12, first_sqn=first)
    for sqn in range(first, first + 6):
        window.make_room(20)
        window.append(_datagram(sqn, 32))
    assert window.lookup((first + 5) & 0xFFFFFFFF) == first + 5  # after the wrap: wire sqn 2
    assert window.lookup(first & 0xFFFFFFFF) == first
    assert window.lookup((first + 6) & 0xFFFFFFFF) is None
    assert window.is_ahead((first + 6) & 0xFFFFFFFF)
    assert not window.is_ahead((first + 5) & 0xFFFFFFFF)


def test_negative_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="must be >= 0"):
        TransmissionWindow(size_bytes=-1, limit_bytes=0, header_len=12)


def test_zero_length_datagrams_are_kept_too() -> None:
    """Empty datagrams (possible only with a header length of 0) at a chunk's start, inside and at its end."""
    window = TransmissionWindow(size_bytes=200_000, limit_bytes=0, header_len=0)
    model = Model(200_000, 0, 0, 0)
    for length in [0, 0, 100, 0, 65_436, 0, 0, 30_000, 0, 65_536, 0, 1]:
        sqn = model.make_room(length)
        assert window.make_room(length) == sqn
        window.append(_datagram(sqn, length))
        model.append(_datagram(sqn, length))
        _check(window, model)


def test_a_plain_buffer_chunk_writes_in_order_and_refuses_to_overflow() -> None:
    chunk = _window._BufferChunk(8)
    assert chunk.write(b"abc") == 3
    chunk.write(memoryview(b"defgh"))
    assert chunk[0:8] == b"abcdefgh"
    with pytest.raises(ValueError, match="out of range"):
        chunk.write(b"x")
    chunk.seek(2)
    chunk.write(bytearray(b"XY"))
    assert chunk[1:5] == b"bXYe"


@pytest.mark.skipif(
    COMPILED,
    reason="the compiled module calls its own chunk factory: plain buffers are tested pure-Python",
)
def test_the_window_works_in_plain_buffers_where_no_mapping_can_be_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_window, "_new_chunk", _window._BufferChunk)
    window = TransmissionWindow(size_bytes=150_000, limit_bytes=0, header_len=20)
    model = Model(150_000, 0, 20, 0)
    for sqn in range(3_000):
        length = 40 + (sqn * 7919) % 3_000
        assert window.make_room(length - 20) == model.make_room(length - 20)
        window.append(_datagram(sqn, length))
        model.append(_datagram(sqn, length))
    _check(window, model)
    assert all(isinstance(chunk, _window._BufferChunk) for chunk in window._chunks)
