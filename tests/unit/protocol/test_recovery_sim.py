"""Late Join and OTR end to end in simulation (UM Concepts Guide 10.2.9, 10.3.7 acceptance tests).

A source (retention buffer + responder) sends one message per period; a receiver (delivery controller
+ recovery merge) joins at some time.  Live data and the request channel (UIMs) run over a simulated
network with loss, duplication and jitter; time is a fake integer clock that jumps from one deadline or
arrival to the next (nothing sleeps).  Hypothesis explores the interleavings: no message is ever
delivered twice, ordered delivery stays in order, and every sqn is delivered or reported lost once.
"""

from __future__ import annotations

import heapq
import itertools
import random
from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openum.protocol.delivery import Delivery, DeliveryController, DeliveryKind
from openum.protocol.recovery import (
    MSG_FLAG_OTR,
    MSG_FLAG_RETRANSMIT,
    RETENTION_MESSAGE_OVERHEAD,
    NotRetained,
    RecoveryMerge,
    RecoveryParams,
    RecoveryRequester,
    RetentionBuffer,
    RetentionParams,
    RetransmissionResponder,
    SendRetransmission,
    SendTsni,
    Step,
)
from openum.testing import FakeClock
from openum.wire.lbmc import LateJoinInfoRequestHeader, RetransmissionRequestHeader

MS = 1_000_000
SRC = ("10.0.0.1", 14391)
RCV = ("10.0.0.2", 14392)


def payload(sqn: int) -> bytes:
    return b"m%04d" % sqn


COUNTED = len(payload(0)) + RETENTION_MESSAGE_OVERHEAD


