"""A real capture of request/response and unicast immediate messaging on ``lo`` decodes cleanly in tshark
(issue 24): requests on each source transport carry the REQUEST header (request index, the requester's
request port); responses, topic-ful and topicless UIMs, immediate requests and messages sent to a source
travel over TCP to request ports as LBMC data messages whose fields are what was sent."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

import openum
from openum import MsgType, SendFlags, SourceEvent, SourceString
from openum.wire.lbmc import RESPONSE_EXTOPT_SUBTYPE
from tests.conformance.test_tr_capture import Capture
from tests.conformance.tshark import TCP_ANALYSIS_EXPERT, Tshark
from tests.helpers import wait_until
from tests.integration.pubsub import REQUEST_PORTS, WAIT, Ports, SourceEvents

FIELDS = [
    "tcp.srcport",
    "tcp.dstport",
    "udp.srcport",
    "lbmc.type",
    "lbmc.tidx",
    "lbmc.topicname.topic",
    "lbmc.tcp_request.qidx",
    "lbmc.tcp_request.port",
    "lbmc.tcp_request.ipaddr",
    "lbmc.ctxinstr",
    "lbmc.ctxinstd",
    "lbmc.stream.stream_id",
    "lbmc.srcidx.srcidx",
    "lbmc.extopt.subtype",
    "lbmr.topt.exfunc.src_tcp_port",
    "_ws.col.Info",
]


@pytest.fixture
def capture_lo(tshark_bin: str) -> Callable[[Path, str], Capture]:
    if os.geteuid() != 0:
        pytest.skip("capturing on lo needs root (CI runs as root)")
    return Capture


def _payload_rows(rows: list[dict[str, list[str]]], port: int) -> list[dict[str, list[str]]]:
    return [r for r in rows if r.get("tcp.dstport") == [str(port)] and "lbmc.type" in r]


def test_requests_responses_and_uims_decode_cleanly_with_the_fields_sent(
    capture_lo: Callable[[Path, str], Capture], tmp_path: Path
) -> None:
    ports = Ports.allocate(4)
    udp_high = ports.udp_low + 30
    capture_filter = (
        f"udp port {ports.resolver} or tcp portrange {ports.tcp_low}-{ports.request_low + REQUEST_PORTS - 1} "
        f"or udp portrange {ports.udp_low}-{udp_high}"
    )
    cap = capture_lo(tmp_path / "rr.pcap", capture_filter)
    indices: dict[str, int] = {}
    try:
        assert cap.ready.wait(20), cap.stderr
        with (
            openum.Context(options=ports.options()) as client,
            openum.Context(options=ports.options()) as server,
        ):
            inbox: list[bytes] = []
            server.receive_immediate_messages(lambda m, _d: inbox.append(bytes(m.data)))
            server.create_receiver(
                "rr/topic", lambda m: m.respond(b"re:" + bytes(m.data)) if m.type is MsgType.REQUEST else None
            )
            for transport in ("tcp", "lbtru", "lbtrm"):
                topic = f"rr/{transport}"
                server.create_receiver(
                    topic, lambda m: m.respond(b"re:" + bytes(m.data)) if m.type is MsgType.REQUEST else None
                )
                events = SourceEvents()
                src = client.create_source(topic, attrs={"transport": transport}, event_callback=events)
                if transport == "lbtrm":
                    assert wait_until(lambda: server.statistics().lbtrm_rcv_sessions >= 1, WAIT)
                else:
                    assert events.wait(SourceEvent.CONNECT)
                got: list[bytes] = []
                with src.send_request(
                    transport.encode(), lambda m, g=got: g.append(bytes(m.data)), flags=SendFlags.FLUSH
                ) as req:
                    assert wait_until(lambda g=got: g, WAIT), transport
                    indices[transport] = req.index
                assert got == [b"re:" + transport.encode()]
            target = server.immediate_target
            assert target is not None
            client.unicast_immediate_message(target, b"topicless")
            client.unicast_immediate_message(target, b"with topic", topic="rr/tcp")
            answers: list[bytes] = []
            with client.unicast_immediate_request(
                target, b"uim-req", lambda m: answers.append(bytes(m.data)), topic="rr/topic"
            ) as ureq:
                assert wait_until(lambda: answers, WAIT)
                indices["uim"] = ureq.index
            # sending to a source: the server publishes, the client receives and answers its context
            sources: list[str] = []
            client.create_receiver(
                "rr/feed", lambda m: sources.append(m.source) if m.type is MsgType.BOS else None
            )
            feed_events = SourceEvents()
            feed = server.create_source("rr/feed", attrs={"transport": "tcp"}, event_callback=feed_events)
            parsed = SourceString.parse(feed.source_string)
            assert parsed.session_id is not None and parsed.topic_index is not None
            feed_index = (parsed.session_id << 32) | parsed.topic_index
            assert feed_events.wait(SourceEvent.CONNECT) and wait_until(lambda: sources, WAIT)
            client.unicast_immediate_message(f"SOURCE:{sources[0]}", b"to the source")
            assert wait_until(lambda: len(inbox) == 2, WAIT), inbox
            assert inbox == [b"topicless", b"to the source"]
            client_port = client.request_port
            server_port = server.request_port
            assert client_port is not None and server_port is not None
            assert cap.wait_packets(40), (cap.packets, cap.stderr)
    finally:
        cap.stop()
    tshark = Tshark(
        decode_as=(f"udp.port=={ports.resolver},lbmr",),
        prefs={
            "lbttcp.source_port_low": str(ports.tcp_low),
            "lbttcp.source_port_high": str(ports.tcp_high),
            "lbttcp.request_port_low": str(ports.request_low),
            "lbttcp.request_port_high": str(ports.request_low + REQUEST_PORTS - 1),
            "lbtrm.sport_low": str(ports.udp_low),
            "lbtrm.sport_high": str(ports.udp_low + 7),
            "lbtrm.dport_low": str(ports.lbtrm_destination_port),
            "lbtrm.dport_high": str(ports.lbtrm_destination_port),
            "lbtru.source_port_low": str(ports.lbtru_source_ports[0]),
            "lbtru.source_port_high": str(ports.lbtru_source_ports[1]),
            "lbtru.receiver_port_low": str(ports.lbtru_receiver_ports[0]),
            "lbtru.receiver_port_high": str(ports.lbtru_receiver_ports[1]),
        },
    )
    rows = tshark.assert_clean(cap.pcap, allowed_expert=TCP_ANALYSIS_EXPERT, fields=FIELDS)
    # Requests: on each transport, a DATA[REQ] with the request index and the client's request port.
    requests = [r for r in rows if "lbmc.tcp_request.qidx" in r]
    seen = {(int(r["lbmc.tcp_request.qidx"][0]), int(r["lbmc.tcp_request.port"][0])) for r in requests}
    for transport in ("tcp", "lbtru", "lbtrm"):
        assert (indices[transport], client_port[1]) in seen, (transport, seen)
    assert {r["lbmc.tcp_request.ipaddr"][0] for r in requests} == {client_port[0]}
    assert any("DATA[REQ]" in r["_ws.col.Info"][0] for r in requests)
    # Responses: UIMs to the client's request port, each naming the request index (topic index and
    # openum's response option), with the server's instance as the return instance.
    to_client = _payload_rows(rows, client_port[1])
    response_tidx = {int(t) for r in to_client for t in r.get("lbmc.tidx", [])}
    assert {indices["tcp"], indices["lbtru"], indices["lbtrm"], indices["uim"]} <= response_tidx
    assert all("lbmc.ctxinstr" in r and "lbmc.stream.stream_id" in r for r in to_client)
    assert all(int(r["lbmc.extopt.subtype"][0], 0) == RESPONSE_EXTOPT_SUBTYPE for r in to_client), to_client
    # UIMs to the server's request port: topicless, with a topic, an immediate request, to a source.
    to_server = _payload_rows(rows, server_port[1])
    topics = [t for r in to_server for t in r.get("lbmc.topicname.topic", [])]
    assert "rr/tcp" in topics and "rr/topic" in topics
    assert any(int(q) == indices["uim"] for r in to_server for q in r.get("lbmc.tcp_request.qidx", []))
    assert any("lbmc.ctxinstd" in r for r in to_server), "the UIM to a source names its context instance"
    assert [int(i, 0) for r in to_server for i in r.get("lbmc.srcidx.srcidx", [])] == [feed_index]
    # Every TIR of the server's feed advertises its request port.
    exfunc = {int(p) for r in rows for p in r.get("lbmr.topt.exfunc.src_tcp_port", [])}
    assert server_port[1] in exfunc and client_port[1] in exfunc
