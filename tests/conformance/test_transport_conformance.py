"""LBT-RM and LBT-RU packets encoded by openum, decoded by tshark (Wireshark's independent dissectors).

Spec: ../shared/wire/lbtrm-lbtru-lbttcp-transports.md sections 1, 3, 4, 8 and 9.  For every record and
option kind of both transports, the test encodes a packet with ``openum.wire.lbtrm`` /
``openum.wire.lbtru``, wraps it with realistic addressing (UM's default ports), and requires:

* a clean decode: no malformed frame, no error/warning expert item beyond those a healthy flow is
  documented to produce (section 8);
* every field tshark decodes equals what was encoded (expectations are derived from the records);
* the packet is recognised by the default heuristics too, without the harness's decode-as rules
  (except for the one kind that deliberately carries an LBT-RM option, which the heuristic refuses).

DATA payloads must be LBMC, because both dissectors hand the payload to LBMC unconditionally
(section 6.3).  The LBMC data messages here are built by hand from lbmc-pdm-srs.md section 2.1 so that
this test does not depend on the LBMC codec.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from openum.wire import lbtrm, lbtru
from openum.wire.lbtrm import (
    FLAG_LATE_JOIN,
    FLAG_MCAST_NAKS,
    FLAG_RX,
    FLAG_UCAST_NAKS,
    NakFormat,
    NcfReason,
    RmData,
    RmNak,
    RmNcf,
    RmOption,
    RmSessionMessage,
)
from openum.wire.lbtru import (
    FLAG_SYN,
    RuAck,
    RuCidOption,
    RuCreq,
    RuData,
    RuNak,
    RuNcf,
    RuRst,
    RuSessionMessage,
    RuSidOption,
    make_options,
)
from tests.conformance.tshark import Tshark, udp_frame, write_pcap

pytestmark = pytest.mark.tshark

# --- addressing (ARCHITECTURE.md 4; spec sections 3.1, 4.1) --------------------------------------

SRC = "10.1.1.1"  # the UM source
RCV = "10.1.1.2"  # a receiver
RM_GROUP, RM_DPORT = "224.10.10.10", 14400
RM_PORT = 14390  # the source's unicast NAK port = UDP source port of its multicast
RM_SID = 0x1A2B3C4D
RM_RCV_PORT = 51000  # a receiver's NAKs come from any port
RU_SPORT, RU_RPORT = 14380, 14360
RU_SID, RU_CID = 0x0BADCAFE, 1
APP = b"hello, UM"

# Expert items a healthy flow produces (section 8): NAK is a Warning by design, so it has to be
# allowed; NCF, RX and "Data RX"/"Data retransmission" are Notes and SM/ACK/CREQ/RST Chats, which
# the harness does not flag, but they are listed so that a severity change in Wireshark does not
# turn a healthy flow red.
HEALTHY_EXPERT = (
    r"^NAK$",  # Warning: one per NAK packet
    r"^NCF (Do not retry|NAK Ignored|Retransmit Delay|NAK Shed)$",  # Note
    r"^RX 0x[0-9a-f]{8}$",  # Note: every LBT-RM DATA with the RX flag
    r"^Data RX$",  # Note: LBT-RM sequence analysis of a retransmission
    r"^Data retransmission$",  # Note: LBT-RU sequence analysis of a retransmission
)


# --- a minimal LBMC data message (lbmc-pdm-srs.md 2.1) -------------------------------------------

_LBMC_DATA = struct.Struct(">BBHII")  # ver/type (0 = Message), next_hdr (0 = data), msglen, tidx, sqn


def lbmc_data(tidx: int, sqn: int, app: bytes = APP) -> bytes:
    """One LBMC data message: 12-byte header (msglen counts it) then the application bytes."""
    return _LBMC_DATA.pack(0x00, 0x00, _LBMC_DATA.size + len(app), tidx, sqn) + app


# --- frames with realistic addressing ------------------------------------------------------------


def rm_multicast(payload: bytes) -> bytes:
    return udp_frame(payload, src=SRC, dst=RM_GROUP, sport=RM_PORT, dport=RM_DPORT)


def rm_nak_frame(payload: bytes) -> bytes:
    return udp_frame(payload, src=RCV, dst=SRC, sport=RM_RCV_PORT, dport=RM_PORT)


def ru_from_source(payload: bytes) -> bytes:
    return udp_frame(payload, src=SRC, dst=RCV, sport=RU_SPORT, dport=RU_RPORT)


def ru_from_receiver(payload: bytes) -> bytes:
    return udp_frame(payload, src=RCV, dst=SRC, sport=RU_RPORT, dport=RU_SPORT)


# --- expectations derived from the records -------------------------------------------------------

Expect = dict[str, list[int | str]]


def _lbmc_expect(messages: Sequence[tuple[int, int, bytes]]) -> Expect:
    if not messages:
        return {"lbmc.msglen": []}
    return {
        "lbmc.type": [0] * len(messages),
        "lbmc.tidx": [t for t, _, _ in messages],
        "lbmc.sqn": [s for _, s, _ in messages],
        "lbmc.msglen": [12 + len(a) for _, _, a in messages],
        "data.data": [a.hex() for _, _, a in messages],
    }


def rm_expect(rec: lbtrm.RmRecord) -> Expect:
    first = rec.options[0].kind if rec.options else 0
    exp: Expect = {
        "lbtrm.hdr.ver": [0],
        "lbtrm.hdr.next_hdr": [first],
        "lbtrm.hdr.ucast_port": [rec.ucast_port],
        "lbtrm.hdr.session_id": [rec.session_id],
    }
    if isinstance(rec, RmData):
        exp |= {
            "lbtrm.hdr.type": [lbtrm.TYPE_DATA],
            "lbtrm.data.sqn": [rec.sqn],
            "lbtrm.data.trail_sqn": [rec.trail_sqn],
            "lbtrm.data.flags_fec_type": [rec.flags | rec.fec_type],
            "lbtrm.data.flags_fec_type.ucast_naks": [int(bool(rec.flags & FLAG_UCAST_NAKS))],
            "lbtrm.data.flags_fec_type.rx": [int(rec.retransmission)],
            "lbtrm.data.flags_tgsz": [rec.tgsz],
            "lbtrm.data.fec_symbol": [rec.fec_symbol],
        }
    elif isinstance(rec, RmSessionMessage):
        exp |= {
            "lbtrm.hdr.type": [lbtrm.TYPE_SM],
            "lbtrm.sm.sm_sqn": [rec.sm_sqn],
            "lbtrm.sm.lead_sqn": [rec.lead_sqn],
            "lbtrm.sm.trail_sqn": [rec.trail_sqn],
            "lbtrm.sm.flags_fec_type": [rec.flags | rec.fec_type],
            "lbtrm.sm.flags_fec_type.ucast_naks": [int(bool(rec.flags & FLAG_UCAST_NAKS))],
            "lbtrm.sm.flags_tgsz": [rec.tgsz],
            "lbtrm.sm.reserved": [0],
        }
    elif isinstance(rec, RmNak):
        exp |= {
            "lbtrm.hdr.type": [lbtrm.TYPE_NAK],
            "lbtrm.nak.num_naks": [len(rec.sqns)],
            "lbtrm.nak.format": [rec.format],
            "lbtrm.nak.list.nak": list(rec.sqns),
        }
    else:
        exp |= {
            "lbtrm.hdr.type": [lbtrm.TYPE_NCF],
            "lbtrm.ncf.trail_sqn": [rec.trail_sqn],
            "lbtrm.ncf.num_ncfs": [len(rec.sqns)],
            "lbtrm.ncf.reserved": [0],
            "lbtrm.ncf.reason": [rec.reason],
            "lbtrm.ncf.format": [rec.format],
            "lbtrm.ncf.list.ncf": list(rec.sqns),
        }
    return exp


def ru_expect(rec: lbtru.RuRecord) -> Expect:
    exp: Expect = {
        "lbtru.hdr.ver": [0],
        "lbtru.hdr.next_hdr": [rec.options[0].kind if rec.options else 0],
        "lbtru.opt_sid.session_id": [o.session_id for o in rec.options if isinstance(o, RuSidOption)],
        "lbtru.opt_cid.client_id": [o.client_id for o in rec.options if isinstance(o, RuCidOption)],
    }
    # each option's next_hdr names the following option (0 = end of chain)
    kinds = [o.kind for o in rec.options] + [0]
    for i, opt in enumerate(rec.options):
        name = "lbtru.opt_sid" if isinstance(opt, RuSidOption) else "lbtru.opt_cid"
        exp.setdefault(f"{name}.next_hdr", []).append(kinds[i + 1])
        exp.setdefault(f"{name}.hdr_len", []).append(8)
    if isinstance(rec, RuData):
        exp |= {
            "lbtru.hdr.type": [lbtru.TYPE_DATA],
            "lbtru.hdr.flags": [rec.flags],
            "lbtru.hdr.flags.rx": [int(rec.retransmission)],
            "lbtru.data.sqn": [rec.sqn],
            "lbtru.data.trail": [rec.trail_sqn],
        }
    elif isinstance(rec, RuSessionMessage):
        exp |= {
            "lbtru.hdr.type": [lbtru.TYPE_SM],
            "lbtru.hdr.flags": [rec.flags],
            "lbtru.hdr.flags.syn": [int(rec.syn)],
            "lbtru.sm.sqn": [rec.sm_sqn],
            "lbtru.sm.lead": [rec.lead_sqn],
            "lbtru.sm.trail": [rec.trail_sqn],
        }
    elif isinstance(rec, RuNak):
        exp |= {
            "lbtru.hdr.type": [lbtru.TYPE_NAK],
            "lbtru.hdr.res": [0],
            "lbtru.nak.num": [len(rec.sqns)],
            "lbtru.nak.format": [rec.format],
            "lbtru.nak.list.nak": list(rec.sqns),
        }
    elif isinstance(rec, RuNcf):
        exp |= {
            "lbtru.hdr.type": [lbtru.TYPE_NCF],
            "lbtru.hdr.res": [0],
            "lbtru.ncf.trail": [rec.trail_sqn],
            "lbtru.ncf.num": [len(rec.sqns)],
            "lbtru.ncf.reason": [rec.reason],
            "lbtru.ncf.format": [rec.format],
            "lbtru.ncf.list.ncf": list(rec.sqns),
        }
    elif isinstance(rec, RuAck):
        exp |= {"lbtru.hdr.type": [lbtru.TYPE_ACK], "lbtru.hdr.res": [0], "lbtru.ack.sqn": [rec.ack_sqn]}
    elif isinstance(rec, RuCreq):
        exp |= {"lbtru.hdr.type": [lbtru.TYPE_CREQ], "lbtru.hdr.request": [rec.request]}
    else:
        exp |= {"lbtru.hdr.type": [lbtru.TYPE_RST], "lbtru.hdr.reason": [rec.reason]}
    return exp


def _norm(value: str, name: str = "") -> int | str:
    if name == "data.data":  # hex bytes, kept as text
        return value
    if value in ("True", "False"):
        return int(value == "True")
    try:
        return int(value, 0)
    except ValueError:
        return value


# --- the cases -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """Frames of a short realistic flow; the last frame is the packet under test."""

    proto: str  # "lbtrm" or "lbtru"
    frames: tuple[bytes, ...]
    expect: Expect
    heuristic: bool = True  # also recognised without decode-as
    expert: tuple[str, ...] = ()  # messages the packet under test must raise
    same_channel_as_first: bool = False
    extra: Expect = field(default_factory=dict)


def _rm_data(sqn: int, **kw: object) -> RmData:
    """A DATA carrying one LBMC message whose topic sqn equals the transport sqn (one topic)."""
    fields: dict[str, object] = {"payload": lbmc_data(1, sqn), "flags": FLAG_UCAST_NAKS} | kw
    return RmData(RM_PORT, RM_SID, sqn, 0, **fields)  # type: ignore[arg-type]


def _rm_case(target: lbtrm.RmRecord, *, lbmc: Sequence[tuple[int, int, bytes]] = (), **kw: object) -> Case:
    """Source's DATA 0..2 first (so the session exists, as Wireshark needs for NAKs), then ``target``."""
    wire = lbtrm.encode(target)
    assert lbtrm.decode(wire) == target  # what tshark sees is what openum reads back
    preamble = tuple(rm_multicast(lbtrm.encode(_rm_data(s))) for s in range(3))
    frame = rm_nak_frame(wire) if isinstance(target, RmNak) else rm_multicast(wire)
    expect = rm_expect(target) | (_lbmc_expect(lbmc) if isinstance(target, RmData) else {})
    return Case("lbtrm", (*preamble, frame), expect, **kw)  # type: ignore[arg-type]


