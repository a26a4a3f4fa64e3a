"""LBT-TCP framing (lbtrm-lbtru-lbttcp-transports.md §5): the session-id message, the stream decoder
under every chunking, bounded buffering, and garbage that raises WireError only."""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openum.wire._common import WireError
from openum.wire.lbmc import (
    BatchHeader,
    LbmcMessage,
    MessageType,
    SessionIdHeader,
    TopicNameHeader,
    TsniHeader,
    control_message,
    data_message,
    decode_message,
    encode_data,
    encode_message,
)
from openum.wire.lbttcp import (
    SESSION_ID_MESSAGE_LEN,
    TRANSPORT_TCP_PORT_LOW,
    StreamDecoder,
    StreamEncoder,
    encode_stream,
    session_id_message,
)


def test_session_id_message_matches_the_verified_bytes() -> None:
    # §5.3: "08 6b 00 0c ff 08 00 00 5e ed 00 01"
    raw = session_id_message(0x5EED0001)
    assert raw == bytes.fromhex("086b000cff0800005eed0001")
    assert len(raw) == SESSION_ID_MESSAGE_LEN == 12
    assert decode_message(raw) == control_message(SessionIdHeader(0x5EED0001))
    assert TRANSPORT_TCP_PORT_LOW == 14371
    for bad in (-1, 2**32):
        with pytest.raises(WireError):
            session_id_message(bad)


def _stream_messages() -> list[bytes]:
    return [
        session_id_message(7),
        encode_message(data_message(1, 0, b"first", TopicNameHeader("Orders"))),
        encode_data(1, 1, b"x" * 64),
        encode_message(control_message(TsniHeader(((1, 1),)))),
        encode_message(data_message(1, 2, b"", BatchHeader(BatchHeader.START))),
        encode_data(1, 3, b"y" * 3000),
        encode_message(control_message(msg_type=MessageType.EOT)),
    ]


def test_many_messages_in_one_read_are_zero_copy_views() -> None:
    msgs = _stream_messages()
    stream = b"".join(msgs)
    dec = StreamDecoder()
    out = dec.feed(stream)
    assert [bytes(v) for v in out] == msgs
    assert all(v.obj is stream for v in out)  # slices of the fed buffer, not copies
    assert dec.buffered == 0
    dec.close()


def test_message_split_across_reads() -> None:
    msg = encode_message(data_message(9, 9, b"abcdefghij" * 4, TopicNameHeader("T")))
    dec = StreamDecoder()
    assert dec.feed(msg[:20]) == []
    assert dec.buffered == 20
    out = dec.feed(msg[20:] + msg[:2])  # the rest, plus the first 2 bytes of the next message
    assert [bytes(v) for v in out] == [msg]
    assert out[0].readonly
    assert dec.buffered == 2
    assert [bytes(v) for v in dec.feed(msg[2:])] == [msg]


def test_one_byte_chunks() -> None:
    msgs = _stream_messages()
    stream = b"".join(msgs)
    dec = StreamDecoder()
    got = [bytes(v) for i in range(len(stream)) for v in dec.feed(stream[i : i + 1])]
    assert got == msgs
    assert dec.feed(b"") == []


@settings(max_examples=200, deadline=None)
@given(
    payloads=st.lists(st.binary(max_size=300), min_size=1, max_size=12),
    cuts=st.lists(st.integers(0, 5000), max_size=30),
)
def test_random_chunkings_yield_exactly_the_messages(payloads: list[bytes], cuts: list[int]) -> None:
    msgs = [session_id_message(1)] + [encode_data(i, i, p) for i, p in enumerate(payloads)]
    stream = b"".join(msgs)
    points = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    dec = StreamDecoder()
    got: list[bytes] = []
    for start, end in itertools.pairwise(points):
        got += [bytes(v) for v in dec.feed(bytearray(stream[start:end]))]
        assert dec.buffered < 65536
    assert got == msgs
    dec.close()


def test_views_survive_the_next_feed() -> None:
    msg = encode_data(1, 1, b"z" * 100)
    dec = StreamDecoder()
    dec.feed(msg[:50])
    (first,) = dec.feed(msg[50:] + msg[:50])
    dec.feed(msg[50:])  # must not resize or overwrite the buffer behind ``first``
    assert bytes(first) == msg


