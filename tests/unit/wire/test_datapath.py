"""openum.wire._datapath: the DATA headers of every message, compiled apart from the codec modules.

The fast parsers must agree with the codecs' ``decode_data_header`` wherever they answer, answer for every
layout openum sends, and leave every other datagram (answer None) to the general path.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from openum.wire import lbtrm, lbtru
from openum.wire._common import WireError
from openum.wire._datapath import rm_data_header_fast, ru_data_header_fast

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
