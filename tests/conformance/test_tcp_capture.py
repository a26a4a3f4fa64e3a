"""A real capture of a TCP transport session on ``lo`` decodes cleanly in tshark (issue 5): the TIR names
the topic, index, port and session id; every data message carries the source's topic index and the topic
sequence numbers 0..N-1 in order; tshark resolves the topic name of each data message from the TIR."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

import openum
from openum import MsgType, SendFlags, SourceEvent, SourceString
from openum.wire.lbmc import PropertyType, TypedValue
from tests.conformance.test_tr_capture import Capture
from tests.conformance.tshark import TCP_ANALYSIS_EXPERT, Tshark
from tests.integration.pubsub import WAIT, Ports, Recorder, SourceEvents

TOPIC = "capture/tcp/IBM"


@pytest.fixture
def capture_lo(tshark_bin: str) -> Callable[[Path, str], Capture]:
    if os.geteuid() != 0:
        pytest.skip("capturing on lo needs root (CI runs as root)")
    return Capture


def _ints(values: list[str]) -> list[int]:
    return [int(v, 0) for v in values]


def test_captured_tcp_session_decodes_cleanly_with_the_sent_topic_indices_and_sqns(
    capture_lo: Callable[[Path, str], Capture], tmp_path: Path
) -> None:
    ports = Ports.allocate(4)
    capture_filter = f"udp port {ports.resolver} or tcp portrange {ports.tcp_low}-{ports.tcp_high}"
    cap = capture_lo(tmp_path / "tcp.pcap", capture_filter)
    try:
        assert cap.ready.wait(20), cap.stderr
        with openum.Context(options=ports.options()) as pub, openum.Context(options=ports.options()) as sub:
            events = SourceEvents()
            src = pub.create_source(TOPIC, event_callback=events)
            rec = Recorder()
            sub.create_receiver(TOPIC, rec)
            assert events.wait(SourceEvent.CONNECT)
            sqns: list[int] = []
            for i in range(20):  # one datagram each
                sqns.append(src.send(f"flushed {i}".encode(), SendFlags.FLUSH))
            for i in range(30):  # implicit batching: several messages per datagram
                sqns.append(src.send(f"batched {i}".encode()))
            src.flush()
            sqns.append(src.send(bytes(150_000), SendFlags.FLUSH))  # 3 fragments: sqns 50, 51, 52
            props = {"qty": TypedValue(PropertyType.INT, 100), "sym": TypedValue(PropertyType.STRING, "IBM")}
            sqns.append(src.send(b"with properties", SendFlags.FLUSH, properties=props))
            assert rec.wait_count(len(sqns), timeout=WAIT), rec.types()
            total = sqns[-1] + 1
            assert sqns[:50] == list(range(50)) and sqns[50:] == [52, 53]
            assert [g.sqn for g in rec.of(MsgType.DATA)] == sqns
            source = SourceString.parse(src.source_string)
            stats = src.statistics()
            tr_dgrams = pub.statistics().tr_dgrams_sent + sub.statistics().tr_dgrams_sent
            # At least: the TR datagrams, one segment per datagram flushed, the handshake and both ids.
            assert cap.wait_packets(tr_dgrams + stats.datagrams_sent + 5), (cap.packets, cap.stderr)
    finally:
        cap.stop()
    assert source.port is not None and source.session_id is not None and source.topic_index is not None
    tshark = Tshark(
        decode_as=(f"udp.port=={ports.resolver},lbmr", f"tcp.port=={source.port},lbttcp"),
        # Outside lbttcp's source port range (UM's default 14371-14390) tshark treats the stream as a
        # plain LBMC stream with no transport channel, so no TIR could name its topics.
        prefs={"lbttcp.source_port_low": str(ports.tcp_low), "lbttcp.source_port_high": str(ports.tcp_high)},
    )
    # TCP's own flow control at work on the 150 KB message (the receiver's initial window is 64 KB), or a
    # spurious retransmission on a loaded machine, is a TCP-analysis warning about the connection, not
    # about what LBT-TCP put in it.
    rows = tshark.assert_clean(
        cap.pcap,
        allowed_expert=TCP_ANALYSIS_EXPERT,
        fields=[
            "tcp.srcport",
            "tcp.dstport",
            "lbmr.tir.name",
            "lbmr.tir.index",
            "lbmr.tir.tcp.port",
            "lbmr.tir.tcp.session_id",
            "lbmc.tidx",
            "lbmc.sqn",
            "lbmc.topic",
            "lbmc.tcp_sid.sid",
            "lbmr.tir.channel",
            "lbttcp.channel.channel",
        ],
    )
    # The advertisement: topic name, topic index, TCP port and session id of the source.
    tirs = [r for r in rows if TOPIC in r.get("lbmr.tir.name", [])]
    assert tirs, "no TIR for the topic in the capture"
    for row in tirs:
        at = row["lbmr.tir.name"].index(TOPIC)
        assert int(row["lbmr.tir.index"][at]) == source.topic_index
        assert int(row["lbmr.tir.tcp.port"][at]) == source.port
        assert int(row["lbmr.tir.tcp.session_id"][at], 16) == source.session_id
    from_source = [r for r in rows if r.get("tcp.srcport") == [str(source.port)]]
    to_source = [r for r in rows if r.get("tcp.dstport") == [str(source.port)]]
    # Both directions open with the session-id message (seed 6.1.2).
    assert _ints(next(r for r in from_source if "lbmc.tcp_sid.sid" in r)["lbmc.tcp_sid.sid"]) == [
        source.session_id
    ]
    assert _ints(next(r for r in to_source if "lbmc.tcp_sid.sid" in r)["lbmc.tcp_sid.sid"]) == [
        source.session_id
    ]
    # Every data message, in stream order: the source's topic index, sqns 0..N-1, and the topic name
    # tshark found through the TIR.
    tidx = [i for r in from_source for i in _ints(r.get("lbmc.tidx", []))]
    sqn = [s for r in from_source for s in _ints(r.get("lbmc.sqn", []))]
    topics = [t for r in from_source for t in r.get("lbmc.topic", [])]
    assert sqn == list(range(total))
    assert tidx == [source.topic_index] * total
    assert topics == [TOPIC] * total
    # The cross-reference behind those names: the TIR's transport channel is the TCP stream's.
    tir_channels = {r["lbmr.tir.channel"][r["lbmr.tir.name"].index(TOPIC)] for r in tirs}
    data_channels = {c for r in from_source if "lbmc.tidx" in r for c in r.get("lbttcp.channel.channel", [])}
    assert len(tir_channels) == 1 and data_channels == tir_channels
