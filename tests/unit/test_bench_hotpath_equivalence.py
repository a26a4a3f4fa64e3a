"""The TCP receive hot path (issue 7's profiling pass) delivers exactly what the reference path delivers.

``TcpReceiverSession._readable`` hands each read straight to ``LbmcDemux.dispatch_stream`` and keeps an
incomplete trailing message for the next read.  The reference is the straightforward path it replaced:
``StreamDecoder.feed`` (one view per message) and ``LbmcDemux.dispatch`` per message.  Both must give the
topic handlers the same calls, in the same order, for any stream and any way the reads cut it, and both
must reject a corrupt stream.  ``LbmcDemux.dispatch`` (UDP datagrams) decodes plain data messages inline;
a datagram of many messages must be dispatched as each message alone would be.
"""

from __future__ import annotations

import array
import itertools
import logging
import random
import socket
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import openum
from openum.runtime import EventLoop, MonotonicClock
from openum.transport._demux import LbmcDemux, TopicHandler
from openum.transport.tcp_receiver import TcpReceiverSession
from openum.wire import WireError
from openum.wire.lbmc import (
    FRAGMENT_HEADER_LEN,
    AppHeaderChain,
    FragmentHeader,
    LbmcMessage,
    MessageType,
    PropertiesLengthElement,
    TsniHeader,
    control_message,
    decode_data_fast,
    decode_message_at,
    encode_data,
    encode_message,
)
from openum.wire.lbttcp import StreamDecoder, session_id_message


class Recorder(TopicHandler):
    """A topic handler that copies what it is given (payloads are only valid during the call)."""

    def __init__(self, name: int, calls: list[tuple[Any, ...]]) -> None:
        self.name = name
        self.calls = calls

    def on_data(
        self,
        sqn: int,
        payload: memoryview | bytes,
        now_ns: int,
        fragment: tuple[int, int, int] | None,
        flags: int,
        properties: Any,
    ) -> None:
        self.calls.append(("data", self.name, sqn, bytes(payload), fragment, flags, properties))

    def on_tsni(self, sqn: int, now_ns: int) -> None:
        self.calls.append(("tsni", self.name, sqn))


SUBSCRIBED = (1, 2)  # topic indices with a handler; others are counted as "no topic"


def _recording_demux() -> tuple[LbmcDemux, list[tuple[Any, ...]]]:
    """A demultiplexer whose SUBSCRIBED topics record every call into the returned list."""
    calls: list[tuple[Any, ...]] = []
    demux = LbmcDemux()
    for tidx in SUBSCRIBED:
        demux.topics[tidx] = Recorder(tidx, calls)
    return demux, calls


plain = st.builds(
    encode_data,
    st.integers(1, 4),
    st.integers(0, 2**32 - 1),
    st.binary(max_size=300),
)
fragment = st.builds(
    lambda tidx, sqn, payload: encode_message(
        LbmcMessage(MessageType.DATA, tidx, sqn, (FragmentHeader(sqn, 0, len(payload) + 5),), payload)
    ),
    st.integers(1, 4),
    st.integers(0, 2**31),
    st.binary(max_size=100),
)
tsni = st.builds(
    lambda records: encode_message(control_message(TsniHeader(tuple(records)))),
    st.lists(st.tuples(st.integers(1, 4), st.integers(0, 2**32 - 1)), min_size=1, max_size=4),
)
session_id = st.builds(session_id_message, st.integers(0, 2**32 - 1))
streams = st.lists(st.one_of(plain, plain, plain, fragment, tsni, session_id), max_size=40)


def reference(stream: bytes) -> tuple[list[tuple[Any, ...]], tuple[int, int, int]]:
    demux, calls = _recording_demux()
    for view in StreamDecoder().feed(stream):
        assert demux.dispatch(view, 7)
    return calls, (demux.lbm_msgs_rcved, demux.lbm_msgs_no_topic_rcved, demux.tsnis_rcved)


class FakeSocket:
    """Stands in for the connected socket: ``recv_into`` returns the reads a test chose."""

    def __init__(self, real: socket.socket, reads: list[bytes]) -> None:
        self.real = real
        self.reads = reads

    def recv_into(self, buf: bytearray) -> int:
        data = self.reads.pop(0)
        buf[: len(data)] = data
        return len(data)

    def fileno(self) -> int:
        return self.real.fileno()

    def close(self) -> None:
        self.real.close()


@pytest.fixture(scope="module")
def listener() -> Any:
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server


def read_through_session(listener: socket.socket, reads: list[bytes]) -> tuple[list[Any], Any, list[str]]:
    """Feed ``reads`` to a real TcpReceiverSession's read path; return the handler calls, the statistics
    and why the session ended (empty: it did not)."""
    loop = EventLoop(MonotonicClock(), logging.getLogger("test"), "hotpath")
    ended: list[str] = []
    session = TcpReceiverSession(
        loop,
        "127.0.0.1",
        listener.getsockname()[1],
        None,
        logging.getLogger("test"),
        lambda: None,
        ended.append,
    )
    conn, _ = listener.accept()
    calls: list[tuple[Any, ...]] = []
    for tidx in SUBSCRIBED:
        session.topics[tidx] = Recorder(tidx, calls)
    session.sock = FakeSocket(session.sock, list(reads))  # type: ignore[assignment]
    session._connected = True
    for _ in reads:
        if session.closed:
            break
        session._readable()
    stats = session.statistics()
    ended_by_reads = list(ended)
    session.close()
    conn.close()
    loop.close()
    return calls, stats, ended_by_reads