def test_largest_message_is_buffered_and_no_more() -> None:
    big = encode_data(1, 1, b"q" * (65535 - 12))
    dec = StreamDecoder()
    for i in range(0, len(big) - 1, 4096):
        assert dec.feed(big[i : min(i + 4096, len(big) - 1)]) == []
    assert dec.buffered == 65534
    (out,) = dec.feed(big[-1:])
    assert bytes(out) == big
    assert dec.buffered == 0


@pytest.mark.parametrize(
    "garbage",
    [
        struct.pack(">BBH", 0x00, 0, 0),  # msglen 0 would never advance
        struct.pack(">BBH", 0x00, 0, 11),  # data message shorter than its 12-byte header
        struct.pack(">BBH", 0x08, 0xFF, 3),  # control message shorter than 4
        struct.pack(">BBH", 0x10, 0, 12),  # version 1
        struct.pack(">BBH", 0x05, 0, 12),  # type 5
        b"GET / HTTP/1.1\r\n",
    ],
)
def test_impossible_frames_raise_and_stay_failed(garbage: bytes) -> None:
    dec = StreamDecoder()
    assert [bytes(v) for v in dec.feed(session_id_message(3))] == [session_id_message(3)]
    with pytest.raises(WireError):
        dec.feed(garbage)
    with pytest.raises(WireError):
        dec.feed(session_id_message(3))
    # The same garbage arriving byte by byte is caught once its 4-byte head is complete.
    dec = StreamDecoder()
    for byte in garbage[:3]:
        assert dec.feed(bytes([byte])) == []
    with pytest.raises(WireError) as info:
        dec.feed(garbage[3:4])
    assert info.value.offset == 0


def test_error_offset_is_the_stream_offset() -> None:
    dec = StreamDecoder()
    dec.feed(session_id_message(1) + b"\x00\x00")
    with pytest.raises(WireError) as info:
        dec.feed(b"\x00\x00")
    assert info.value.offset == 12


def test_close_inside_a_message_raises() -> None:
    dec = StreamDecoder()
    dec.feed(encode_data(1, 1, b"abc")[:5])
    with pytest.raises(WireError):
        dec.close()


@settings(max_examples=300, deadline=None)
@given(chunks=st.lists(st.binary(max_size=64), max_size=10))
def test_fuzz_random_stream_bytes_raise_only_wire_error(chunks: list[bytes]) -> None:
    dec = StreamDecoder()
    try:
        for chunk in chunks:
            for view in dec.feed(chunk):
                assert len(view) >= 4
    except WireError:
        pass


def test_stream_encoder_starts_with_the_session_id() -> None:
    enc = StreamEncoder(0xABCD)
    assert not enc.started
    msg = data_message(1, 1, b"hi")
    first = enc.encode(msg)
    assert first == session_id_message(0xABCD) + encode_message(msg)
    assert enc.started
    assert enc.encode(msg, encode_data(1, 2, b"x")) == encode_message(msg) + encode_data(1, 2, b"x")
    assert enc.opening() == b""
    with pytest.raises(WireError):
        StreamEncoder(-5)


def test_stream_encoder_hot_path() -> None:
    enc = StreamEncoder(5)
    buf = bytearray(200)
    end = enc.encode_data_into(buf, 0, 1, 1, b"abc")
    end2 = enc.encode_data_into(buf, end, 1, 2, b"def")
    assert bytes(buf[:end2]) == session_id_message(5) + encode_data(1, 1, b"abc") + encode_data(1, 2, b"def")
    with pytest.raises(WireError):
        StreamEncoder(6).encode_data_into(bytearray(8), 0, 1, 1, b"")


def test_encode_stream_round_trips_through_the_decoder() -> None:
    msgs: list[LbmcMessage] = [data_message(1, i, bytes([i]) * i) for i in range(20)]
    stream = encode_stream(msgs, session_id=99)
    dec = StreamDecoder()
    views = dec.feed(stream)
    assert decode_message(views[0]) == control_message(SessionIdHeader(99))
    assert [decode_message(v) for v in views[1:]] == msgs
    assert encode_stream([b"\x08\xff\x00\x04"]) == b"\x08\xff\x00\x04"
