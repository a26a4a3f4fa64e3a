"""The receiver's Late Join / OTR request engine (UM Concepts Guide 10.2.3, 10.2.5-10.2.6, 10.3.2):
each option it reads, shown by its effect under a fake clock (times are integers, nothing sleeps)."""

from __future__ import annotations

import itertools
import random

import pytest

from openum.config._options import OPTIONS
from openum.protocol.recovery import (
    LateJoinAbandoned,
    LateJoinPlanned,
    LateJoinState,
    RecoveryKind,
    RecoveryLost,
    RecoveryOutput,
    RecoveryParams,
    RecoveryRequester,
    RecoveryWarning,
    SendRequest,
)
from openum.wire.lbmc import LateJoinInfoHeader, LateJoinInfoRequestHeader, RetransmissionRequestHeader

MS = 1_000_000
SRC = ("10.0.0.1", 14391)
RCV = ("10.0.0.2", 14392)


def make(persistent: bool = False, **kw: object) -> RecoveryRequester:
    return RecoveryRequester(
        RecoveryParams(**kw),  # type: ignore[arg-type]
        source=SRC,
        transport_index=3,
        topic_index=7,
        reply_to=RCV,
        rng=random.Random(5),
        persistent=persistent,
    )


def run(req: RecoveryRequester, start: int, until: int) -> list[tuple[int, RecoveryOutput]]:
    """Poll at every deadline from ``start`` to ``until`` (ns); the outputs with their times."""
    out: list[tuple[int, RecoveryOutput]] = [(start, o) for o in req.poll(start)]
    now = start
    while True:
        d = req.next_deadline()
        if d is None or d > until:
            return out
        now = max(now, d)
        out.extend((now, o) for o in req.poll(now))


def rx_sqns(outputs: list[tuple[int, RecoveryOutput]] | list[RecoveryOutput]) -> list[int]:
    items = [o[1] if isinstance(o, tuple) else o for o in outputs]
    return [
        o.header.seqnum
        for o in items
        if isinstance(o, SendRequest)
        and isinstance(o.header, RetransmissionRequestHeader)
        and not o.header.flags & RetransmissionRequestHeader.TSNI
    ]


def of(outputs: list[tuple[int, RecoveryOutput]], cls: type) -> list[tuple[int, RecoveryOutput]]:
    return [(t, o) for t, o in outputs if isinstance(o, cls)]


def info(req: RecoveryRequester, low: int, high: int) -> LateJoinInfoHeader:
    return LateJoinInfoHeader(low, high, req.request_index)