def _rm_hot_path_case() -> Case:
    payload = lbmc_data(1, 3)
    buf = bytearray(64)
    n = lbtrm.encode_data_into(
        buf, 0, 3, 1, FLAG_UCAST_NAKS, ucast_port=RM_PORT, session_id=RM_SID, payload_len=len(payload)
    )
    buf[n : n + len(payload)] = payload
    wire = bytes(buf[: n + len(payload)])
    assert lbtrm.decode_data_header(wire) == (RM_PORT, RM_SID, 3, 1, FLAG_UCAST_NAKS, n)
    preamble = tuple(rm_multicast(lbtrm.encode(_rm_data(s))) for s in range(3))
    expect = rm_expect(RmData(RM_PORT, RM_SID, 3, 1, payload, FLAG_UCAST_NAKS)) | _lbmc_expect([(1, 3, APP)])
    return Case("lbtrm", (*preamble, rm_multicast(wire)), expect)


SID_OPTS = make_options(RU_SID)


def _ru_case(target: lbtru.RuRecord, *, lbmc: Sequence[tuple[int, int, bytes]] = (), **kw: object) -> Case:
    """A CREQ (SYN) from the receiver and the source's SM SYN answer first, then ``target``."""
    wire = lbtru.encode(target)
    assert lbtru.decode(wire) == target
    preamble = (
        ru_from_receiver(lbtru.encode(RuCreq(lbtru.CREQ_SYN, SID_OPTS))),
        ru_from_source(lbtru.encode(RuSessionMessage(0, 0, 0, FLAG_SYN, make_options(RU_SID, RU_CID)))),
    )
    from_receiver = isinstance(target, RuNak | RuAck | RuCreq)
    frame = ru_from_receiver(wire) if from_receiver else ru_from_source(wire)
    expect = ru_expect(target) | (_lbmc_expect(lbmc) if isinstance(target, RuData) else {})
    if target.session_id == RU_SID:
        # every SID-carrying packet, in both directions, lands on the one transport and client 1
        kw.setdefault("same_channel_as_first", True)
        expect |= {"lbtru.channel.client": [1]}
    return Case("lbtru", (*preamble, frame), expect, **kw)  # type: ignore[arg-type]


