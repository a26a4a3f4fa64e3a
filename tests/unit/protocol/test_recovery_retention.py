"""The source side of Late Join / OTR: the retention buffer's eviction rules (UM Concepts Guide 10.2.4)
and the responder's answers to LJI_REQ and UME_RXREQ (wire lbmc-pdm-srs.md 2.7)."""

from __future__ import annotations

import pytest

from openum.config._options import OPTIONS
from openum.protocol.recovery import (
    RETENTION_MESSAGE_OVERHEAD,
    NotRetained,
    RetentionBuffer,
    RetentionParams,
    RetransmissionResponder,
    SendLateJoinInfo,
    SendRetransmission,
    SendTsni,
)
from openum.wire.lbmc import LateJoinInfoRequestHeader, RetransmissionRequestHeader
from openum.wire.lbmr import ExtendedFunctionalityOption, Functionality, LateJoinOption

S = 1_000_000_000
MSG = b"x" * 36  # counted as 100 bytes with the per-message overhead
COUNTED = len(MSG) + RETENTION_MESSAGE_OVERHEAD
RCV = ("10.0.0.2", 14392)


def filled(params: RetentionParams, count: int, *, step_ns: int = 0) -> RetentionBuffer[bytes]:
    buf: RetentionBuffer[bytes] = RetentionBuffer(params)
    for sqn in range(count):
        buf.add(sqn, MSG, sqn * step_ns)
    return buf


def test_params_defaults_are_the_option_tables() -> None:
    defaults = {o.name: o.default for o in OPTIONS if "source" in o.scopes}
    p = RetentionParams()
    assert p.late_join == defaults["late_join"]
    assert p.size_threshold == defaults["retransmit_retention_size_threshold"]
    assert p.size_limit == defaults["retransmit_retention_size_limit"]
    assert p.age_threshold == defaults["retransmit_retention_age_threshold"]
    got = RetentionParams.from_options(lambda name: {**defaults, "late_join": True}[name])
    assert got == RetentionParams(late_join=True)


def test_params_refuse_bad_values() -> None:
    with pytest.raises(ValueError, match="retransmit_retention_size_limit"):
        RetentionParams(size_limit=0)
    with pytest.raises(ValueError, match="size_threshold"):
        RetentionParams(size_threshold=-1)


def test_no_retention_settings_keep_exactly_one_message_with_um_notice() -> None:
    params = RetentionParams(late_join=True)
    buf = filled(params, 10)
    assert buf.range() == (9, 9)
    assert len(buf) == 1
    assert params.notice("Orders") == 'Source "Orders" has no retention settings (1 message retained max)'
    assert RetentionParams(late_join=True, age_threshold=5).notice("Orders") is None
    assert RetentionParams(late_join=False).notice("Orders") is None


def test_size_threshold_keeps_at_least_the_threshold() -> None:
    # The oldest goes only while the rest still holds the threshold: 5 messages' worth keeps 5.
    buf = filled(RetentionParams(size_threshold=5 * COUNTED), 20)
    assert buf.range() == (15, 19)
    # One byte more than 5 messages needs a sixth.
    buf = filled(RetentionParams(size_threshold=5 * COUNTED + 1), 20)
    assert buf.range() == (14, 19)
    st = buf.statistics()
    assert st.messages == 6
    assert st.bytes == 6 * COUNTED
    assert st.added == 20
    assert st.evicted_by_thresholds == 14
    assert st.evicted_by_limit == 0


def test_size_limit_takes_precedence_over_the_threshold() -> None:
    buf = filled(RetentionParams(size_threshold=100 * COUNTED, size_limit=3 * COUNTED), 20)
    assert buf.range() == (17, 19)
    assert buf.statistics().evicted_by_limit == 17
    assert buf.statistics().bytes <= 3 * COUNTED


