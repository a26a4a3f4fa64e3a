"""openum.wire._datapath: the DATA headers of every message, compiled apart from the codec modules.

The fast parsers must agree with the codecs' ``decode_data_header`` wherever they answer, answer for every
layout openum sends, and leave every other datagram (answer None) to the general path.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from openum.wire import lbtrm, lbtru
from openum.wire._common import WireError
from openum.wire._datapath import rm_data_header_fast, rm_original_sqn, ru_data_header_fast, ru_original_sqn

u32 = st.integers(0, 0xFFFFFFFF)


def _ru_general(buf: bytes) -> tuple[int, int, int, int | None, int] | None:
    try:
        return lbtru.decode_data_header(buf)
    except WireError:
        return None


def _rm_general(buf: bytes) -> tuple[int, int, int, int, int, int] | None:
    try:
        return lbtrm.decode_data_header(buf)
    except WireError:
        return None


@given(sid=st.one_of(st.none(), u32), sqn=u32, trail=u32, payload=st.binary(max_size=40))
def test_ru_fast_path_reads_what_openum_sends(sid: int | None, sqn: int, trail: int, payload: bytes) -> None:
    datagram = lbtru.data_header_packer(sid)(sqn, trail) + payload
    expected = (0, sqn, trail, sid, 12 if sid is None else 20)
    assert ru_data_header_fast(datagram) == expected
    assert ru_data_header_fast(memoryview(datagram)) == expected
    assert lbtru.decode_data_header(datagram) == expected


@given(sid=u32, cid=u32, sqn=u32, flags=st.sampled_from([0, lbtru.FLAG_RX]))
def test_ru_other_layouts_are_left_to_the_general_path(sid: int, cid: int, sqn: int, flags: int) -> None:
    buf = bytearray(28)
    lbtru.encode_data_into(buf, 0, sqn, 0, session_id=sid, client_id=cid, flags=flags)
    assert ru_data_header_fast(buf) is None  # SID + CID options
    assert lbtru.decode_data_header(buf) == (flags, sqn, 0, sid, 28)


@given(st.binary(max_size=40))
def test_ru_fast_path_agrees_with_the_codec_on_any_bytes(buf: bytes) -> None:
    fast = ru_data_header_fast(buf)
    assert fast is None or fast == _ru_general(buf)


@given(port=st.integers(0, 0xFFFF), sid=u32, sqn=u32, trail=u32, payload=st.binary(max_size=40))
def test_rm_fast_path_reads_what_openum_sends(
    port: int, sid: int, sqn: int, trail: int, payload: bytes
) -> None:
    datagram = lbtrm.data_header_packer(port, sid)(sqn, trail) + payload
    expected = (port, sid, sqn, trail, lbtrm.FLAG_UCAST_NAKS, 20)
    assert rm_data_header_fast(datagram) == expected
    assert lbtrm.decode_data_header(datagram) == expected


def test_rm_options_and_other_types_are_left_to_the_general_path() -> None:
    with_option = lbtrm.encode(lbtrm.RmData(1, 2, 3, 0, b"x", options=(lbtrm.RmOption(1, b"\0\0"),)))
    assert rm_data_header_fast(with_option) is None
    assert lbtrm.decode_data_header(with_option)[5] > 20
    sm = lbtrm.encode(lbtrm.RmSessionMessage(1, 2, 0, 0, 0))
    assert rm_data_header_fast(sm) is None
    assert rm_data_header_fast(lbtrm.data_header_packer(1, 2)(0, 0)[:19]) is None


@given(st.binary(max_size=40))
def test_rm_fast_path_agrees_with_the_codec_on_any_bytes(buf: bytes) -> None:
    fast = rm_data_header_fast(buf)
    assert fast is None or fast == _rm_general(buf)


# -- the receivers' in-order check: the sqn of an original datagram of the expected session, else -1 ------


def _ru_expected(buf: bytes | bytearray, session_id: int | None) -> int:
    """What ru_original_sqn may answer besides -1, from the general decoder: the sqn of the layout openum
    writes for the session (no flags; SID option only, or none for None)."""
    header = _ru_general(bytes(buf))
    if header is None:
        return -1
    flags, sqn, _trail, sid, offset = header
    layout = 12 if session_id is None else 20
    return sqn if flags == 0 and sid == session_id and offset == layout else -1


def _rm_expected(buf: bytes | bytearray, port: int, session_id: int) -> int:
    """What rm_original_sqn may answer besides -1, from the general decoder: the sqn of an original DATA
    datagram without options of the session, else -1."""
    header = _rm_general(bytes(buf))
    if header is None:
        return -1
    h_port, h_sid, sqn, _trail, flags, offset = header
    if (h_port, h_sid, offset) == (port, session_id, 20) and not flags & lbtrm.FLAG_RX:
        return sqn
    return -1


@given(sid=st.one_of(st.none(), u32), sqn=u32, trail=u32, payload=st.binary(max_size=40))
def test_ru_original_sqn_reads_what_openum_sends(
    sid: int | None, sqn: int, trail: int, payload: bytes
) -> None:
    pack, prefix, suffix = lbtru.data_header_template(sid)
    datagram = pack(prefix, sqn, trail, suffix) + payload
    assert datagram == lbtru.data_header_packer(sid)(sqn, trail) + payload
    assert ru_original_sqn(datagram, sid) == sqn
    assert ru_original_sqn(memoryview(datagram), sid) == sqn
    other = None if sid is not None else 7
    assert ru_original_sqn(datagram, other) == -1  # another session (or layout)
    if sid is not None:
        assert ru_original_sqn(datagram, sid ^ 1) == -1


@given(sid=u32, cid=u32, sqn=u32, flags=st.sampled_from([0, lbtru.FLAG_RX]))
def test_ru_original_sqn_leaves_retransmissions_and_other_options_alone(
    sid: int, cid: int, sqn: int, flags: int
) -> None:
    buf = bytearray(28)
    lbtru.encode_data_into(buf, 0, sqn, 0, session_id=sid, client_id=cid, flags=flags)
    assert ru_original_sqn(buf, sid) == -1  # SID + CID options
    rx = bytearray(lbtru.data_header_packer(sid)(sqn, 0))
    rx[2] |= lbtru.FLAG_RX >> 8
    assert ru_original_sqn(rx, sid) == -1


@given(buf=st.binary(max_size=40), sid=st.one_of(st.none(), st.sampled_from([0, 1, 0x01020304])))
def test_ru_original_sqn_agrees_with_the_codec_on_any_bytes(buf: bytes, sid: int | None) -> None:
    fast = ru_original_sqn(buf, sid)
    assert fast == -1 or fast == _ru_expected(buf, sid)


@given(port=st.integers(0, 0xFFFF), sid=u32, sqn=u32, trail=u32, payload=st.binary(max_size=40))
def test_rm_original_sqn_reads_what_openum_sends(
    port: int, sid: int, sqn: int, trail: int, payload: bytes
) -> None:
    pack, prefix, suffix = lbtrm.data_header_template(port, sid)
    datagram = pack(prefix, sqn, trail, suffix) + payload
    assert datagram == lbtrm.data_header_packer(port, sid)(sqn, trail) + payload
    assert rm_original_sqn(datagram, port, sid) == sqn
    assert rm_original_sqn(memoryview(datagram), port, sid) == sqn
    assert rm_original_sqn(datagram, port ^ 1, sid) == -1
    assert rm_original_sqn(datagram, port, sid ^ 1) == -1
    rx = bytearray(datagram)
    rx[16] |= lbtrm.FLAG_RX
    assert rm_original_sqn(rx, port, sid) == -1
    assert rm_original_sqn(datagram[:19], port, sid) == -1


@given(buf=st.binary(max_size=40), port=st.sampled_from([0, 0x0102]), sid=st.sampled_from([0, 0x01020304]))
def test_rm_original_sqn_agrees_with_the_codec_on_any_bytes(buf: bytes, port: int, sid: int) -> None:
    fast = rm_original_sqn(buf, port, sid)
    assert fast == -1 or fast == _rm_expected(buf, port, sid)


@given(
    sid=st.one_of(st.none(), u32),
    sqn=u32,
    where=st.integers(0, 19),
    value=st.integers(0, 255),
)
def test_ru_original_sqn_agrees_with_the_codec_on_any_one_byte_changed(
    sid: int | None, sqn: int, where: int, value: int
) -> None:
    header = lbtru.data_header_packer(sid)(sqn, 5)
    buf = bytearray(header + b"payload")
    buf[where % len(header)] = value
    fast = ru_original_sqn(buf, sid)
    assert fast == -1 or fast == _ru_expected(buf, sid)  # -1: the general path decides (e.g. reserved bits)


@given(port=st.integers(0, 0xFFFF), sid=u32, sqn=u32, where=st.integers(0, 19), value=st.integers(0, 255))
def test_rm_original_sqn_agrees_with_the_codec_on_any_one_byte_changed(
    port: int, sid: int, sqn: int, where: int, value: int
) -> None:
    buf = bytearray(lbtrm.data_header_packer(port, sid)(sqn, 5) + b"payload")
    buf[where] = value
    fast = rm_original_sqn(buf, port, sid)
    assert fast == -1 or fast == _rm_expected(buf, port, sid)