def _ru_hot_path_case() -> Case:
    payload = lbmc_data(7, 4)
    buf = bytearray(64)
    n = lbtru.encode_data_into(buf, 0, 4, 0, session_id=RU_SID, client_id=RU_CID, payload_len=len(payload))
    buf[n : n + len(payload)] = payload
    wire = bytes(buf[: n + len(payload)])
    assert lbtru.decode_data_header(wire) == (0, 4, 0, RU_SID, n)
    case = _ru_case(RuData(4, 0, payload, 0, make_options(RU_SID, RU_CID)), lbmc=[(7, 4, APP)])
    assert case.frames[-1] == ru_from_source(wire)  # byte-identical to the record encoder
    return case


def _cases() -> dict[str, Case]:
    two_msgs = lbmc_data(1, 3) + lbmc_data(2, 0, b"batched!")
    return {
        # LBT-RM (section 3)
        "rm-data": _rm_case(_rm_data(3), lbmc=[(1, 3, APP)]),
        "rm-data-hot-path": _rm_hot_path_case(),
        "rm-data-rx": _rm_case(
            _rm_data(1, flags=FLAG_UCAST_NAKS | FLAG_RX), lbmc=[(1, 1, APP)], expert=("RX 0x00000001",)
        ),
        "rm-data-flags-fec": _rm_case(
            _rm_data(3, flags=FLAG_MCAST_NAKS | FLAG_LATE_JOIN, fec_type=1, tgsz=4, fec_symbol=0x0102),
            lbmc=[(1, 3, APP)],
        ),
        "rm-data-batch": _rm_case(_rm_data(3, payload=two_msgs), lbmc=[(1, 3, APP), (2, 0, b"batched!")]),
        "rm-data-empty": _rm_case(_rm_data(3, payload=b"")),
        # Options are never sent by openum on LBT-RM: the heuristic refuses next_hdr != 0, so only
        # decode-as finds this one (section 3.7).  It shows that the chain is laid out as Wireshark
        # walks it: LBMC is found right after the option.
        "rm-data-option": _rm_case(
            _rm_data(3, options=(RmOption(7, b"opt!"),)), lbmc=[(1, 3, APP)], heuristic=False
        ),
        "rm-sm": _rm_case(RmSessionMessage(RM_PORT, RM_SID, 0, 2, 0, FLAG_UCAST_NAKS), expert=("SM",)),
        "rm-nak": _rm_case(RmNak(RM_PORT, RM_SID, (1, 2)), expert=("NAK",), same_channel_as_first=True),
        "rm-nak-parity": _rm_case(
            RmNak(RM_PORT, RM_SID, (0x10000, 7), NakFormat.PARITY), same_channel_as_first=True
        ),
        **{
            f"rm-ncf-{reason.name.lower().replace('_', '-')}": _rm_case(
                RmNcf(RM_PORT, RM_SID, 0, (1, 2), reason), same_channel_as_first=True
            )
            for reason in NcfReason
        },
        # LBT-RU (section 4)
        "ru-creq": _ru_case(RuCreq(lbtru.CREQ_SYN, SID_OPTS), expert=("CREQ SYN",)),
        "ru-sm-syn-sid-cid": _ru_case(
            RuSessionMessage(0, 0, 0, FLAG_SYN, make_options(RU_SID, RU_CID)), expert=("SM SYN",)
        ),
        "ru-sm": _ru_case(RuSessionMessage(1, 2, 0, 0, SID_OPTS), expert=("SM",)),
        "ru-data": _ru_case(RuData(0, 0, lbmc_data(7, 0), 0, SID_OPTS), lbmc=[(7, 0, APP)]),
        "ru-data-hot-path-cid": _ru_hot_path_case(),
        "ru-data-rx": _ru_case(RuData(0, 0, lbmc_data(7, 0), lbtru.FLAG_RX, SID_OPTS), lbmc=[(7, 0, APP)]),
        "ru-data-cid-first": _ru_case(
            RuData(1, 0, lbmc_data(7, 1), 0, (RuCidOption(RU_CID), RuSidOption(RU_SID))), lbmc=[(7, 1, APP)]
        ),
        "ru-nak": _ru_case(RuNak((2, 3), NakFormat.SELECTIVE, SID_OPTS), expert=("NAK",)),
        "ru-ncf": _ru_case(RuNcf(0, (2, 3), NcfReason.NAK_IGNORED, 0, SID_OPTS), expert=("NCF NAK Ignored",)),
        "ru-ack": _ru_case(RuAck(3, SID_OPTS), expert=("ACK",)),
        # RST goes bare: Wireshark 4.0 mis-parses an RST with options (section 4.4)
        "ru-rst": _ru_case(RuRst(lbtru.RST_DEFAULT), expert=("RST Default",)),
    }