def test_params_defaults_are_the_option_tables_and_are_read_by_name() -> None:
    defaults = {o.name: o.default for o in OPTIONS if "receiver" in o.scopes}
    assert RecoveryParams.from_options(defaults.__getitem__) == RecoveryParams()
    custom = {**defaults, "use_late_join": 1, "retransmit_request_maximum": 10, "otr_request_duration": 500}
    got = RecoveryParams.from_options(custom.__getitem__)
    assert (got.use_late_join, got.retransmit_request_maximum, got.otr_request_duration) == (True, 10, 500)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"retransmit_request_interval": 0}, "retransmit_request_interval"),
        ({"late_join_info_request_maximum": -1}, "late_join_info_request_maximum"),
        ({"use_otr": 3}, "use_otr"),
        ({"otr_request_minimum_interval": 500, "otr_request_maximum_interval": 100}, "must not exceed"),
        ({"otr_request_duration": -1}, "otr_request_duration"),
    ],
)
def test_params_refuse_bad_values(kw: dict[str, int], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        RecoveryParams(**kw)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------- late join


def test_use_late_join_off_does_nothing() -> None:
    req = make(use_late_join=False)
    assert not req.start_late_join(0)
    assert req.poll(0) == []
    assert req.next_deadline() is None
    assert req.late_join_state is LateJoinState.IDLE


def test_lji_request_fields_and_retries_until_the_maximum() -> None:
    req = make(use_late_join=True, late_join_info_request_interval=1000, late_join_info_request_maximum=3)
    assert req.start_late_join(0)
    out = run(req, 0, 10_000 * MS)
    sends = of(out, SendRequest)
    assert [t for t, _ in sends] == [0, 1000 * MS, 2000 * MS]
    _, first = sends[0]
    assert isinstance(first, SendRequest)
    h = first.header
    assert isinstance(h, LateJoinInfoRequestHeader)
    assert (h.request_idx, h.transport_idx, h.topic_idx, h.req_ip, h.req_port) == (
        req.request_index,
        3,
        7,
        *RCV,
    )
    assert h.flags == LateJoinInfoRequestHeader.RX_REQ_OUTSTANDING_MAX
    assert h.rx_req_outstanding_max == 10
    assert first.destination == SRC
    assert first.kind is RecoveryKind.LATE_JOIN
    assert of(out, LateJoinAbandoned) == [(3000 * MS, LateJoinAbandoned())]
    assert req.late_join_state is LateJoinState.ABANDONED


def test_lji_maximum_zero_abandons_at_once_and_flags_follow_the_options() -> None:
    req = make(use_late_join=True, late_join_info_request_maximum=0)
    req.start_late_join(0)
    assert req.poll(0) == [LateJoinAbandoned()]
    req = make(use_late_join=True, retransmit_request_maximum=5)
    req.start_late_join(0, want_from=0)
    (send,) = req.poll(0)
    assert isinstance(send, SendRequest)
    assert isinstance(send.header, LateJoinInfoRequestHeader)
    assert send.header.flags == 0x7  # L, M and O
    assert (send.header.tx_low_sqn, send.header.rx_req_max) == (0, 5)


def test_lj_info_for_another_request_index_is_ignored() -> None:
    req = make(use_late_join=True)
    req.start_late_join(0)
    req.poll(0)
    assert not req.on_late_join_info(LateJoinInfoHeader(0, 9, req.request_index ^ 1), MS)
    assert req.late_join_state is LateJoinState.INFO
    assert req.statistics().lj_info_ignored == 1


def test_outstanding_maximum_is_a_sliding_window_oldest_first() -> None:
    req = make(use_late_join=True, retransmit_request_outstanding_maximum=3)
    req.start_late_join(0)
    req.poll(0)
    req.live_started(10, 0)
    req.on_late_join_info(info(req, 2, 30), MS)
    out = req.poll(MS)
    assert out[0] == LateJoinPlanned(2)
    assert rx_sqns(out) == [2, 3, 4]  # only 3 at once
    assert req.on_retransmission(2, 2 * MS) is RecoveryKind.LATE_JOIN
    assert rx_sqns(req.poll(2 * MS)) == [5]
    for s in (3, 4, 5):
        req.on_retransmission(s, 3 * MS)
    assert rx_sqns(req.poll(3 * MS)) == [6, 7, 8]
    for s in (6, 7, 8):
        req.on_retransmission(s, 4 * MS)
    assert rx_sqns(req.poll(4 * MS)) == [9]  # up to the first live message only
    req.on_retransmission(9, 5 * MS)
    assert req.poll(5 * MS) == []
    assert req.late_join_state is LateJoinState.DONE
    assert req.on_retransmission(9, 6 * MS) is None  # a duplicate answer


def test_request_maximum_counts_back_from_the_first_live_message() -> None:
    req = make(use_late_join=True, retransmit_request_maximum=10, retransmit_request_outstanding_maximum=100)
    req.start_late_join(0)
    req.poll(0)
    req.live_started(24, 0)
    req.on_late_join_info(info(req, 0, 30), MS)
    out = req.poll(MS)
    assert out[0] == LateJoinPlanned(14)
    assert rx_sqns(out) == list(range(14, 24))


def test_request_interval_resends_with_a_warning_and_message_timeout_gives_up() -> None:
    req = make(use_late_join=True, retransmit_request_interval=100, retransmit_request_message_timeout=350)
    req.start_late_join(0)
    req.poll(0)
    req.live_started(3, 0)
    req.on_late_join_info(info(req, 0, 5), 0)
    out = run(req, 0, 1000 * MS)
    sends = [(t // MS, s) for t, o in out for s in rx_sqns([o])]
    assert sends[:3] == [(0, 0), (0, 1), (0, 2)]
    assert [t for t, s in sends if s == 0] == [0, 100, 200, 300]
    assert len(of(out, RecoveryWarning)) == 3
    assert of(out, RecoveryLost) == [(350 * MS, RecoveryLost(0, 2, RecoveryKind.LATE_JOIN, burst=False))]
    st = req.statistics()
    assert (st.lj_requests, st.lj_resends, st.lj_lost, st.lj_outstanding) == (12, 9, 3, 0)


def test_a_later_lj_info_means_what_is_below_its_low_is_gone_as_one_burst() -> None:
    req = make(use_late_join=True, retransmit_request_outstanding_maximum=2)
    req.start_late_join(0)
    req.poll(0)
    req.live_started(20, 0)
    req.on_late_join_info(info(req, 10, 25), 0)
    assert rx_sqns(req.poll(0)) == [10, 11]
    req.on_late_join_info(info(req, 15, 25), MS)  # e.g. the answer to RXREQ 10: not retained
    out = req.poll(MS)
    assert out[0] == RecoveryLost(10, 14, RecoveryKind.LATE_JOIN, burst=True)
    assert rx_sqns(out) == [15, 16]


def test_want_from_reports_what_the_source_no_longer_holds_once() -> None:
    req = make(use_late_join=True)
    req.start_late_join(0, want_from=0)
    req.poll(0)
    req.live_started(20, 0)
    req.on_late_join_info(info(req, 12, 19), 0)
    out = req.poll(0)
    assert out[:2] == [LateJoinPlanned(0), RecoveryLost(0, 11, RecoveryKind.LATE_JOIN, burst=True)]
    assert rx_sqns(out) == list(range(12, 20))


def test_initial_sequence_number_request_asks_an_empty_source_for_its_start() -> None:
    req = make(use_late_join=True)
    req.start_late_join(0)
    req.poll(0)
    req.on_late_join_info(info(req, 50, 49), 0)  # nothing retained
    (t_req,) = req.poll(0)
    assert isinstance(t_req, SendRequest)
    assert isinstance(t_req.header, RetransmissionRequestHeader)
    assert t_req.header.flags == RetransmissionRequestHeader.TSNI
    assert req.late_join_state is LateJoinState.INITIAL_SQN
    req.live_started(53, MS)
    assert req.on_initial_sqn(49, 2 * MS)
    out = req.poll(2 * MS)
    assert out[0] == LateJoinPlanned(50)
    assert rx_sqns(out) == [50, 51, 52]
    # The source sent 50..59 after answering the LJI_REQ, and its TSNI (59) is read before any of them:
    # they were sent after the receiver joined and come live; the stream still starts at 50.
    race = make(use_late_join=True)
    race.start_late_join(0)
    race.poll(0)
    race.on_late_join_info(info(race, 50, 49), 0)
    race.poll(0)
    assert race.on_initial_sqn(59, MS)
    assert race.poll(MS) == [LateJoinPlanned(50)]
    race.live_started(51, 2 * MS)  # 50 was lost on the way: late join asks for it
    assert rx_sqns(race.poll(2 * MS)) == [50]
    off = make(use_late_join=True, retransmit_initial_sequence_number_request=False)
    off.start_late_join(0)
    off.poll(0)
    off.on_late_join_info(info(off, 50, 49), 0)
    assert off.poll(0) == [LateJoinPlanned(50)]
    assert off.late_join_state is LateJoinState.DONE


def test_messages_sent_between_lj_info_and_the_first_live_one_are_requested() -> None:
    req = make(use_late_join=True)
    req.start_late_join(0)
    req.poll(0)
    req.on_late_join_info(info(req, 5, 8), 0)
    out = req.poll(0)
    assert out[0] == LateJoinPlanned(5)
    for s in rx_sqns(out):
        req.on_retransmission(s, MS)
    req.poll(MS)
    assert req.late_join_state is LateJoinState.DONE
    req.live_started(12, 2 * MS)  # 9..11 were sent meanwhile and missed
    assert rx_sqns(req.poll(2 * MS)) == [9, 10, 11]


def test_satisfied_and_close() -> None:
    req = make(use_late_join=True, use_otr=1, otr_request_initial_delay=0)
    req.start_late_join(0)
    req.poll(0)
    req.live_started(10, 0)
    req.on_late_join_info(info(req, 0, 9), 0)
    req.poll(0)
    assert req.statistics().lj_outstanding == 10
    req.satisfied(0, 4)  # arrived some other way: no longer asked for
    assert rx_sqns(req.poll(0)) == []
    assert req.statistics().lj_outstanding == 5
    req.on_loss(20, 21, 0)
    req.close(MS)
    lost = [o for o in req.poll(MS) if isinstance(o, RecoveryLost)]
    assert lost == [
        RecoveryLost(5, 9, RecoveryKind.LATE_JOIN, burst=False),
        RecoveryLost(20, 21, RecoveryKind.OTR, burst=False),
    ]
    assert req.next_deadline() is None


# ------------------------------------------------------------------------------------------ OTR


@pytest.mark.parametrize(
    ("use_otr", "persistent", "on"), [(0, True, False), (1, False, True), (2, False, False), (2, True, True)]
)
def test_use_otr(use_otr: int, persistent: bool, on: bool) -> None:
    req = make(persistent, use_otr=use_otr, otr_request_initial_delay=0)
    assert req.on_loss(5, 5, 0) is on
    assert bool(rx_sqns(req.poll(0))) is on


def test_otr_initial_delay_then_doubling_intervals_capped_at_the_maximum() -> None:
    # The guide's acceptance test (10.3.7): delay 200 ms, min 100 ms, max 800 ms.
    req = make(
        use_otr=1,
        otr_request_initial_delay=200,
        otr_request_minimum_interval=100,
        otr_request_maximum_interval=800,
        otr_request_message_timeout=5000,
    )
    assert req.on_loss(50, 50, 0)
    out = run(req, 0, 10_000 * MS)
    times = [t // MS for t, o in out if rx_sqns([o]) == [50]]
    assert times[:6] == [200, 300, 500, 900, 1700, 2500]
    assert all(b - a == 800 for a, b in itertools.pairwise(times[4:]))
    assert of(out, RecoveryLost) == [(5000 * MS, RecoveryLost(50, 50, RecoveryKind.OTR, burst=False))]
    first = next(o for _, o in out if isinstance(o, SendRequest))
    assert first.kind is RecoveryKind.OTR
    assert isinstance(first.header, RetransmissionRequestHeader)
    assert (first.header.id_2, first.header.rx_ip, first.header.rx_port) == (7, *RCV)


def test_otr_recovered_sqns_stop_being_requested() -> None:
    req = make(use_otr=1, otr_request_initial_delay=10, otr_request_minimum_interval=10)
    req.on_loss(1, 3, 0)
    assert rx_sqns(req.poll(10 * MS)) == [1, 2, 3]
    assert req.on_retransmission(2, 11 * MS) is RecoveryKind.OTR
    assert rx_sqns(req.poll(20 * MS)) == [1, 3]
    req.satisfied(1, 1)
    req.on_retransmission(3, 21 * MS)
    assert req.poll(40 * MS) == []
    assert req.next_deadline() is None
    st = req.statistics()
    assert (st.otr_recovered, st.otr_pending, st.otr_outstanding) == (2, 0, 0)


@pytest.mark.parametrize(("maximum", "first_round"), [(2, [10, 11]), (0, [10, 11, 12, 13, 14])])
def test_otr_outstanding_maximum(maximum: int, first_round: list[int]) -> None:
    req = make(use_otr=1, otr_request_initial_delay=0, otr_request_outstanding_maximum=maximum)
    req.on_loss(10, 14, 0)
    assert rx_sqns(req.poll(0)) == first_round
    if maximum:
        req.on_retransmission(10, MS)
        assert rx_sqns(req.poll(MS)) == [12]  # room for one more, at once
        assert req.statistics().otr_outstanding == 2


def test_otr_message_timeout_and_deprecated_duration() -> None:
    req = make(use_otr=1, otr_request_initial_delay=100, otr_request_message_timeout=1000)
    req.on_loss(1, 1, 0)
    assert of(run(req, 0, 5000 * MS), RecoveryLost)[0][0] == 1000 * MS
    req = make(
        use_otr=1, otr_request_initial_delay=100, otr_request_message_timeout=1000, otr_request_duration=300
    )
    req.on_loss(1, 1, 0)
    assert of(run(req, 0, 5000 * MS), RecoveryLost)[0][0] == 400 * MS


def test_otr_log_alert_cooldown() -> None:
    req = make(use_otr=1, otr_request_initial_delay=0, otr_request_log_alert_cooldown=10)
    req.on_loss(1, 1, 0)
    assert len([o for o in req.poll(0) if isinstance(o, RecoveryWarning)]) == 1
    req.on_loss(2, 2, MS)  # 1 ms after the last OTR request: no new alert
    assert not [o for o in req.poll(MS) if isinstance(o, RecoveryWarning)]
    req.satisfied(1, 2)
    req.on_loss(3, 3, 11_001 * MS)  # 10 s without OTR requests: alert again
    assert len([o for o in req.poll(11_001 * MS) if isinstance(o, RecoveryWarning)]) == 1


def test_request_again_goes_to_late_join_while_it_runs_else_otr() -> None:
    req = make(use_late_join=True, use_otr=1, otr_request_initial_delay=500)
    req.start_late_join(0)
    req.poll(0)
    assert req.request_again(20, 21, 0)  # while waiting for LJ_INFO: queued for late join
    req.live_started(20, 0)
    req.on_late_join_info(info(req, 18, 19), MS)
    assert rx_sqns(req.poll(MS)) == [18, 19, 20, 21]
    for s in (18, 19, 20, 21):
        req.on_retransmission(s, 2 * MS)
    req.poll(2 * MS)
    assert req.late_join_state is LateJoinState.DONE
    assert req.request_again(30, 30, 3 * MS)  # OTR, without the initial delay
    assert rx_sqns(req.poll(3 * MS)) == [30]
    assert not make().request_again(1, 1, 0)  # neither runs


def test_sequence_numbers_wrap() -> None:
    req = make(use_late_join=True)
    req.start_late_join(0)
    req.poll(0)
    req.live_started(2, 0)
    req.on_late_join_info(info(req, 0xFFFF_FFFE, 5), 0)
    out = req.poll(0)
    assert out[0] == LateJoinPlanned(0xFFFF_FFFE)
    assert rx_sqns(out) == [0xFFFF_FFFE, 0xFFFF_FFFF, 0, 1]
