"""Real captures of LBT-RM and LBT-RU sessions on ``lo`` decode cleanly in tshark (issue 6).

A source sends ``COUNT`` messages; the receiving context drops a share of the datagrams it reads
(``OPENUM_TEST_DROP``: after the packets were on ``lo``), so the capture holds the original DATA, the
receiver's NAKs, the source's retransmissions (DATA with the RX flag), NCFs (a tiny retransmit rate limit
makes the source confirm with "retransmit delay" the NAKs it cannot answer at once, and NAKs for a repair
that the receiver dropped again get "NAK ignored") and session messages (the source idles after the
burst).  LBT-RU adds its connection: CREQ, SM with SYN, ACKs, and a RST when the source closes.

tshark must decode every frame on the transport's ports as LBT-RM / LBT-RU of the advertised session, with
LBMC data messages carrying the source's topic index and topic sequence numbers 0..N-1 (topic named through
the captured TIR), no malformed frame and no warning or error expert item but the documented "NAK" warning
(../shared/wire/lbtrm-lbtru-lbttcp-transports.md 8).  With sequence analysis the wire shows no gap,
reordering or duplicate: only RX-flagged DATA repeat a sequence number, each one for a sequence number a
receiver NAKed before, with the LBMC bytes of the original.  Without decode-as rules, the dissectors'
heuristics (given the test's ports as preferences) recognise every frame too.  The application gets every
message once, in order.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import openum
from openum import MsgType, SendFlags, SourceEvent, SourceString
from tests.conformance.test_tr_capture import Capture
from tests.conformance.tshark import Tshark
from tests.helpers import wait_until
from tests.integration.pubsub import UDP_PORTS, WAIT, Ports, Recorder, SourceEvents

pytestmark = pytest.mark.tshark

Row = dict[str, list[str]]

COUNT = 200
#: The receiving context drops 20% of the datagrams it reads.  Seed 5's first four draws keep the
#: datagrams: an LBT-RM receiver starts its sequence space at the first datagram it hears (a late join is
#: not head loss), so losing datagram 0 would lose message 0 for good; an LBT-RU receiver starts from the
#: SM SYN answering its CREQ.
DROP = "0.2:5"
#: One retransmission per 10 ms rate interval (a datagram is ~50 bytes): the rest of a NAK waits for the
#: budget, and the source confirms it with an NCF "retransmit delay".
RETRANSMIT_LIMIT = "50000"
#: Receivers: an NCF holds a NAK back this long (UM's default, 1 s, makes the run needlessly slow).
NAK_SUPPRESS_MS = "300"
#: NAK is a Warning in both dissectors; a recovering flow is made of them (wire doc 8).
ALLOWED_EXPERT = (r"^NAK$",)

RM_DATA, RM_SM, RM_NAK, RM_NCF = 0, 2, 3, 4
RU_DATA, RU_SM, RU_NAK, RU_NCF, RU_ACK, RU_CREQ, RU_RST = 0, 2, 3, 4, 5, 6, 7
RM_NAMES = {RM_DATA: "DATA", RM_SM: "SM", RM_NAK: "NAK", RM_NCF: "NCF"}
RU_NAMES = {
    RU_DATA: "DATA",
    RU_SM: "SM",
    RU_NAK: "NAK",
    RU_NCF: "NCF",
    RU_ACK: "ACK",
    RU_CREQ: "CREQ",
    RU_RST: "RST",
}

COMMON_FIELDS = [
    "frame.number",
    "frame.protocols",
    "lbmc.msglen",
    "lbmc.tidx",
    "lbmc.sqn",
    "lbmc.topic",
    "lbmr.tir.name",
    "lbmr.tir.channel",
]
RM_FIELDS = [
    *COMMON_FIELDS,
    "lbtrm.hdr.type",
    "lbtrm.hdr.ucast_port",
    "lbtrm.hdr.session_id",
    "lbtrm.data.sqn",
    "lbtrm.data.flags_fec_type.rx",
    "lbtrm.sm.sm_sqn",
    "lbtrm.sm.lead_sqn",
    "lbtrm.nak.list.nak",
    "lbtrm.ncf.reason",
    "lbtrm.ncf.list.ncf",
    "lbtrm.channel",
    "lbtrm.transport.data_retransmission",
    "lbtrm.transport.data_sqn_gap",
    "lbtrm.transport.data_ooo_gap",
    "lbtrm.transport.data_duplicate",
    "lbtrm.transport.sm_sqn_gap",
    "lbtrm.transport.sm_ooo_gap",
    "lbtrm.transport.sm_duplicate",
]
RU_FIELDS = [
    *COMMON_FIELDS,
    "lbtru.hdr.type",
    "lbtru.hdr.flags.rx",
    "lbtru.hdr.flags.syn",
    "lbtru.hdr.request",
    "lbtru.hdr.reason",
    "lbtru.opt_sid.session_id",
    "lbtru.data.sqn",
    "lbtru.sm.sqn",
    "lbtru.sm.lead",
    "lbtru.nak.list.nak",
    "lbtru.ncf.reason",
    "lbtru.ncf.list.ncf",
    "lbtru.ack.sqn",
    "lbtru.channel.channel",
    "lbtru.channel.client",
    "lbtru.analysis.data_retransmission",
    "lbtru.analysis.data_sqn_gap",
    "lbtru.analysis.data_ooo_gap",
    "lbtru.analysis.data_duplicate",
    "lbtru.analysis.sm_sqn_gap",
    "lbtru.analysis.sm_ooo_gap",
    "lbtru.analysis.sm_duplicate",
]
SEQUENCE_PROBLEMS = (
    "data_sqn_gap",
    "data_ooo_gap",
    "data_duplicate",
    "sm_sqn_gap",
    "sm_ooo_gap",
    "sm_duplicate",
)


# -- the run ---------------------------------------------------------------------------------------------


@pytest.fixture
def capture_lo(tshark_bin: str) -> Callable[[Path, str], Capture]:
    if os.geteuid() != 0:
        pytest.skip("capturing on lo needs root (CI runs as root)")
    return Capture


@pytest.fixture
def ports() -> Ports:
    return Ports.allocate(4)


class Run:
    """The contexts of one publish/subscribe run while dumpcap records ``lo``."""

    def __init__(self, capture: Capture) -> None:
        self.capture = capture
        self.contexts: list[openum.Context] = []

    def context(self, options: list[str]) -> openum.Context:
        ctx = openum.Context(options=options)
        self.contexts.append(ctx)
        return ctx

    def close(self) -> None:
        """Close the contexts (with their sources and receivers), then stop the capture."""
        while self.contexts:
            self.contexts.pop().__exit__(None, None, None)
        self.capture.stop()


@pytest.fixture
def run(
    capture_lo: Callable[[Path, str], Capture], ports: Ports, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Run]:
    # Read by a context when it first joins an LBT-RM/LBT-RU session: set before any context exists.
    monkeypatch.setenv("OPENUM_TEST_DROP", DROP)
    # The resolver port (the TIRs name the topics) and every LBT-RM/LBT-RU port of the test.
    last = ports.udp_low + UDP_PORTS - 1
    cap = capture_lo(
        tmp_path / "reliable.pcap", f"udp port {ports.resolver} or udp portrange {ports.udp_low}-{last}"
    )
    r = Run(cap)
    try:
        assert cap.ready.wait(20), cap.stderr
        yield r
    finally:
        r.close()


def _payload(i: int) -> bytes:
    return i.to_bytes(8, "big") + f" message {i}".encode()


def _send_all(src: openum.Source) -> list[int]:
    """COUNT messages, one datagram each."""
    return [src.send(_payload(i), SendFlags.FLUSH) for i in range(COUNT)]


def _assert_delivered_in_order(rec: Recorder, source_string: str, stats: object) -> None:
    got = rec.of(MsgType.DATA)
    assert [g.sqn for g in got] == list(range(COUNT))
    assert [g.data for g in got] == [_payload(i) for i in range(COUNT)]
    assert {g.source for g in got} == {source_string}
    assert rec.count(MsgType.UNRECOVERABLE_LOSS) == 0 and rec.count(MsgType.UNRECOVERABLE_LOSS_BURST) == 0
    # The loss was real, and all of it recovered.
    assert getattr(stats, "lost", 0) > 0 and getattr(stats, "naks_sent", 0) > 0, stats
    assert getattr(stats, "rxs_rcved", 0) > 0, stats
    assert getattr(stats, "unrecovered_txw", 1) == 0 and getattr(stats, "unrecovered_tmo", 1) == 0, stats


def _engine(src: openum.Source) -> Any:
    """The source's LBT-RM/LBT-RU engine counters (UM's names)."""
    stats: Any = src.statistics()  # an LBT-RM/LBT-RU session's (TCP's have no engine)
    return stats.transport


def _joined(ctx: openum.Context, source_string: str) -> bool:
    try:
        ctx.retrieve_transport_stats(source_string)
    except openum.OpenUMError:
        return False
    return True


def _captured(tshark: Tshark, capture: Capture, display_filter: str) -> bool:
    """Whether the pcap dumpcap is writing already holds a frame matching ``display_filter``."""
    if not capture.pcap.exists():
        return False
    try:
        out = dataclasses.replace(tshark, two_pass=False).run(
            capture.pcap, "-Y", display_filter, "-T", "fields", "-e", "frame.number"
        )
    except AssertionError:  # a packet block still being written
        return False
    return bool(out.strip())


# -- checking the decode ---------------------------------------------------------------------------------


def _ints(values: list[str]) -> list[int]:
    return [int(v, 0) for v in values]


def _frame(row: Row) -> int:
    return int(row["frame.number"][0])


def _one(row: Row, name: str) -> int:
    values = _ints(row[name])
    assert len(values) == 1, (name, row)
    return values[0]


def _by_type(rows: list[Row], field: str) -> dict[int, list[Row]]:
    out: dict[int, list[Row]] = {}
    for row in rows:
        out.setdefault(_one(row, field), []).append(row)
    return out


def _summary(kinds: dict[int, list[Row]], names: dict[int, str], rx_field: str) -> dict[str, int]:
    counts = {names.get(t, f"type {t}"): len(rows) for t, rows in sorted(kinds.items())}
    counts["DATA(RX)"] = sum(1 for r in kinds.get(0, []) if r.get(rx_field) != ["0"])
    counts["DATA"] -= counts["DATA(RX)"]
    return counts


def _tir_channels(rows: list[Row], topic: str) -> set[str]:
    """The transport channel tshark gave the captured TIRs of ``topic`` (one)."""
    channels = {
        r["lbmr.tir.channel"][r["lbmr.tir.name"].index(topic)]
        for r in rows
        if topic in r.get("lbmr.tir.name", [])
    }
    assert len(channels) == 1, channels
    return channels


def _check_data_and_repairs(
    data: list[Row], naks: list[Row], *, sqn_field: str, rx_field: str, nak_field: str, tidx: int, topic: str
) -> tuple[list[Row], list[Row]]:
    """Originals carry the topic sqns 0..COUNT-1 in order with consecutive transport sqns; the
    retransmissions are exactly the transport sqns the NAKs named, each after a NAK for it, with the
    LBMC of its original.  Returns (originals, retransmissions)."""
    assert all("lbmc.msglen" in r for r in data), [r for r in data if "lbmc.msglen" not in r][:3]
    assert {i for r in data for i in _ints(r["lbmc.tidx"])} == {tidx}
    # tshark names the topic of every data message through the TIR of the session's channel.
    assert [t for r in data for t in r.get("lbmc.topic", [])] == [topic] * len(data)
    originals = [r for r in data if r.get(rx_field) == ["0"]]
    repairs = [r for r in data if r.get(rx_field) != ["0"]]
    assert [s for r in originals for s in _ints(r["lbmc.sqn"])] == list(range(COUNT))
    transport = [_one(r, sqn_field) for r in originals]
    assert transport == list(range(transport[0], transport[0] + COUNT))
    original_lbmc = {_one(r, sqn_field): _ints(r["lbmc.sqn"]) for r in originals}
    first_nak: dict[int, int] = {}
    for row in naks:
        for sqn in _ints(row[nak_field]):
            first_nak.setdefault(sqn, _frame(row))
    assert repairs, "no retransmitted DATA in the capture"
    repaired = {_one(r, sqn_field) for r in repairs}
    naked = set(first_nak)
    assert repaired == naked, f"unasked: {sorted(repaired - naked)}; not repaired: {sorted(naked - repaired)}"
    for row in repairs:
        sqn = _one(row, sqn_field)
        assert _frame(row) > first_nak[sqn], f"frame {_frame(row)}: retransmission of {sqn} before its NAK"
        assert _ints(row["lbmc.sqn"]) == original_lbmc[sqn], f"frame {_frame(row)}: not the original LBMC"
    return originals, repairs


def _assert_sequence_clean(rows: list[Row], prefix: str, repairs: list[Row]) -> None:
    """Sequence analysis: no gap, reordering or duplicate; every RX-flagged DATA is a retransmission."""
    bad = [
        (_frame(r), name, r[f"{prefix}.{name}"])
        for r in rows
        for name in SEQUENCE_PROBLEMS
        if r.get(f"{prefix}.{name}")
    ]
    assert not bad, bad[:10]
    assert all(r.get(f"{prefix}.data_retransmission") for r in repairs)


def _assert_heuristics_recognise(tshark: Tshark, pcap: Path, proto: str) -> None:
    """Without decode-as for the transport, the heuristic (given the test's ports) claims every frame."""
    unclaimed = [
        (i + 1, p) for i, p in enumerate(tshark.protocols(pcap)) if f":{proto}" not in p and ":lbmr" not in p
    ]
    assert not unclaimed, unclaimed[:5]


# -- LBT-RM ----------------------------------------------------------------------------------------------


def test_captured_lbtrm_session_with_loss_decodes_cleanly(run: Run, ports: Ports) -> None:
    topic = "capture/lbtrm/IBM"
    pub = run.context(ports.options(f"context transport_lbtrm_retransmit_rate_limit {RETRANSMIT_LIMIT}"))
    sub = run.context(ports.options(f"receiver transport_lbtrm_nak_suppress_interval {NAK_SUPPRESS_MS}"))
    src = pub.create_source(topic, {"transport": "lbtrm"})
    rec = Recorder()
    sub.create_receiver(topic, rec)
    source_string = src.source_string
    # No connection to wait for: the receiver has joined once it has the session's statistics.
    assert wait_until(lambda: _joined(sub, source_string), WAIT), "the receiver never joined the session"
    assert _send_all(src) == list(range(COUNT))
    assert rec.wait_count(COUNT, timeout=WAIT), (rec.count(), sub.retrieve_transport_stats(source_string))
    receiver_stats = sub.retrieve_transport_stats(source_string)
    _assert_delivered_in_order(rec, source_string, receiver_stats)
    # Idle now: session messages (the first 200 ms after the last datagram).
    assert wait_until(lambda: _engine(src).sms_sent >= 2, WAIT)
    stats = _engine(src)
    assert stats.rxs_sent > 0 and stats.ncf_pckts_sent > 0, stats
    on_wire = (
        stats.msgs_sent
        + stats.rxs_sent
        + stats.ncf_pckts_sent
        + stats.sms_sent
        + receiver_stats.nak_pckts_sent
    )
    assert run.capture.wait_packets(on_wire), (run.capture.packets, on_wire, run.capture.stderr)
    run.close()

    source = SourceString.parse(source_string)
    assert source.port is not None and source.dest_port is not None and source.topic_index is not None
    assert source.session_id is not None and source.group is not None
    nak_ports = (ports.udp_low, ports.udp_low + 7)
    prefs = {
        "lbtrm.mc_address_low": source.group,
        "lbtrm.mc_address_high": source.group,
        "lbtrm.dport_low": str(source.dest_port),
        "lbtrm.dport_high": str(source.dest_port),
        "lbtrm.sport_low": str(nak_ports[0]),
        "lbtrm.sport_high": str(nak_ports[1]),
    }
    lbmr = f"udp.port=={ports.resolver},lbmr"
    tshark = Tshark(
        decode_as=(lbmr, f"udp.port=={source.dest_port},lbtrm", f"udp.port=={source.port},lbtrm"),
        prefs={**prefs, "lbtrm.sequence_analysis": "TRUE"},
        two_pass=True,
    )
    pcap = run.capture.pcap
    rows = tshark.assert_clean(pcap, allowed_expert=ALLOWED_EXPERT, fields=RM_FIELDS)
    _assert_heuristics_recognise(Tshark(decode_as=(lbmr,), prefs=prefs), pcap, "lbtrm")
    rm = [r for r in rows if "lbtrm.hdr.type" in r]
    assert not [r for r in rows if "lbtrm.hdr.type" not in r and ":lbmr" not in r["frame.protocols"][0]]
    # Every packet, the receiver's NAKs included, names the session, on the channel the TIR advertised.
    assert {_one(r, "lbtrm.hdr.session_id") for r in rm} == {source.session_id}
    assert {_one(r, "lbtrm.hdr.ucast_port") for r in rm} == {source.port}
    assert {c for r in rm for c in r.get("lbtrm.channel", [])} == _tir_channels(rows, topic)
    kinds = _by_type(rm, "lbtrm.hdr.type")
    summary = _summary(kinds, RM_NAMES, "lbtrm.data.flags_fec_type.rx")
    print(f"\nLBT-RM capture: {summary}")
    assert set(kinds) == {RM_DATA, RM_SM, RM_NAK, RM_NCF}, summary
    originals, repairs = _check_data_and_repairs(
        kinds[RM_DATA],
        kinds[RM_NAK],
        sqn_field="lbtrm.data.sqn",
        rx_field="lbtrm.data.flags_fec_type.rx",
        nak_field="lbtrm.nak.list.nak",
        tidx=source.topic_index,
        topic=topic,
    )
    naked = {n for r in kinds[RM_NAK] for n in _ints(r["lbtrm.nak.list.nak"])}
    assert {n for r in kinds[RM_NCF] for n in _ints(r["lbtrm.ncf.list.ncf"])} <= naked
    assert {_one(r, "lbtrm.ncf.reason") for r in kinds[RM_NCF]} <= {1, 2}  # NAK ignored, retransmit delay
    # Session messages count on their own, from 0; the last one's leading edge is the last datagram.
    sms = kinds[RM_SM]
    assert [_one(r, "lbtrm.sm.sm_sqn") for r in sms] == list(range(len(sms)))
    assert _one(sms[-1], "lbtrm.sm.lead_sqn") == _one(originals[-1], "lbtrm.data.sqn")
    _assert_sequence_clean(rm, "lbtrm.transport", repairs)


# -- LBT-RU ----------------------------------------------------------------------------------------------


def test_captured_lbtru_session_with_loss_decodes_cleanly(run: Run, ports: Ports) -> None:
    topic = "capture/lbtru/IBM"
    pub = run.context(
        ports.options(
            f"context transport_lbtru_retransmit_rate_limit {RETRANSMIT_LIMIT}",
            "context transport_lbtru_rate_interval 10",
        )
    )
    sub = run.context(
        ports.options(
            f"receiver transport_lbtru_nak_suppress_interval {NAK_SUPPRESS_MS}",
            "receiver transport_lbtru_acknowledgement_interval 100",
        )
    )
    events = SourceEvents()
    src = pub.create_source(topic, {"transport": "lbtru"}, event_callback=events)
    rec = Recorder()
    sub.create_receiver(topic, rec)
    source_string = src.source_string
    assert events.wait(SourceEvent.CONNECT), "the receiver never connected (CREQ, SM SYN)"
    assert _send_all(src) == list(range(COUNT))
    assert rec.wait_count(COUNT, timeout=WAIT), (rec.count(), sub.retrieve_transport_stats(source_string))
    receiver_stats = sub.retrieve_transport_stats(source_string)
    _assert_delivered_in_order(rec, source_string, receiver_stats)
    assert receiver_stats.creqs_sent > 0
    # Idle now: session messages, and an ACK of the complete stream.
    acks = _engine(src).acks_rcved
    assert wait_until(
        lambda: _engine(src).sms_sent >= 3 and _engine(src).acks_rcved > acks,
        WAIT,
    )
    stats = _engine(src)
    assert stats.rxs_sent > 0 and stats.ncf_pckts_sent > 0, stats
    source = SourceString.parse(source_string)
    assert source.port is not None and source.session_id is not None and source.topic_index is not None
    (low, high), (rlow, rhigh) = ports.lbtru_source_ports, ports.lbtru_receiver_ports
    prefs = {
        "lbtru.source_port_low": str(low),
        "lbtru.source_port_high": str(high),
        "lbtru.receiver_port_low": str(rlow),
        "lbtru.receiver_port_high": str(rhigh),
    }
    lbmr = f"udp.port=={ports.resolver},lbmr"
    tshark = Tshark(
        decode_as=(lbmr, f"udp.port=={source.port},lbtru"),
        prefs={**prefs, "lbtru.sequence_analysis": "TRUE"},
        two_pass=True,
    )
    src.close()  # a RST to the receiver: the session's last packet
    assert wait_until(lambda: _captured(tshark, run.capture, f"lbtru.hdr.type == {RU_RST}"), WAIT, 0.2)
    run.close()

    pcap = run.capture.pcap
    rows = tshark.assert_clean(pcap, allowed_expert=ALLOWED_EXPERT, fields=RU_FIELDS)
    _assert_heuristics_recognise(Tshark(decode_as=(lbmr,), prefs=prefs), pcap, "lbtru")
    ru = [r for r in rows if "lbtru.hdr.type" in r]
    assert not [r for r in rows if "lbtru.hdr.type" not in r and ":lbmr" not in r["frame.protocols"][0]]
    kinds = _by_type(ru, "lbtru.hdr.type")
    summary = _summary(kinds, RU_NAMES, "lbtru.hdr.flags.rx")
    print(f"\nLBT-RU capture: {summary}")
    assert set(kinds) == set(RU_NAMES), summary
    # The RST is bare (reason 0, "Default"; wire doc 4.4) and the last LBT-RU packet from the source.
    (rst,) = kinds[RU_RST]
    assert _one(rst, "lbtru.hdr.reason") == 0 and "lbtru.opt_sid.session_id" not in rst
    session = [r for r in ru if r is not rst]
    # Every other packet, both directions, carries the session id and is on one channel and one client:
    # the channel the TIR advertised.
    assert {_one(r, "lbtru.opt_sid.session_id") for r in session} == {source.session_id}
    assert {c for r in session for c in r["lbtru.channel.channel"]} == _tir_channels(rows, topic)
    assert {c for r in session for c in r["lbtru.channel.client"]} == {"1"}
    # The handshake: CREQ (SYN) answered by an SM with SYN, before any DATA.
    first_data = _frame(kinds[RU_DATA][0])
    creqs = [r for r in kinds[RU_CREQ] if _frame(r) < first_data]
    assert creqs and all(_one(r, "lbtru.hdr.request") == 0 for r in creqs)
    syns = [r for r in kinds[RU_SM] if r.get("lbtru.hdr.flags.syn") == ["1"]]
    assert syns and _frame(syns[0]) > _frame(creqs[0]) and _frame(syns[0]) < first_data
    idle_sms = [r for r in kinds[RU_SM] if r.get("lbtru.hdr.flags.syn") != ["1"]]
    assert idle_sms and _frame(idle_sms[0]) > first_data
    originals, repairs = _check_data_and_repairs(
        kinds[RU_DATA],
        kinds[RU_NAK],
        sqn_field="lbtru.data.sqn",
        rx_field="lbtru.hdr.flags.rx",
        nak_field="lbtru.nak.list.nak",
        tidx=source.topic_index,
        topic=topic,
    )
    naked = {n for r in kinds[RU_NAK] for n in _ints(r["lbtru.nak.list.nak"])}
    assert {n for r in kinds[RU_NCF] for n in _ints(r["lbtru.ncf.list.ncf"])} <= naked
    assert {_one(r, "lbtru.ncf.reason") for r in kinds[RU_NCF]} <= {1, 2}  # NAK ignored, retransmit delay
    last = _one(originals[-1], "lbtru.data.sqn")
    assert _one(idle_sms[-1], "lbtru.sm.lead") == last
    assert _one(kinds[RU_ACK][-1], "lbtru.ack.sqn") == last  # the receiver holds everything
    assert _frame(rst) > max(_frame(r) for kind in (RU_DATA, RU_SM, RU_NCF) for r in kinds[kind])
    _assert_sequence_clean(ru, "lbtru.analysis", repairs)