CASES = _cases()


@pytest.mark.parametrize("kind", list(CASES))
def test_transport_packet_conformance(kind: str, tshark: Tshark, pcap_dir: Path) -> None:
    case = CASES[kind]
    pcap = write_pcap(pcap_dir / f"{kind}.pcap", case.frames)

    # 1. clean decode: NAK warnings and NCF/RX notes are normal for a healthy flow (section 8)
    names = sorted(
        {*case.expect, "frame.protocols", "_ws.expert.message", f"{case.proto}.channel"}
        | ({"lbtru.channel.channel"} if case.proto == "lbtru" else set())
    )
    rows = tshark.assert_clean(pcap, allowed_expert=HEALTHY_EXPERT, fields=names)

    # 2. the packet under test decodes to exactly what was encoded
    assert len(rows) == len(case.frames)
    row = rows[-1]
    assert f":{case.proto}" in row["frame.protocols"][0]
    got = {name: [_norm(v, name) for v in row.get(name, [])] for name in case.expect}
    assert got == case.expect
    for message in case.expert:
        assert message in row.get("_ws.expert.message", []), row.get("_ws.expert.message")
    if case.same_channel_as_first:
        chan = "lbtrm.channel" if case.proto == "lbtrm" else "lbtru.channel.channel"
        assert row.get(chan), row
        assert row.get(chan) == rows[0].get(chan)

    # 3. UM's default ports are enough: the default heuristics claim every frame (no decode-as)
    if case.heuristic:
        protocols = Tshark(decode_as=()).protocols(pcap)
        assert all(f":{case.proto}" in p for p in protocols), protocols