@dataclass
class World:
    """One source, one receiver, one topic."""

    n: int
    period_ms: int = 100
    join_ms: int = 0
    retention: RetentionParams = field(default_factory=lambda: RetentionParams(late_join=True))
    params: RecoveryParams = field(default_factory=lambda: RecoveryParams(use_late_join=True))
    ordered: int = 1
    live_drop: frozenset[int] = frozenset()
    uim_loss: float = 0.0
    uim_dup: float = 0.0
    jitter_ms: int = 0
    seed: int = 1
    loss_timeout_ms: int = 100
    want_from: int | None = None
    burst: int = 10**9
    early_otr: bool = False
    ignore_rx: dict[int, int] = field(default_factory=dict)  # sqn -> requests the source ignores
    dc_fill: bool = True  # OTR retransmissions may fill the DC's open gaps (RecoveryMerge's to_dc)

    def __post_init__(self) -> None:
        self.clock = FakeClock()
        self.rng = random.Random(self.seed)
        self.buf: RetentionBuffer[bytes] = RetentionBuffer(self.retention)
        self.resp = RetransmissionResponder(self.buf, self.retention, topic_index=7)
        self.dc = DeliveryController(
            ordered=self.ordered,
            loss_timeout_ns=self.loss_timeout_ms * MS,
            maximum_burst_loss=self.burst,
            report_gaps=self.early_otr,
        )
        req = RecoveryRequester(
            self.params,
            source=SRC,
            transport_index=3,
            topic_index=7,
            reply_to=RCV,
            rng=random.Random(self.seed),
        )
        self.merge = RecoveryMerge(req, ordered=self.ordered, to_dc=self.dc.fill if self.dc_fill else None)
        self.events: list[tuple[int, int, str, object]] = []
        self.seq = 0
        self.out: list[Delivery] = []
        self.requests: list[tuple[int, RetransmissionRequestHeader | LateJoinInfoRequestHeader]] = []
        self.sent = 0
        self.joined = False
        self.last_live: int | None = None
        self.max_lj_outstanding = 0

    @property
    def now(self) -> int:
        return self.clock.now_ns()

    def _at(self, t: int, kind: str, data: object) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, self.seq, kind, data))

    def _uim(self, kind: str, data: object) -> None:
        if self.rng.random() < self.uim_loss:
            return
        for _ in range(2 if self.rng.random() < self.uim_dup else 1):
            self._at(self.now + MS + self.rng.randrange(0, self.jitter_ms * MS + 1), kind, data)

    def _take(self, step: Step) -> None:
        self.out.extend(step.deliveries)
        for r in step.requests:
            self.requests.append((self.now, r.header))
            self._uim("to_source", r.header)
        self.max_lj_outstanding = max(
            self.max_lj_outstanding, self.merge.requester.statistics().lj_outstanding
        )

    def run(self, until_ms: int, *, end: bool = False) -> list[Delivery]:
        """Advance the clock from event to event up to ``until_ms``; ``end``: then EOS."""
        stop = until_ms * MS
        while True:
            times = [stop]
            if self.sent < self.n:
                times.append(self.sent * self.period_ms * MS)
            if not self.joined:
                times.append(self.join_ms * MS)
            if self.events:
                times.append(self.events[0][0])
            for d in (self.merge.next_deadline(), self.dc.next_deadline()):
                if d is not None:
                    times.append(max(d, self.now))
            t = min(times)
            if t >= stop:
                break
            self.clock.advance_to(max(t, self.now))
            self._tick()
        self.clock.advance_to(max(stop, self.now))
        self._tick()
        if end:
            self._take(self.merge.on_live(self.dc.end(self.now), self.now))
        return self.out

    def _tick(self) -> None:
        now = self.now
        if not self.joined and now >= self.join_ms * MS:
            self.joined = True
            self.merge.start_late_join(now, want_from=self.want_from)
            self._take(self.merge.on_live(self.dc.begin(now), now))
        while self.sent < self.n and self.sent * self.period_ms * MS <= now:
            s = self.sent
            self.buf.add(s, payload(s), now)
            if self.joined and s not in self.live_drop:
                self._at(now + MS, "live", s)
            self.sent += 1
            if self.sent == self.n:  # the source's TSNI reveals tail loss
                self._at(now + 5 * MS, "tsni", s)
        while self.events and self.events[0][0] <= now:
            _, _, kind, data = heapq.heappop(self.events)
            self._event(kind, data, now)
        deadline = self.dc.next_deadline()
        if deadline is not None and deadline <= now:
            self._take(self.merge.on_live(self.dc.on_timer(now), now))
        deadline = self.merge.next_deadline()
        if deadline is not None and deadline <= now:
            self._take(self.merge.poll(now))

    def _gaps(self, now: int) -> None:
        """OTR's initial delay runs from the gaps the DC reports as they open (``early_otr``)."""
        for first, last in self.dc.take_new_gaps():
            self._take(self.merge.on_gap(first, last, now))

    def _event(self, kind: str, data: object, now: int) -> None:
        if kind == "live":
            assert isinstance(data, int)
            self.last_live = data if self.last_live is None else max(self.last_live, data)
            self._take(self.merge.on_live(self.dc.on_message(data, payload(data), now), now))
            self._gaps(now)
        elif kind == "tsni":
            assert isinstance(data, int)
            if self.joined:
                self._take(self.merge.on_live(self.dc.on_tsni(data, now), now))
                self._gaps(now)
        elif kind == "to_source":
            self._serve(data, now)
        elif kind == "lj_info":
            self._take(self.merge.on_late_join_info(data, now))  # type: ignore[arg-type]
        elif kind == "rx":
            sqn, message = data  # type: ignore[misc]
            self._take(self.merge.on_retransmission(sqn, message, now))
        elif kind == "initial_sqn":
            assert isinstance(data, int)
            self._take(self.merge.on_initial_sqn(data, now))

    def _serve(self, header: object, now: int) -> None:
        if isinstance(header, LateJoinInfoRequestHeader):
            answer = self.resp.on_late_join_info_request(header, now)
            if answer is not None:
                self._uim("lj_info", answer.header)
            return
        assert isinstance(header, RetransmissionRequestHeader)
        if self.ignore_rx.get(header.seqnum, 0) > 0:
            self.ignore_rx[header.seqnum] -= 1
            return
        reply = self.resp.on_retransmission_request(header, now)
        if isinstance(reply, SendRetransmission):
            self._uim("rx", (reply.sqn, reply.message))
        elif isinstance(reply, NotRetained):
            self._uim("lj_info", reply.info)
        elif isinstance(reply, SendTsni):
            self._uim("initial_sqn", reply.sqn)


