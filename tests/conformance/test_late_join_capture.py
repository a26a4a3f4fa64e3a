"""A real capture of Late Join on ``lo`` decodes cleanly in tshark (issue 25): the late-join source's TIR
advertises Late Join (late-join option, LATE_JOIN functionality bit, the request port); the receiver's
LJI_REQ and UME_RXREQ control messages to that port, the source's UME_LJ_INFO and its type-0xA
retransmissions (original topic index and sequence number, SRCIDX, CTXINSTR) to the receiver's request
port, on each source transport, with the fields that were sent."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

import openum
from openum import MsgFlags, MsgType
from tests.conformance.test_tr_capture import Capture
from tests.conformance.tshark import TCP_ANALYSIS_EXPERT, Tshark
from tests.helpers import wait_until
from tests.integration.pubsub import REQUEST_PORTS, WAIT, Ports

FIELDS = [
    "tcp.dstport",
    "lbmc.type",
    "lbmc.tidx",
    "lbmc.sqn",
    "lbmc.lji_req.request_idx",
    "lbmc.lji_req.transport_idx",
    "lbmc.lji_req.topic_idx",
    "lbmc.lji_req.req_port",
    "lbmc.ume_rxreq.request_idx",
    "lbmc.ume_rxreq.id_2",
    "lbmc.ume_rxreq.seqnum",
    "lbmc.ume_rxreq.rx_port",
    "lbmc.ume_lj_info.low_seqnum",
    "lbmc.ume_lj_info.high_seqnum",
    "lbmc.ume_lj_info.qidx",
    "lbmc.srcidx.srcidx",
    "lbmc.ctxinstr",
    "lbmr.topt.latejoin.src_tcp_port",
    "lbmr.topt.exfunc.src_tcp_port",
    "lbmr.topt.exfunc.functionality_flags",
    "_ws.col.Info",
]
COUNT = 20
#: NAK is a Warning in both dissectors (wire doc 8): LBT-RM/LBT-RU receivers repair their session's
#: window by NAK when they join; late join's own packets must have none.
ALLOWED_EXPERT = (*TCP_ANALYSIS_EXPERT, r"^NAK$")


@pytest.fixture
def capture_lo(tshark_bin: str) -> Callable[[Path, str], Capture]:
    if os.geteuid() != 0:
        pytest.skip("capturing on lo needs root (CI runs as root)")
    return Capture


def test_late_join_requests_answers_and_retransmissions_decode_cleanly(
    capture_lo: Callable[[Path, str], Capture], tmp_path: Path
) -> None:
    ports = Ports.allocate(4)
    capture_filter = (
        f"udp port {ports.resolver} or tcp portrange {ports.tcp_low}-{ports.request_low + REQUEST_PORTS - 1} "
        f"or udp portrange {ports.udp_low}-{ports.udp_low + 30}"
    )
    cap = capture_lo(tmp_path / "lj.pcap", capture_filter)
    try:
        assert cap.ready.wait(20), cap.stderr
        with openum.Context(options=ports.options()) as pub, openum.Context(options=ports.options()) as sub:
            sources = []
            for transport in ("tcp", "lbtru", "lbtrm"):
                src = pub.create_source(
                    f"lj/{transport}",
                    attrs={
                        "transport": transport,
                        "late_join": 1,
                        "retransmit_retention_size_threshold": 1 << 20,
                    },
                )
                for i in range(COUNT):
                    src.send(i.to_bytes(8, "big"))
                src.flush()
                sources.append(src)
            got: dict[str, list[int]] = {}
            lock = threading.Lock()

            def on_msg(msg: openum.Message) -> None:
                if msg.type is MsgType.DATA and msg.flags & MsgFlags.RETRANSMIT:
                    with lock:
                        got.setdefault(msg.topic, []).append(msg.sequence_number)

            receivers = [sub.create_receiver(f"lj/{t}", on_msg) for t in ("tcp", "lbtru", "lbtrm")]
            assert wait_until(
                lambda: all(len(got.get(f"lj/{t}", [])) == COUNT for t in ("tcp", "lbtrm")), WAIT
            )
            stats = sub.statistics()
            assert stats.late_join_info_requests_sent >= 3 and stats.late_join_rx_requests_sent >= COUNT
            pub_port, sub_port = pub.request_port, sub.request_port
            assert pub_port is not None and sub_port is not None
            assert cap.wait_packets(60), (cap.packets, cap.stderr)
            for rcv in receivers:
                rcv.close()
            for src in sources:
                src.close()
    finally:
        cap.stop()
    rows = _tshark(ports).assert_clean(cap.pcap, allowed_expert=ALLOWED_EXPERT, fields=FIELDS)
    # The TIRs advertise Late Join at the publisher's request port.
    lj_ports = {int(p) for r in rows for p in r.get("lbmr.topt.latejoin.src_tcp_port", [])}
    assert lj_ports == {pub_port[1]}
    assert any(int(f, 0) & 0x1 for r in rows for f in r.get("lbmr.topt.exfunc.functionality_flags", [])), (
        "no TIR with the LATE_JOIN functionality bit"
    )
    # LJI_REQs to the publisher's request port, one per topic at least, naming the receiver's port
    # (a TCP segment may carry several LBMC messages: each field lists their values in order).
    lji = [r for r in rows if "lbmc.lji_req.request_idx" in r]
    assert lji and all(r["tcp.dstport"] == [str(pub_port[1])] for r in lji)
    assert {int(p) for r in lji for p in r["lbmc.lji_req.req_port"]} == {sub_port[1]}
    asked = {int(q) for r in lji for q in r["lbmc.lji_req.request_idx"]}
    assert len(asked) >= 3  # one requester per (topic, source)
    # UME_LJ_INFO answers under the requests' indices: [0, COUNT-1].
    infos = [r for r in rows if "lbmc.ume_lj_info.qidx" in r]
    assert infos and {int(q) for r in infos for q in r["lbmc.ume_lj_info.qidx"]} <= asked
    ranges = {
        (int(low), int(high))
        for r in infos
        for low, high in zip(r["lbmc.ume_lj_info.low_seqnum"], r["lbmc.ume_lj_info.high_seqnum"], strict=True)
    }
    assert (0, COUNT - 1) in ranges, ranges
    # UME_RXREQs for sequence numbers 0.. to the publisher; retransmissions (type 0xA) back, each with
    # SRCIDX and CTXINSTR and the original sequence number.
    rxreqs = [r for r in rows if "lbmc.ume_rxreq.seqnum" in r]
    assert {int(s) for r in rxreqs for s in r["lbmc.ume_rxreq.seqnum"]} >= set(range(COUNT))
    assert all(r["tcp.dstport"] == [str(pub_port[1])] for r in rxreqs)
    assert {int(p) for r in rxreqs for p in r["lbmc.ume_rxreq.rx_port"]} == {sub_port[1]}
    to_sub = [r for r in rows if r.get("tcp.dstport") == [str(sub_port[1])] and "lbmc.type" in r]
    retrans = [r for r in to_sub if "lbmc.srcidx.srcidx" in r]
    assert retrans and all(len(r["lbmc.ctxinstr"]) >= len(r["lbmc.srcidx.srcidx"]) for r in retrans)
    assert {int(s) for r in retrans for s in r.get("lbmc.sqn", [])} >= set(range(COUNT))
    assert any(int(t, 0) == 0xA for r in retrans for t in r["lbmc.type"]), retrans[:2]


def _tshark(ports: Ports) -> Tshark:
    return Tshark(
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


def test_otr_requests_and_retransmissions_decode_cleanly(
    capture_lo: Callable[[Path, str], Capture], tmp_path: Path
) -> None:
    """OTR (UM Concepts Guide 10.3) uses Late Join's packets: UME_RXREQs for the sqns the transport lost
    (LBT-RM without NAKs here, every third data datagram dropped by the receiver's test hook), answered
    with type-0xA retransmissions of the original sqn to the receiver's request port."""
    ports = Ports.allocate(4)
    capture_filter = (
        f"udp port {ports.resolver} or tcp portrange "
        f"{ports.request_low}-{ports.request_low + REQUEST_PORTS - 1} "
        f"or udp portrange {ports.udp_low}-{ports.udp_low + 30}"
    )
    cap = capture_lo(tmp_path / "otr.pcap", capture_filter)
    otr_options = ("receiver use_otr 1", "receiver use_late_join 0", "receiver otr_request_initial_delay 10")
    no_naks = ("receiver transport_lbtrm_send_naks 0", "receiver transport_lbtrm_nak_generation_interval 300")
    try:
        assert cap.ready.wait(20), cap.stderr
        with (
            openum.Context(
                options=ports.options("source transport_topic_sequence_number_info_interval 500")
            ) as pub,
            openum.Context(options=ports.options(*otr_options, *no_naks)) as sub,
        ):
            got: list[tuple[int, int]] = []
            lock = threading.Lock()

            def on_msg(msg: openum.Message) -> None:
                if msg.type is MsgType.DATA:
                    with lock:
                        got.append((msg.sequence_number, int(msg.flags)))

            rcv = sub.create_receiver("otr/lbtrm", on_msg)
            src = pub.create_source(
                "otr/lbtrm",
                attrs={"transport": "lbtrm", "late_join": 1, "retransmit_retention_size_threshold": 1 << 20},
            )
            assert wait_until(lambda: sub.statistics().lbtrm_rcv_sessions == 1, WAIT)
            rm = sub._subscriptions._rm
            assert rm is not None
            seen = [0]

            def every_third(_datagram: object) -> bool:
                seen[0] += 1
                return seen[0] % 3 == 2

            rm._drop = every_third
            for i in range(COUNT):
                src.send(i.to_bytes(8, "big"), openum.SendFlags.FLUSH)
            assert wait_until(lambda: len(got) == COUNT, WAIT), got
            recovered = {s for s, flags in got if flags & MsgFlags.OTR}
            assert [s for s, _ in got] == list(range(COUNT)) and recovered
            stats = sub.statistics()
            assert stats.otr_rx_requests_sent >= len(recovered) and stats.otr_msgs_recovered >= len(recovered)
            pub_port, sub_port = pub.request_port, sub.request_port
            assert pub_port is not None and sub_port is not None
            # Frames after the last recovery are on file (dumpcap counts what it wrote; TIRs keep coming).
            mark = cap.packets
            assert cap.wait_packets(max(2 * COUNT, mark + 10)), (cap.packets, cap.stderr)
            rcv.close()
            src.close()
    finally:
        cap.stop()
    rows = _tshark(ports).assert_clean(cap.pcap, allowed_expert=TCP_ANALYSIS_EXPERT, fields=FIELDS)
    rxreqs = [r for r in rows if "lbmc.ume_rxreq.seqnum" in r]
    assert all(r["tcp.dstport"] == [str(pub_port[1])] for r in rxreqs)
    assert {int(s) for r in rxreqs for s in r["lbmc.ume_rxreq.seqnum"]} >= recovered
    assert {int(p) for r in rxreqs for p in r["lbmc.ume_rxreq.rx_port"]} == {sub_port[1]}
    retrans = [r for r in rows if r.get("tcp.dstport") == [str(sub_port[1])] and "lbmc.srcidx.srcidx" in r]
    assert any(int(t, 0) == 0xA for r in retrans for t in r["lbmc.type"]), retrans[:2]
    assert {int(s) for r in retrans for s in r.get("lbmc.sqn", [])} >= recovered