def test_enough_distinct_kinds() -> None:
    assert len(CASES) >= 14
    assert {c.proto for c in CASES.values()} == {"lbtrm", "lbtru"}


# --- sequence analysis (two passes): a retransmission is recognised -------------------------------


def _rm_flow(rx_flag: int) -> list[bytes]:
    """DATA 0-4, SM, NAK for 2 and 3, NCF, the two retransmissions, DATA 5, SM."""
    frames = [rm_multicast(lbtrm.encode(_rm_data(s))) for s in range(5)]  # frames 1-5
    frames.append(rm_multicast(lbtrm.encode(RmSessionMessage(RM_PORT, RM_SID, 0, 4, 0, FLAG_UCAST_NAKS))))
    frames.append(rm_nak_frame(lbtrm.encode(RmNak(RM_PORT, RM_SID, (2, 3)))))  # frame 7
    frames.append(rm_multicast(lbtrm.encode(RmNcf(RM_PORT, RM_SID, 0, (2, 3), NcfReason.RETRANSMIT_DELAY))))
    for s in (2, 3):  # frames 9, 10: the original datagrams re-sent, same sqn and LBMC bytes
        frames.append(rm_multicast(lbtrm.encode(_rm_data(s, flags=FLAG_UCAST_NAKS | rx_flag))))
    frames.append(rm_multicast(lbtrm.encode(_rm_data(5))))
    frames.append(rm_multicast(lbtrm.encode(RmSessionMessage(RM_PORT, RM_SID, 1, 5, 0, FLAG_UCAST_NAKS))))
    return frames