def show(out: list[Delivery]) -> list[str]:
    tags = []
    for d in out:
        if d.kind is DeliveryKind.DATA:
            tags.append(
                f"{d.sqn}{'RX' if d.flags & MSG_FLAG_RETRANSMIT else 'OTR' if d.flags & MSG_FLAG_OTR else ''}"
            )
        elif d.kind is DeliveryKind.UNRECOVERABLE_LOSS:
            tags.append(f"L{d.sqn}")
        elif d.kind is DeliveryKind.UNRECOVERABLE_LOSS_BURST:
            tags.append(f"B{d.first_sqn}-{d.sqn}")
        else:
            tags.append(d.kind.value)
    return tags


def check_exactly_once(w: World) -> dict[int, Delivery]:
    """No sqn twice; ordered: ascending; every sqn from the first on delivered or lost, once."""
    seen: dict[int, Delivery] = {}
    starts: list[int] = []
    for d in w.out:
        if d.kind is DeliveryKind.DATA:
            span = range(d.sqn if d.first_sqn is None else d.first_sqn, d.sqn + 1)
            assert d.payload == payload(d.sqn)
        elif d.kind is DeliveryKind.UNRECOVERABLE_LOSS:
            span = range(d.sqn, d.sqn + 1)
        elif d.kind is DeliveryKind.UNRECOVERABLE_LOSS_BURST:
            assert d.first_sqn is not None
            span = range(d.first_sqn, d.sqn + 1)
        else:
            continue
        for s in span:
            assert s not in seen, f"sqn {s} twice: {show(w.out)}"
            seen[s] = d
        starts.append(span.start)
    if w.ordered == 1:
        assert starts == sorted(starts), show(w.out)
    if seen:
        # Everything from the stream's start up to the last sqn sent (or known to the receiver).
        # (A DC that never got a live message ignores the TSNI: then up to the last sqn seen.)
        top = w.n if w.last_live is not None else max(seen) + 1
        missing = [s for s in range(min(seen), top) if s not in seen]
        assert not missing, f"never resolved: {missing}: {show(w.out)}"
    kinds = [d.kind for d in w.out]
    assert kinds[0] is DeliveryKind.BOS
    assert kinds.count(DeliveryKind.EOS) <= 1
    return seen


# ------------------------------------------------------------------------ acceptance (guide 10.2.9)


def test_age_threshold_late_receiver_gets_exactly_the_retained_window_and_one_burst() -> None:
    w = World(n=80, join_ms=5000, retention=RetentionParams(late_join=True, age_threshold=2), want_from=0)
    out = show(w.run(9000))
    # The LJI_REQ reaches the source at 5001 ms: messages younger than 2 s are those sent after
    # 3001 ms (31..50); 50 (sent at 5000 ms) is also the first live one.
    assert out[:2] == ["bos", "B0-30"]
    assert out[2:21] == [f"{s}RX" for s in range(31, 50)]
    assert out[21:] == [str(s) for s in range(50, 80)]
    assert next(d for d in w.out if d.kind is DeliveryKind.UNRECOVERABLE_LOSS_BURST).first_sqn == 0
    check_exactly_once(w)