def cut(stream: bytes, points: list[int]) -> list[bytes]:
    edges = sorted({0, len(stream), *(p % (len(stream) + 1) for p in points)})
    return [stream[a:b] for a, b in itertools.pairwise(edges) if b > a]


@settings(max_examples=150, deadline=None)
@given(messages=streams, points=st.lists(st.integers(0, 20000), max_size=12))
def test_any_chunking_delivers_what_the_reference_path_delivers(
    listener: socket.socket, messages: list[bytes], points: list[int]
) -> None:
    stream = b"".join(messages)
    expected, (rcved, no_topic, tsnis) = reference(stream)
    reads = cut(stream, points)
    calls, stats, ended = read_through_session(listener, reads)
    assert calls == expected
    assert (stats.lbm_msgs_rcved, stats.lbm_msgs_no_topic_rcved, stats.tsnis_rcved) == (
        rcved,
        no_topic,
        tsnis,
    )
    assert stats.msgs_malformed == 0
    assert stats.bytes_rcved == len(stream)
    assert ended == []


@pytest.mark.parametrize("split", [0, 1, 2, 3, 5, 11])
@pytest.mark.parametrize(
    "garbage",
    [b"\x30\x00\x00\x10" + bytes(12), b"\x05\x00\x00\x10" + bytes(12), b"\x00\x00\x00\x03" + bytes(12)],
    ids=["version-3", "type-5", "msglen-3"],
)
def test_a_corrupt_stream_is_dropped_like_the_decoder_rejects_it(
    listener: socket.socket, garbage: bytes, split: int
) -> None:
    good = encode_data(1, 0, b"first")
    stream = good + garbage
    with pytest.raises(WireError):
        StreamDecoder().feed(stream)
    at = len(good) + split
    calls, stats, ended = read_through_session(listener, [stream[:at], stream[at:]] if split else [stream])
    assert calls == [("data", 1, 0, b"first", None, 0, None)]
    assert stats.msgs_malformed == 1
    assert len(ended) == 1


@settings(max_examples=150, deadline=None)
@given(messages=streams, flags=st.sampled_from([0, 0x8]), header=st.binary(max_size=24))
def test_a_datagram_of_many_messages_is_dispatched_like_each_message_alone(
    messages: list[bytes], flags: int, header: bytes
) -> None:
    """``dispatch`` (UDP datagrams) takes plain data messages inline; the record path is the reference.
    From a start offset (a transport header before the messages) it delivers the same."""
    (demux_whole, whole), (demux_alone, alone) = _recording_demux(), _recording_demux()
    demux_after, after = _recording_demux()
    assert demux_whole.dispatch(memoryview(b"".join(messages)), 7, flags)
    assert demux_after.dispatch(memoryview(header + b"".join(messages)), 7, flags, len(header))
    assert after == whole
    for message in messages:
        assert demux_alone.dispatch(memoryview(message), 7, flags)
        fast = decode_data_fast(memoryview(message))
        if fast is not None and fast[0] in SUBSCRIBED:
            assert alone[-1] == ("data", fast[0], fast[1], bytes(fast[2]), None, flags, None)
    assert whole == alone
    assert demux_whole.lbm_msgs_rcved == demux_alone.lbm_msgs_rcved
    assert demux_whole.lbm_msgs_no_topic_rcved == demux_alone.lbm_msgs_no_topic_rcved


@settings(max_examples=150, deadline=None)
@given(
    tidx=st.sampled_from([1, 2, 3]),
    sqn=st.integers(0, 2**32 - 1),
    first=st.integers(0, 2**32 - 1),
    offset=st.integers(0, 2**32 - 1),
    total=st.integers(0, 2**32 - 1),
    payload=st.binary(max_size=100),
    with_properties_length=st.booleans(),
    flags=st.sampled_from([0, 0x8]),
)
def test_a_fragment_is_dispatched_as_the_record_path_dispatches_it(
    tidx: int,
    sqn: int,
    first: int,
    offset: int,
    total: int,
    payload: bytes,
    with_properties_length: bool,
    flags: int,
) -> None:
    """``dispatch`` reads a fragment whose only extension header is FRAG inline; one with more headers
    (here a properties-length chain) takes the record path; both must hand the topic what ``_data`` does
    with the decoded record."""
    headers: tuple[Any, ...] = (FragmentHeader(first, offset, total),)
    if with_properties_length:
        headers += (AppHeaderChain((PropertiesLengthElement(3),)),)
    raw = encode_message(LbmcMessage(MessageType.DATA, tidx, sqn, headers, payload))
    (demux_fast, fast), (demux_ref, reference) = _recording_demux(), _recording_demux()
    assert demux_fast.dispatch(memoryview(raw), 7, flags)
    msg, _ = decode_message_at(memoryview(raw), 0)
    demux_ref._data(msg, 7, flags)
    assert [c[:5] for c in fast] == [c[:5] for c in reference]
    assert [type(c[6]) for c in fast] == [type(c[6]) for c in reference]
    assert (demux_fast.lbm_msgs_rcved, demux_fast.lbm_msgs_no_topic_rcved) == (
        demux_ref.lbm_msgs_rcved,
        demux_ref.lbm_msgs_no_topic_rcved,
    )
    if tidx in SUBSCRIBED:
        assert fast and fast[0][4] == (first, offset, total)