ANALYSIS_FIELDS = [
    "frame.number",
    "lbtrm.data.sqn",
    "lbtrm.transport.data_retransmission",
    "lbtrm.transport.sqn.frame",
    "lbtrm.transport.data_duplicate",
    "_ws.expert.message",
]


def test_lbtrm_sequence_analysis_recognises_retransmission(pcap_dir: Path, tshark_bin: str) -> None:
    analysis = Tshark(two_pass=True, prefs={"lbtrm.sequence_analysis": "TRUE"})
    pcap = write_pcap(pcap_dir / "lbtrm-rx-flow.pcap", _rm_flow(FLAG_RX))
    rows = analysis.assert_clean(pcap, allowed_expert=HEALTHY_EXPERT, fields=ANALYSIS_FIELDS)
    assert len(rows) == 12
    for num in (9, 10):
        row = rows[num - 1]
        assert _norm(row["lbtrm.transport.data_retransmission"][0]) == 1
        assert "Data RX" in row["_ws.expert.message"]
        # the analysis links the retransmission to the original frame of the same sqn (3 and 4)
        original = _norm(row["lbtrm.data.sqn"][0])
        assert isinstance(original, int)
        assert [_norm(f) for f in row["lbtrm.transport.sqn.frame"]] == [original + 1]
    for row in rows[:8] + rows[10:]:
        assert "lbtrm.transport.data_retransmission" not in row
    messages = [m for row in rows for m in row.get("_ws.expert.message", [])]
    assert not [m for m in messages if "gap" in m or "Duplicate" in m or "out of order" in m], messages

    # Control: the same flow with the RX flag left off is reported as out-of-order duplicates, so
    # the flag openum sets is what makes the retransmissions healthy.
    bad = write_pcap(pcap_dir / "lbtrm-no-rx-flag.pcap", _rm_flow(0))
    bad_rows = analysis.fields(bad, ANALYSIS_FIELDS)
    assert "Duplicate data" in bad_rows[8].get("_ws.expert.message", [])
    assert "lbtrm.transport.data_retransmission" not in bad_rows[8]


