"""LBT-RU codec: the verified packets of the transport spec (section 9.2), round trips, fuzzing.

Spec: ../shared/wire/lbtrm-lbtru-lbttcp-transports.md sections 4 and 9.2.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openum.wire import lbtru
from openum.wire._common import WireError
from openum.wire.lbtru import (
    CREQ_SYN,
    FLAG_RX,
    FLAG_SYN,
    RST_DEFAULT,
    NakFormat,
    NcfReason,
    RuAck,
    RuCidOption,
    RuCreq,
    RuData,
    RuNak,
    RuNcf,
    RuRst,
    RuSessionMessage,
    RuSidOption,
    RuUnknownOption,
    make_options,
)

SID = 0x0BADCAFE
SID_OPT = (RuSidOption(SID),)
LBMC_T7 = bytes.fromhex("000000150000000700000000") + b"hello, UM"  # LBMC data msg, tidx 7, sqn 0
LBMC_T7_SQN2 = bytes.fromhex("000000150000000700000002") + b"hello, UM"


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace("|", " "))


# Section 9.2, verbatim.
CREQ_HEX = h("06 01 00 00 | 00 08 00 00 0b ad ca fe")
SM_SYN_HEX = h(
    "02 01 80 00 | 00 00 00 00 | 00 00 00 00 | 00 00 00 00 | 02 08 00 00 0b ad ca fe | "
    "00 08 00 00 00 00 00 01"
)
DATA_HEX = h(
    "00 01 00 00 | 00 00 00 00 | 00 00 00 00 | 00 08 00 00 0b ad ca fe | "
    "00 00 00 15 00 00 00 07 00 00 00 00 68 65 6c 6c 6f 2c 20 55 4d"
)
NAK_HEX = h("03 01 00 00 00 01 00 00 00 00 00 02 00 08 00 00 0b ad ca fe")
NCF_HEX = h("04 01 00 00 00 00 00 00 00 01 00 20 00 00 00 02 00 08 00 00 0b ad ca fe")
RX_HEX = h("00 01 40 00 00 00 00 02 00 00 00 00 00 08 00 00 0b ad ca fe") + LBMC_T7_SQN2
ACK_HEX = h("05 01 00 00 00 00 00 03 00 08 00 00 0b ad ca fe")
SM_HEX = h("02 01 00 00 00 00 00 01 00 00 00 03 00 00 00 00 00 08 00 00 0b ad ca fe")
RST_HEX = h("07 00 00 00")
RST_SID_HEX = h("07 01 00 00 00 08 00 00 0b ad ca fe")  # the quirk packet: do not send

VERIFIED = {
    "creq": CREQ_HEX,
    "sm-syn": SM_SYN_HEX,
    "data": DATA_HEX,
    "nak": NAK_HEX,
    "ncf": NCF_HEX,
    "rx": RX_HEX,
    "ack": ACK_HEX,
    "sm": SM_HEX,
    "rst": RST_HEX,
}
EXPECTED: dict[str, lbtru.RuRecord] = {
    "creq": RuCreq(CREQ_SYN, SID_OPT),
    "sm-syn": RuSessionMessage(0, 0, 0, FLAG_SYN, (RuSidOption(SID), RuCidOption(1))),
    "data": RuData(0, 0, LBMC_T7, 0, SID_OPT),
    "nak": RuNak((2,), NakFormat.SELECTIVE, SID_OPT),
    "ncf": RuNcf(0, (2,), NcfReason.RETRANSMIT_DELAY, NakFormat.SELECTIVE, SID_OPT),
    "rx": RuData(2, 0, LBMC_T7_SQN2, FLAG_RX, SID_OPT),
    "ack": RuAck(3, SID_OPT),
    "sm": RuSessionMessage(1, 3, 0, 0, SID_OPT),
    "rst": RuRst(RST_DEFAULT),
}
RECORD_TYPES = (RuData, RuSessionMessage, RuNak, RuNcf, RuAck, RuCreq, RuRst)


# --- the verified packets ------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(VERIFIED))
def test_verified_packet_decodes_exactly(name: str) -> None:
    rec = lbtru.decode(VERIFIED[name])
    assert rec == EXPECTED[name]
    assert type(rec) is type(EXPECTED[name])


@pytest.mark.parametrize("name", list(VERIFIED))
def test_verified_packet_encodes_byte_for_byte(name: str) -> None:
    assert lbtru.encode(EXPECTED[name]) == VERIFIED[name]


def test_verified_field_values() -> None:
    creq = lbtru.decode(CREQ_HEX)
    assert isinstance(creq, RuCreq)
    assert (creq.request, creq.session_id, creq.client_id) == (0, 0x0BADCAFE, None)
    sm = lbtru.decode(SM_SYN_HEX)
    assert isinstance(sm, RuSessionMessage)
    assert (sm.syn, sm.flags, sm.session_id, sm.client_id) == (True, 0x8000, 0x0BADCAFE, 1)
    data = lbtru.decode(DATA_HEX)
    assert isinstance(data, RuData)
    assert (data.sqn, data.trail_sqn, data.retransmission, data.session_id) == (0, 0, False, SID)
    assert bytes(data.payload) == LBMC_T7
    rx = lbtru.decode(RX_HEX)
    assert isinstance(rx, RuData)
    assert (rx.sqn, rx.flags, rx.retransmission) == (2, 0x4000, True)
    ack = lbtru.decode(ACK_HEX)
    assert isinstance(ack, RuAck)
    assert ack.ack_sqn == 3
    ncf = lbtru.decode(NCF_HEX)
    assert isinstance(ncf, RuNcf)
    assert (ncf.trail_sqn, ncf.sqns, ncf.reason, ncf.format) == (0, (2,), 2, 0)
    rst = lbtru.decode(RST_HEX)
    assert isinstance(rst, RuRst)
    assert (rst.reason, rst.options, rst.session_id) == (0, (), None)


def test_data_payload_is_a_zero_copy_slice() -> None:
    buf = bytearray(DATA_HEX)
    rec = lbtru.decode(memoryview(buf))
    assert isinstance(rec, RuData)
    assert isinstance(rec.payload, memoryview)
    assert rec.payload.obj is buf
    buf[-1] = ord("!")
    assert bytes(rec.payload[-2:]) == b"U!"


def test_rst_with_sid_decodes_at_the_logical_offset() -> None:
    # Wireshark 4.0 mis-parses this packet (section 4.4); we read the option where it is.
    rec = lbtru.decode(RST_SID_HEX)
    assert rec == RuRst(0, SID_OPT)


def test_packet_type_dispatch() -> None:
    assert [lbtru.packet_type(p) for p in VERIFIED.values()] == [6, 2, 0, 3, 4, 0, 5, 2, 7]


def test_make_options() -> None:
    assert make_options(SID) == SID_OPT
    assert make_options(SID, 1) == (RuSidOption(SID), RuCidOption(1))
    assert make_options() == ()


# --- the hot path --------------------------------------------------------------------------------


def test_encode_data_into_matches_the_verified_packets() -> None:
    buf = bytearray(64)
    n = lbtru.encode_data_into(buf, 5, 2, 0, FLAG_RX, session_id=SID, payload_len=len(LBMC_T7_SQN2))
    assert n == 20
    buf[5 + n : 5 + n + len(LBMC_T7_SQN2)] = LBMC_T7_SQN2
    assert bytes(buf[5 : 5 + n + len(LBMC_T7_SQN2)]) == RX_HEX


@pytest.mark.parametrize(("sid", "cid", "expected_len"), [(SID, None, 20), (SID, 9, 28), (None, None, 12)])
def test_encode_data_into_option_variants(sid: int | None, cid: int | None, expected_len: int) -> None:
    buf = bytearray(expected_len + 3)
    n = lbtru.encode_data_into(buf, 0, 7, 1, session_id=sid, client_id=cid, payload_len=3)
    assert n == expected_len
    buf[n:] = b"abc"
    assert lbtru.decode(buf) == RuData(7, 1, b"abc", 0, make_options(sid, cid))
    assert lbtru.decode_data_header(buf) == (0, 7, 1, sid, expected_len)


@pytest.mark.parametrize(
    ("size", "kwargs"),
    [
        (19, {"session_id": SID}),
        (30, {"session_id": SID, "payload_len": 11}),
        (40, {"session_id": None, "client_id": 1}),
        (40, {"session_id": 1 << 32}),
        (40, {"session_id": SID, "client_id": -1}),
        (40, {"session_id": SID, "flags": 1 << 16}),
        (40, {"session_id": SID, "sqn": -1}),
    ],
)
def test_encode_data_into_refuses_with_wire_error(size: int, kwargs: dict[str, int | None]) -> None:
    args: dict[str, int | None] = {"sqn": 0, "trail_sqn": 0} | kwargs
    with pytest.raises(WireError):
        lbtru.encode_data_into(bytearray(size), 0, **args)  # type: ignore[arg-type]


@given(
    sid=st.one_of(st.none(), st.integers(0, 0xFFFFFFFF)),
    sqn=st.integers(0, 0xFFFFFFFF),
    trail=st.integers(0, 0xFFFFFFFF),
)
def test_data_header_packer_writes_what_encode_data_into_writes(
    sid: int | None, sqn: int, trail: int
) -> None:
    buf = bytearray(lbtru.DATA_HEADER_LEN + (8 if sid is not None else 0))
    lbtru.encode_data_into(buf, 0, sqn, trail, session_id=sid)
    assert lbtru.data_header_packer(sid)(sqn, trail) == bytes(buf)


def test_data_header_packer_matches_the_verified_packet() -> None:
    header = lbtru.data_header_packer(SID)(0, 0)
    assert header + DATA_HEX[20:] == DATA_HEX


def test_data_header_packer_refuses_a_bad_session_id() -> None:
    with pytest.raises(WireError):
        lbtru.data_header_packer(1 << 32)


def test_decode_data_header_paths() -> None:
    assert lbtru.decode_data_header(DATA_HEX) == (0, 0, 0, SID, 20)
    assert lbtru.decode_data_header(RX_HEX) == (FLAG_RX, 2, 0, SID, 20)
    # slow path: CID first, then SID, then an unknown option
    rec = RuData(4, 1, b"xyz", 0, (RuCidOption(3), RuSidOption(SID), RuUnknownOption(9, b"ab")))
    wire = lbtru.encode(rec)
    assert lbtru.decode_data_header(wire) == (0, 4, 1, SID, len(wire) - 3)
    with pytest.raises(WireError):
        lbtru.decode_data_header(ACK_HEX)
    with pytest.raises(WireError):
        lbtru.decode_data_header(DATA_HEX[:11])
    with pytest.raises(WireError):
        lbtru.decode_data_header(DATA_HEX[:18])  # SID option cut short


# --- options -------------------------------------------------------------------------------------


def test_unknown_options_are_skipped_by_length() -> None:
    unknown = bytes([1, 10, 0x80, 0]) + b"secret"  # type 0x33, then the SID
    sid = bytes([0, 8, 0, 0]) + SID.to_bytes(4, "big")
    wire = bytes([0, 0x33, 0, 0]) + bytes(8) + unknown + sid + LBMC_T7
    rec = lbtru.decode(wire)
    assert isinstance(rec, RuData)
    assert rec.options == (RuUnknownOption(0x33, b"secret", 0x8000), RuSidOption(SID))
    assert rec.session_id == SID
    assert bytes(rec.payload) == LBMC_T7
    assert lbtru.encode(rec) == wire


def test_sid_option_longer_than_8_is_accepted_and_skipped() -> None:
    wire = bytes([5, 1, 0, 0, 0, 0, 0, 3, 0, 12, 0, 0]) + SID.to_bytes(4, "big") + b"pad!"
    rec = lbtru.decode(wire)
    assert rec == RuAck(3, SID_OPT)


@pytest.mark.parametrize("hdr_len", [0, 1, 3, 4, 7, 13])
def test_bad_option_length_raises(hdr_len: int) -> None:
    # 0-3 never advance (zero-length loop); 4-7 cannot hold the SID; 13 runs past the end.
    wire = ACK_HEX[:9] + bytes([hdr_len]) + ACK_HEX[10:]
    with pytest.raises(WireError):
        lbtru.decode(wire)
    dwire = DATA_HEX[:13] + bytes([hdr_len]) + DATA_HEX[14:20]
    with pytest.raises(WireError):
        lbtru.decode_data_header(dwire)


def test_options_after_nak_list_and_ncf_list() -> None:
    nak = lbtru.decode(lbtru.encode(RuNak((1, 2, 3), 0, make_options(SID, 4))))
    assert isinstance(nak, RuNak)
    assert (nak.sqns, nak.session_id, nak.client_id) == ((1, 2, 3), SID, 4)
    ncf = lbtru.decode(lbtru.encode(RuNcf(9, (7,), NcfReason.NAK_SHED, 0, make_options(SID))))
    assert isinstance(ncf, RuNcf)
    assert (ncf.trail_sqn, ncf.sqns, ncf.reason, ncf.session_id) == (9, (7,), 3, SID)


def test_long_chain_terminates() -> None:
    chain = b"".join(bytes([3, 4, 0, 0]) for _ in range(300)) + bytes([0, 4, 0, 0])
    rec = lbtru.decode(bytes([6, 3, 0, 0]) + chain)
    assert isinstance(rec, RuCreq)
    assert len(rec.options) == 301


# --- malformed input -----------------------------------------------------------------------------


@pytest.mark.parametrize("ptype", [1, 8, 15])
def test_unknown_type_raises(ptype: int) -> None:
    with pytest.raises(WireError, match="type"):
        lbtru.decode(bytes([ptype]) + SM_HEX[1:])


def test_nonzero_version_raises() -> None:
    with pytest.raises(WireError, match="version"):
        lbtru.decode(b"\x20" + SM_HEX[1:])


def test_list_counts_beyond_datagram_raise() -> None:
    with pytest.raises(WireError, match="NAK list"):
        lbtru.decode(NAK_HEX[:4] + b"\x00\x09" + NAK_HEX[6:])
    with pytest.raises(WireError, match="NCF list"):
        lbtru.decode(NCF_HEX[:8] + b"\x00\x09" + NCF_HEX[10:])


def test_trailing_bytes_after_options_are_ignored() -> None:
    assert lbtru.decode(ACK_HEX + b"\x00\x00") == lbtru.decode(ACK_HEX)


@pytest.mark.parametrize(
    "build",
    [
        lambda: RuData(-1, 0),
        lambda: RuData(0, 1 << 32),
        lambda: RuData(0, 0, flags=1 << 16),
        lambda: RuData(0, 0, payload=[1, 2]),  # type: ignore[arg-type]
        lambda: RuData(0, 0, options=(RuSidOption(1), "x")),  # type: ignore[arg-type]
        lambda: RuData(0, 0, options=5),  # type: ignore[arg-type]
        lambda: RuSessionMessage(0, 0, 0, flags=-1),
        lambda: RuNak((1 << 32,)),
        lambda: RuNak((), format=16),
        lambda: RuNcf(0, (), reason=16),
        lambda: RuAck(1 << 32),
        lambda: RuCreq(1 << 16),
        lambda: RuRst(-1),
        lambda: RuSidOption(1 << 32),
        lambda: RuCidOption(0, flags=1 << 16),
        lambda: RuUnknownOption(1),  # SID is not unknown
        lambda: RuUnknownOption(0),
        lambda: RuUnknownOption(256),
        lambda: RuUnknownOption(9, bytes(252)),
    ],
)
def test_constructors_refuse_values_that_cannot_be_encoded(build: object) -> None:
    with pytest.raises(WireError):
        build()  # type: ignore[operator]


def test_encode_refuses_foreign_objects() -> None:
    with pytest.raises(WireError):
        lbtru.encode(object())  # type: ignore[arg-type]


# --- property tests: decode(encode(x)) == x ------------------------------------------------------

u16 = st.integers(0, 0xFFFF)
u32 = st.integers(0, 0xFFFFFFFF)
option_st: st.SearchStrategy[lbtru.RuOption] = st.one_of(
    st.builds(RuSidOption, u32, u16),
    st.builds(RuCidOption, u32, u16),
    st.builds(RuUnknownOption, st.integers(3, 255), st.binary(max_size=12), u16),
)
options_st = st.lists(option_st, max_size=3).map(tuple)
sqn_lists = st.lists(u32, max_size=40).map(tuple)
nibble = st.integers(0, 15)

STRATEGIES: dict[str, st.SearchStrategy[lbtru.RuRecord]] = {
    "data": st.builds(RuData, u32, u32, st.binary(max_size=64), u16, options_st),
    "sm": st.builds(RuSessionMessage, u32, u32, u32, u16, options_st),
    "nak": st.builds(RuNak, sqn_lists, nibble, options_st),
    "ncf": st.builds(RuNcf, u32, sqn_lists, nibble, nibble, options_st),
    "ack": st.builds(RuAck, u32, options_st),
    "creq": st.builds(RuCreq, u16, options_st),
    "rst": st.builds(RuRst, u16, options_st),
}
ROUND_TRIP = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("kind", list(STRATEGIES))
def test_round_trip(kind: str) -> None:
    @ROUND_TRIP
    @given(STRATEGIES[kind])
    def check(record: lbtru.RuRecord) -> None:
        wire = lbtru.encode(record)
        decoded = lbtru.decode(wire)
        assert decoded == record
        assert type(decoded) is type(record)
        assert decoded.session_id == record.session_id
        assert decoded.client_id == record.client_id
        assert lbtru.encode(decoded) == wire

    check()


@ROUND_TRIP
@given(u32, u32, st.sampled_from([0, FLAG_RX]), st.none() | u32, st.none() | u32, st.binary(max_size=40))
def test_hot_path_agrees_with_records(
    sqn: int, trail: int, flags: int, sid: int | None, cid: int | None, payload: bytes
) -> None:
    if sid is None:
        cid = None  # the hot path always puts the SID first
    buf = bytearray(2 + 28 + len(payload))
    n = lbtru.encode_data_into(
        buf, 2, sqn, trail, flags, session_id=sid, client_id=cid, payload_len=len(payload)
    )
    buf[2 + n : 2 + n + len(payload)] = payload
    wire = bytes(buf[2 : 2 + n + len(payload)])
    assert wire == lbtru.encode(RuData(sqn, trail, payload, flags, make_options(sid, cid)))
    assert lbtru.decode_data_header(wire) == (flags, sqn, trail, sid, n)


# --- fuzzing: anything malformed raises WireError and nothing else --------------------------------

FUZZ = settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FIXED = {0: 12, 2: 16, 3: 8, 4: 12, 5: 8, 6: 4, 7: 4}


def _decode_all_ways(wire: bytes) -> None:
    """Run every decoder; only a record or WireError may come out."""
    try:
        rec = lbtru.decode(wire)
    except WireError:
        pass
    else:
        assert isinstance(rec, RECORD_TYPES)
        lbtru.encode(rec)  # whatever decodes must re-encode
    try:
        hdr = lbtru.decode_data_header(wire)
    except WireError:
        pass
    else:
        assert hdr[4] <= len(wire)


@pytest.mark.parametrize("name", list(VERIFIED))
def test_every_truncation_raises_wire_error_or_decodes(name: str) -> None:
    wire = VERIFIED[name]
    for cut in range(len(wire)):
        _decode_all_ways(wire[:cut])
        if cut < FIXED[wire[0]]:
            with pytest.raises(WireError):
                lbtru.decode(wire[:cut])


def test_truncating_inside_the_options_raises() -> None:
    for cut in range(13, 20):
        with pytest.raises(WireError):
            lbtru.decode(DATA_HEX[:cut])


@FUZZ
@given(st.sampled_from(list(VERIFIED.values())), st.data())
def test_byte_flips_raise_only_wire_error(wire: bytes, data: st.DataObject) -> None:
    mutated = bytearray(wire)
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(mutated) - 1))
        mutated[pos] ^= data.draw(st.integers(1, 255))
    _decode_all_ways(bytes(mutated))


@FUZZ
@given(st.binary(max_size=80))
def test_random_bytes_raise_only_wire_error(wire: bytes) -> None:
    _decode_all_ways(wire)


@FUZZ
@given(st.sampled_from([0, 2, 3, 4, 5, 6, 7]), st.integers(0, 4), st.binary(max_size=60))
def test_random_bodies_with_valid_type_raise_only_wire_error(ptype: int, nh: int, body: bytes) -> None:
    # version 0, a valid type and a plausible next_hdr, so the fuzzer reaches the option parser.
    _decode_all_ways(bytes([ptype, nh]) + body)