def test_size_threshold_late_receiver_gets_exactly_the_retained_window() -> None:
    w = World(n=80, join_ms=5000, retention=RetentionParams(late_join=True, size_threshold=10 * COUNTED))
    out = show(w.run(9000))
    # At 5001 ms the source holds its last 10 messages, 41..50; 50 is live.
    assert out == ["bos", *(f"{s}RX" for s in range(41, 50)), *(str(s) for s in range(50, 80))]
    w2 = World(
        n=80,
        join_ms=5000,
        retention=RetentionParams(late_join=True, size_threshold=10 * COUNTED),
        want_from=0,
    )
    assert show(w2.run(9000))[:3] == ["bos", "B0-40", "41RX"]


def test_default_retention_gives_the_single_latest_message() -> None:
    w = World(n=10, period_ms=1000, join_ms=5050)
    assert show(w.run(12_000)) == ["bos", "5RX", "6", "7", "8", "9"]


def test_request_maximum_gives_the_last_messages_before_the_first_live_one() -> None:
    w = World(
        n=60,
        join_ms=3050,
        retention=RetentionParams(late_join=True, size_threshold=10**6),
        params=RecoveryParams(use_late_join=True, retransmit_request_maximum=10),
    )
    out = show(w.run(7000))
    rx = [s for s in out if s.endswith("RX")]
    assert 10 <= len(rx) <= 11
    assert rx[-1] == "30RX"
    assert out[len(rx) + 1] == "31"
    check_exactly_once(w)


def test_outstanding_maximum_bounds_unserved_requests() -> None:
    w = World(
        n=200,
        period_ms=10,
        join_ms=1500,
        retention=RetentionParams(late_join=True, size_threshold=10**6),
        params=RecoveryParams(use_late_join=True, retransmit_request_outstanding_maximum=10),
        jitter_ms=20,
    )
    w.run(5000)
    assert w.max_lj_outstanding == 10
    assert w.merge.statistics().recovered_late_join == 150
    check_exactly_once(w)


def test_without_use_late_join_the_receiver_gets_live_messages_only() -> None:
    w = World(
        n=20,
        join_ms=1050,
        retention=RetentionParams(late_join=True, size_threshold=10**6),
        params=RecoveryParams(use_late_join=False),
    )
    assert show(w.run(3000)) == ["bos", *(str(s) for s in range(11, 20))]
    assert w.requests == []


# ------------------------------------------------------------------------------ OTR (guide 10.3.7)