def test_lbtru_sequence_analysis_recognises_retransmission(pcap_dir: Path, tshark_bin: str) -> None:
    analysis = Tshark(two_pass=True, prefs={"lbtru.sequence_analysis": "TRUE"})
    frames = [
        ru_from_receiver(lbtru.encode(RuCreq(lbtru.CREQ_SYN, SID_OPTS))),
        ru_from_source(lbtru.encode(RuSessionMessage(0, 0, 0, FLAG_SYN, make_options(RU_SID, RU_CID)))),
        *(ru_from_source(lbtru.encode(RuData(s, 0, lbmc_data(7, s), 0, SID_OPTS))) for s in range(4)),
        ru_from_receiver(lbtru.encode(RuNak((2,), 0, SID_OPTS))),  # frame 7
        ru_from_source(lbtru.encode(RuNcf(0, (2,), NcfReason.RETRANSMIT_DELAY, 0, SID_OPTS))),
        ru_from_source(lbtru.encode(RuData(2, 0, lbmc_data(7, 2), lbtru.FLAG_RX, SID_OPTS))),  # frame 9
        ru_from_receiver(lbtru.encode(RuAck(3, SID_OPTS))),
        ru_from_source(lbtru.encode(RuSessionMessage(1, 3, 0, 0, SID_OPTS))),
    ]
    pcap = write_pcap(pcap_dir / "lbtru-rx-flow.pcap", frames)
    rows = analysis.assert_clean(
        pcap,
        allowed_expert=HEALTHY_EXPERT,
        fields=["lbtru.analysis.data_retransmission", "lbtru.analysis.sqn.frame", "_ws.expert.message"],
    )
    assert len(rows) == 11
    assert _norm(rows[8]["lbtru.analysis.data_retransmission"][0]) == 1
    assert "Data retransmission" in rows[8]["_ws.expert.message"]
    assert [_norm(f) for f in rows[8]["lbtru.analysis.sqn.frame"]] == [5]  # DATA sqn 2 was frame 5
    assert sum("lbtru.analysis.data_retransmission" in r for r in rows) == 1
    messages = [m for row in rows for m in row.get("_ws.expert.message", [])]
    assert not [m for m in messages if "gap" in m or "Duplicate" in m or "out of order" in m], messages


# --- documented pitfalls that the codec's conventions avoid (section 1.5) ------------------------


def test_sid_option_keeps_wireguard_heuristic_away(pcap_dir: Path, tshark_bin: str) -> None:
    """A 32-byte option-less NCF looks like a WireGuard keepalive; with the SID it is LBT-RU."""
    bare = RuNcf(0, (1, 2, 3, 4, 5), NcfReason.RETRANSMIT_DELAY)
    with_sid = RuNcf(0, (1, 2, 3, 4, 5), NcfReason.RETRANSMIT_DELAY, 0, SID_OPTS)
    pcap = write_pcap(
        pcap_dir / "wg-pitfall.pcap",
        [ru_from_source(lbtru.encode(bare)), ru_from_source(lbtru.encode(with_sid))],
    )
    protocols = Tshark(decode_as=()).protocols(pcap)
    assert ":wg" in protocols[0]  # the pitfall is real ...
    assert ":lbtru" in protocols[1]  # ... and the SID option avoids it


@pytest.mark.parametrize("name", ["rm", "ru"])
def test_harness_flags_a_broken_packet(name: str, tshark: Tshark, pcap_dir: Path) -> None:
    """The clean-decode gate can fail: a DATA whose payload is not LBMC is malformed (section 6.3)."""
    junk = b"\xde\xad\xbe\xef" * 4
    frame = (
        rm_multicast(lbtrm.encode(_rm_data(0, payload=junk)))
        if name == "rm"
        else ru_from_source(lbtru.encode(RuData(0, 0, junk, 0, SID_OPTS)))
    )
    pcap = write_pcap(pcap_dir / f"{name}-junk.pcap", [frame])
    # both forms of the gate (fields as JSON, the whole decode as PDML) see all three signs: the
    # frame's malformed mark, its error item, and the expert tap's Errors section
    for gate in (tshark.assert_clean, tshark.assert_clean_pdml):
        with pytest.raises(AssertionError) as failure:
            gate(pcap, allowed_expert=HEALTHY_EXPERT)
        report = str(failure.value)
        assert "frame 1: malformed (eth:ethertype:ip:udp:lbt" in report
        assert "frame 1: expert 0x800000: Invalid LBMC type" in report
        assert "expert tap Errors: Invalid LBMC type" in report