def test_a_message_larger_than_the_limit_is_not_retained() -> None:
    buf: RetentionBuffer[bytes] = RetentionBuffer(RetentionParams(size_threshold=10**6, size_limit=8192))
    buf.add(0, MSG, 0)
    buf.add(1, b"y" * 9000, 0)
    assert buf.range() is None
    assert buf.get(0) is None
    assert buf.last_sqn == 1


def test_age_threshold_keeps_young_messages_and_expires_with_time() -> None:
    buf = filled(RetentionParams(age_threshold=3), 10, step_ns=S)  # sent at 0 s .. 9 s
    # At 9 s: messages younger than 3 s (7, 8, 9) must stay; 6 is exactly 3 s old and may go.
    assert buf.range() == (7, 9)
    assert buf.expire(11 * S) == 2  # 7 and 8 reach 3 s; 9 is the newest and always stays
    assert buf.range() == (9, 9)
    assert buf.expire(100 * S) == 0
    assert buf.range() == (9, 9)


def test_thresholds_combine_with_and_a_message_stays_while_either_keeps_it() -> None:
    # Size threshold 4 messages, age 3 s, one message a second.
    buf = filled(RetentionParams(size_threshold=4 * COUNTED, age_threshold=3), 10, step_ns=S)
    assert buf.range() == (6, 9)  # the size threshold keeps 4 although 6 is 3 s old
    buf2 = filled(RetentionParams(size_threshold=2 * COUNTED, age_threshold=5), 10, step_ns=S)
    assert buf2.range() == (5, 9)  # the age threshold keeps 5 s worth although 2 would satisfy size
    buf2.expire(20 * S)
    assert buf2.range() == (8, 9)  # both allow now: down to the size threshold


def test_get_contains_and_lookup_counters() -> None:
    buf = filled(RetentionParams(size_threshold=3 * COUNTED), 10)
    assert buf.get(8) == MSG
    assert 8 in buf
    assert 2 not in buf
    assert buf.get(2) is None
    st = buf.statistics()
    assert (st.lookups, st.lookups_missed) == (2, 1)


def test_sequence_numbers_must_increase_and_may_skip_or_wrap() -> None:
    buf: RetentionBuffer[bytes] = RetentionBuffer(RetentionParams(size_threshold=10**6))
    buf.add(0xFFFF_FFFE, MSG, 0)
    buf.add(0xFFFF_FFFF, MSG, 0)
    buf.add(2, MSG, 0)  # wraps and skips 0 and 1
    assert buf.range() == (0xFFFF_FFFE, 2)
    assert buf.get(0) is None
    with pytest.raises(ValueError, match="does not follow"):
        buf.add(2, MSG, 0)
    with pytest.raises(ValueError, match="u32"):
        buf.add(-1, MSG, 0)


def test_records_need_a_size_and_memory_stays_bounded() -> None:
    rec: RetentionBuffer[tuple[int, str]] = RetentionBuffer(
        RetentionParams(size_threshold=10**9, size_limit=8192)
    )
    with pytest.raises(TypeError, match="size is required"):
        rec.add(0, (1, "a"), 0)
    for sqn in range(100_000):
        rec.add(sqn, (sqn, "a"), 0, size=36)
    assert len(rec) == 8192 // COUNTED
    assert rec.statistics().bytes <= 8192


# -------------------------------------------------------------------------------------- responder


def responder(params: RetentionParams, count: int, *, step_ns: int = 0) -> RetransmissionResponder[bytes]:
    return RetransmissionResponder(filled(params, count, step_ns=step_ns), params, topic_index=7)


def lji(flags: int = 0, low: int = 0, topic: int = 7) -> LateJoinInfoRequestHeader:
    return LateJoinInfoRequestHeader(
        request_idx=99,
        transport_idx=3,
        topic_idx=topic,
        req_ip=RCV[0],
        req_port=RCV[1],
        tx_low_sqn=low,
        flags=flags,
    )


def rxreq(sqn: int, flags: int = 0) -> RetransmissionRequestHeader:
    return RetransmissionRequestHeader(
        request_idx=99, transport_idx=3, id_2=7, seqnum=sqn, rx_port=RCV[1], rx_ip=RCV[0], flags=flags
    )