def test_otr_acceptance_spacing_and_in_order_delivery() -> None:
    w = World(
        n=100,
        period_ms=10,
        retention=RetentionParams(late_join=True, size_threshold=10**6),
        params=RecoveryParams(
            use_otr=1,
            otr_request_initial_delay=200,
            otr_request_minimum_interval=100,
            otr_request_maximum_interval=800,
        ),
        live_drop=frozenset({50}),
        loss_timeout_ms=10**6,  # the transport never gives up by itself (no NAK repair either)
        early_otr=True,
        ignore_rx={50: 5},
    )
    w.run(5000)
    gap_seen = 511 * MS  # 51 arrives at 511 ms
    times = [t for t, h in w.requests if isinstance(h, RetransmissionRequestHeader) and h.seqnum == 50]
    assert times[0] - gap_seen == 200 * MS
    assert [(b - a) // MS for a, b in itertools.pairwise(times)] == [100, 200, 400, 800, 800]
    out = show(w.out)
    assert out[50:53] == ["49", "50OTR", "51"]
    check_exactly_once(w)


def test_otr_reports_only_what_the_source_no_longer_holds() -> None:
    w = World(
        n=100,
        period_ms=10,
        params=RecoveryParams(
            use_otr=1,
            otr_request_initial_delay=20,
            otr_request_minimum_interval=100,
            otr_request_message_timeout=1000,
        ),
        live_drop=frozenset({10, 80}),
        retention=RetentionParams(late_join=True, size_threshold=10 * COUNTED),  # 100 ms worth
        loss_timeout_ms=50,
        ignore_rx={10: 1},  # the first request for 10 goes unanswered; at the second it is gone
    )
    out = show(w.run(5000))
    assert "L10" in out  # evicted before OTR asked: unrecoverable, reported once and at once
    assert "80OTR" in out
    assert w.merge.requester.statistics().otr_lost == 1
    asked = [t for t, h in w.requests if isinstance(h, RetransmissionRequestHeader) and h.seqnum == 10]
    assert len(asked) == 2  # lost at the source's answer, long before otr_request_message_timeout
    check_exactly_once(w)


# ------------------------------------------------------------------------------ property (hypothesis)

worlds = st.builds(
    World,
    n=st.integers(1, 60),
    period_ms=st.sampled_from([1, 10]),
    join_ms=st.integers(0, 300),
    retention=st.builds(
        RetentionParams,
        late_join=st.just(True),
        size_threshold=st.sampled_from([0, 5 * COUNTED, 30 * COUNTED]),
        age_threshold=st.sampled_from([0, 0, 1]),
    ),
    params=st.builds(
        RecoveryParams,
        use_late_join=st.booleans(),
        use_otr=st.sampled_from([0, 1]),
        late_join_info_request_interval=st.sampled_from([10, 100]),
        late_join_info_request_maximum=st.sampled_from([0, 1, 5]),
        retransmit_request_interval=st.sampled_from([5, 50, 500]),
        retransmit_request_message_timeout=st.sampled_from([20, 300, 3000]),
        retransmit_request_outstanding_maximum=st.sampled_from([1, 3, 10]),
        retransmit_request_maximum=st.sampled_from([0, 3, 10]),
        retransmit_initial_sequence_number_request=st.booleans(),
        retransmit_message_caching_proximity=st.sampled_from([2, 5, 5000]),
        otr_request_initial_delay=st.sampled_from([0, 20, 200]),
        otr_request_minimum_interval=st.sampled_from([5, 50]),
        otr_request_maximum_interval=st.just(100),
        otr_request_message_timeout=st.sampled_from([50, 500, 5000]),
        otr_request_outstanding_maximum=st.sampled_from([0, 1, 3, 200]),
        otr_message_caching_threshold=st.sampled_from([0, 2, 10_000]),
    ),
    ordered=st.sampled_from([1, 1, -1, 0]),
    live_drop=st.frozensets(st.integers(0, 59), max_size=15),
    uim_loss=st.sampled_from([0.0, 0.1, 0.3]),
    uim_dup=st.sampled_from([0.0, 0.3]),
    jitter_ms=st.sampled_from([0, 5, 50]),
    seed=st.integers(0, 2**32 - 1),
    loss_timeout_ms=st.sampled_from([0, 30, 100, 3000]),
    want_from=st.sampled_from([None, 0]),
    burst=st.sampled_from([10**9, 3]),
    early_otr=st.booleans(),
    dc_fill=st.booleans(),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds)
def test_every_sqn_is_delivered_or_reported_lost_exactly_once(w: World) -> None:
    w.run(20_000, end=True)
    check_exactly_once(w)
    assert w.out[-1].kind is DeliveryKind.EOS
    assert w.merge.next_deadline() is None


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), ordered=st.sampled_from([1, -1]))
def test_without_loss_late_join_and_live_give_every_message_once(seed: int, ordered: int) -> None:
    # Heavy reordering and duplication of the request channel, no loss anywhere: nothing is lost.
    w = World(
        n=50,
        period_ms=5,
        join_ms=120,
        retention=RetentionParams(late_join=True, size_threshold=10**6),
        params=RecoveryParams(use_late_join=True, use_otr=1, retransmit_request_outstanding_maximum=4),
        ordered=ordered,
        uim_dup=0.5,
        jitter_ms=40,
        seed=seed,
    )
    w.run(10_000)
    seen = check_exactly_once(w)
    assert sorted(seen) == list(range(50))
    assert all(d.kind is DeliveryKind.DATA for d in seen.values())
    rx = {s for s, d in seen.items() if d.flags & MSG_FLAG_RETRANSMIT}
    assert rx == set(range(24))  # sent before the join (0..23, the last at 115 ms)