def test_a_truncated_datagram_is_malformed() -> None:
    demux = LbmcDemux()
    calls: list[tuple[Any, ...]] = []
    demux.topics[1] = Recorder(1, calls)
    datagram = encode_data(1, 5, b"whole") + encode_data(1, 6, b"cut short")[:-3]
    assert not demux.dispatch(memoryview(datagram), 7)
    assert calls == [("data", 1, 5, b"whole", None, 0, None)]
    assert demux.msgs_malformed == 1


def test_the_send_path_writes_what_encode_data_writes_for_every_payload_type_and_size() -> None:
    """``SourceSessionBase.send`` packs a size it has seen with a cached ``data_message_packer`` and
    anything else with ``encode_data_into``; the stream a TCP source writes must be the same either way."""
    port = random.Random().randrange(20000, 31000)
    ctx = openum.Context(
        options=[
            "context operational_mode sequential",
            f"context resolver_multicast_port {port}",
            f"context transport_tcp_port_low {port + 1}",
            f"context transport_tcp_port_high {port + 8}",
        ]
    )
    src = ctx.create_source("hotpath/send-equivalence")
    peer = socket.create_connection(("127.0.0.1", src.session.port))
    try:
        if src.session.session_id is not None:  # a connection is a receiver once it presents the id
            peer.sendall(session_id_message(src.session.session_id))
        for _ in range(200):
            if src.session.clients:
                break
            ctx.process_events(5)
        assert src.session.clients
        hello = session_id_message(src.session.session_id) if src.session.session_id is not None else b""
        sizes = [0, 5, 64, 64, 5, 300, 64, 0, 1000, 64]
        kinds = [bytes, bytearray, memoryview]
        payloads = [bytes([i % 251]) * size for i, size in enumerate(sizes)]
        start = src.sequence_number
        for i, payload in enumerate(payloads):
            data = kinds[i % 3](payload)  # each size is sent as more than one type
            src.send(data)
            src.send(kinds[(i + 1) % 3](payload))
        src.flush()
        expected = b"".join(
            encode_data(src.topic_index, (start + n) & 0xFFFFFFFF, payloads[n // 2])
            for n in range(2 * len(payloads))
        )
        got = b""
        peer.settimeout(5)
        while len(got) < len(hello) + len(expected):
            chunk = peer.recv(65536)
            assert chunk, "the source closed the connection"
            got += chunk
        assert got[len(hello) :] == expected
        # A memoryview of wider items or with strides carries its bytes, in order (its len() does not
        # count them).
        start = src.sequence_number
        odd = [memoryview(array.array("I", [1, 2, 3])), memoryview(bytes(range(20)))[::2]]
        for view in odd:
            src.send(view)
        src.flush()
        expected = b"".join(
            encode_data(src.topic_index, (start + n) & 0xFFFFFFFF, view.tobytes())
            for n, view in enumerate(odd)
        )
        got = b""
        while len(got) < len(expected):
            chunk = peer.recv(65536)
            assert chunk, "the source closed the connection"
            got += chunk
        assert got == expected
        # A message larger than a datagram after a small one: fragments written straight into the batch
        # (the last, short one joins nothing: every fragment is flushed as its own datagram) equal the
        # record API's fragments.
        start = src.sequence_number
        chunk = src.session.datagram_max - FRAGMENT_HEADER_LEN
        big = bytes(range(256)) * ((2 * chunk + 1000) // 256 + 1)
        src.send(b"small")
        src.send(memoryview(big))
        src.flush()
        expected = encode_data(src.topic_index, start, b"small")
        for i, at in enumerate(range(0, len(big), chunk)):
            frag = FragmentHeader(start + 1, at, len(big))
            piece = big[at : at + chunk]
            expected += encode_message(
                LbmcMessage(MessageType.DATA, src.topic_index, start + 1 + i, (frag,), piece)
            )
        got = b""
        while len(got) < len(expected):
            chunk_read = peer.recv(1 << 20)
            assert chunk_read, "the source closed the connection"
            got += chunk_read
        assert got == expected
        assert src.sequence_number == start + 1 + 3
    finally:
        peer.close()
        src.close()
        ctx.close()