def test_lji_request_is_answered_with_the_retained_range() -> None:
    r = responder(RetentionParams(late_join=True, size_threshold=5 * COUNTED), 20)
    out = r.on_late_join_info_request(lji(), 0)
    assert isinstance(out, SendLateJoinInfo)
    assert (out.header.low_seqnum, out.header.high_seqnum, out.header.request_idx) == (15, 19, 99)
    assert out.destination == RCV
    # L flag: the receiver needs nothing before tx_low_sqn.
    out = r.on_late_join_info_request(lji(LateJoinInfoRequestHeader.LOW_SQN, 17), 0)
    assert out is not None
    assert (out.header.low_seqnum, out.header.high_seqnum) == (17, 19)
    out = r.on_late_join_info_request(lji(LateJoinInfoRequestHeader.LOW_SQN, 30), 0)
    assert out is not None
    assert (out.header.low_seqnum, out.header.high_seqnum) == (20, 19)  # empty
    assert r.statistics().lji_requests == 3


def test_responder_ignores_requests_without_late_join_or_for_another_topic() -> None:
    off = responder(RetentionParams(late_join=False, size_threshold=10**6), 5)
    assert off.on_late_join_info_request(lji(), 0) is None
    assert off.on_retransmission_request(rxreq(1), 0) is None
    assert off.topic_options("10.0.0.1", 14391, 3, 0) == ()
    on = responder(RetentionParams(late_join=True), 5)
    assert on.on_late_join_info_request(lji(topic=8), 0) is None
    assert off.statistics().ignored == 2
    assert on.statistics().ignored == 1


def test_empty_source_answers_an_empty_range_starting_at_its_next_sqn() -> None:
    params = RetentionParams(late_join=True)
    r: RetransmissionResponder[bytes] = RetransmissionResponder(
        RetentionBuffer(params), params, topic_index=7, initial_sqn=50
    )
    out = r.on_late_join_info_request(lji(), 0)
    assert out is not None
    assert (out.header.low_seqnum, out.header.high_seqnum) == (50, 49)
    tsni = r.on_retransmission_request(rxreq(0, RetransmissionRequestHeader.TSNI), 0)
    assert tsni == SendTsni(7, 49, RCV)


def test_rx_request_returns_the_message_or_not_retained_with_the_current_range() -> None:
    r = responder(RetentionParams(late_join=True, age_threshold=2), 10, step_ns=S)  # retains 8, 9
    out = r.on_retransmission_request(rxreq(8), 9 * S)
    assert out == SendRetransmission(8, MSG, 99, RCV)
    gone = r.on_retransmission_request(rxreq(3), 9 * S)
    assert isinstance(gone, NotRetained)
    assert (gone.sqn, gone.info.low_seqnum, gone.info.high_seqnum, gone.info.request_idx) == (3, 8, 9, 99)
    # Time passes: the age rule is applied before answering, 8 is gone at 10 s.
    later = r.on_retransmission_request(rxreq(8), 10 * S)
    assert isinstance(later, NotRetained)
    assert later.info.low_seqnum == 9
    tsni = r.on_retransmission_request(rxreq(0, RetransmissionRequestHeader.TSNI), 10 * S)
    assert tsni == SendTsni(7, 9, RCV)
    st = r.statistics()
    assert (st.rx_requests, st.retransmissions, st.not_retained, st.tsni_requests) == (3, 1, 2, 1)


def test_tir_topic_options_advertise_late_join_and_the_range() -> None:
    r = responder(RetentionParams(late_join=True, size_threshold=3 * COUNTED), 10)
    opts = r.topic_options("10.0.0.1", 14391, 3, 0)
    assert opts == (
        LateJoinOption("10.0.0.1", 14391, high_sequence=9, low_sequence=7, transport_index=3),
        ExtendedFunctionalityOption("10.0.0.1", 14391, int(Functionality.LATE_JOIN)),
    )
