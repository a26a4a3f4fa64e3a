"""The context's Late Join router (``openum._late_join``): requests reach the right late-join source and
are answered on the wire as UM expects; answers reach the right (topic, source) subscription."""

from __future__ import annotations

import logging
import threading
from types import SimpleNamespace
from typing import Any

from openum._late_join import LateJoin, late_join_offer
from openum.protocol.recovery import RetentionParams
from openum.wire.lbmc import (
    LateJoinInfoHeader,
    LateJoinInfoRequestHeader,
    LbmcMessage,
    MessageType,
    RetransmissionRequestHeader,
    ReturnContextInstanceHeader,
    SourceIndexHeader,
    TsniHeader,
    control_message,
    decode_message,
    encode_message,
)
from openum.wire.lbmr import (
    ContextInstanceOption,
    ExtendedFunctionalityOption,
    Functionality,
    LateJoinOption,
    TcpTransport,
    TopicInfo,
)

INSTANCE = b"srcinst!"
RECEIVER = ("127.0.0.1", 14392)


class FakeOut:
    def __init__(self) -> None:
        self.sent: list[tuple[tuple[str, int], LbmcMessage]] = []

    def send(self, dest: tuple[str, int], data: bytes) -> None:
        self.sent.append((dest, decode_message(data)))


class FakeCtx:
    def __init__(self) -> None:
        self.log = logging.getLogger("test.late_join")
        self.now = 5_000_000_000

    def now_ns(self) -> int:
        return self.now


class FakeMessaging:
    def __init__(self, address: tuple[str, int] | None = ("127.0.0.1", 14391)) -> None:
        self.ctx = FakeCtx()
        self.address = address
        self.instance = INSTANCE
        self._out = FakeOut()


class FakeSession:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.encoded: list[tuple[int, Any]] = []

    def transport_info(self) -> TcpTransport:
        return TcpTransport("127.0.0.1", 14371, 0xABCD)

    def retransmission(self, topic_index: int, retained: Any, extra: tuple[Any, ...]) -> bytes:
        self.encoded.append((topic_index, retained))
        message = LbmcMessage(MessageType.RETRANSMISSION, topic_index, retained[1], extra, retained[0], None)
        return encode_message(message)


class FakeSource:
    def __init__(self, topic_index: int = 3) -> None:
        self.topic = "t"
        self.topic_index = topic_index
        self.session = FakeSession()
        self._next_sqn = 0
        self._retention: Any = None


def _source_router(**params: Any) -> tuple[LateJoin, FakeMessaging, FakeSource]:
    messaging = FakeMessaging()
    router = LateJoin(messaging)  # type: ignore[arg-type]
    source = FakeSource()
    options = router.add_source(source, RetentionParams(late_join=True, size_threshold=10_000, **params))  # type: ignore[arg-type]
    assert options == (
        LateJoinOption("127.0.0.1", 14391, 0xFFFFFFFF, 0, 0xABCD),
        ExtendedFunctionalityOption("127.0.0.1", 14391, int(Functionality.LATE_JOIN)),
    )
    for sqn in range(5):
        source._retention.add(sqn, (b"m%d" % sqn, sqn), messaging.ctx.now, size=2)
    return router, messaging, source


def _control(*headers: Any) -> LbmcMessage:
    return decode_message(encode_message(control_message(*headers)))


def test_an_lji_request_gets_the_retained_range_at_the_receivers_request_port() -> None:
    router, messaging, _ = _source_router()
    request = LateJoinInfoRequestHeader(77, 0xABCD, 3, RECEIVER[0], RECEIVER[1], flags=0)
    assert router.on_message(_control(request))
    [(dest, answer)] = messaging._out.sent
    assert dest == RECEIVER and answer.type is MessageType.CONTROL
    assert answer.header(ReturnContextInstanceHeader) == ReturnContextInstanceHeader(INSTANCE)
    assert answer.header(LateJoinInfoHeader) == LateJoinInfoHeader(0, 4, 77)
    assert router.statistics()["late_join_info_requests_rcved"] == 1


def test_a_retransmission_request_gets_the_message_with_srcidx_and_ctxinstr() -> None:
    router, messaging, source = _source_router()
    request = RetransmissionRequestHeader(77, 0xABCD, 3, 2, RECEIVER[1], RECEIVER[0])
    assert router.on_message(_control(request))
    [(dest, answer)] = messaging._out.sent
    assert dest == RECEIVER and answer.type is MessageType.RETRANSMISSION
    assert (answer.topic_index, answer.sqn, bytes(answer.payload)) == (3, 2, b"m2")
    assert answer.header(SourceIndexHeader) == SourceIndexHeader((0xABCD << 32) | 3)
    assert answer.header(ReturnContextInstanceHeader) == ReturnContextInstanceHeader(INSTANCE)
    assert source.session.encoded == [(3, (b"m2", 2))]
    assert router.statistics()["late_join_retransmissions_sent"] == 1


def test_a_request_for_a_sqn_not_retained_gets_the_current_range_and_t_gets_a_tsni() -> None:
    router, messaging, _ = _source_router()
    router.on_message(_control(RetransmissionRequestHeader(77, 0xABCD, 3, 9, RECEIVER[1], RECEIVER[0])))
    t_flag = RetransmissionRequestHeader(77, 0xABCD, 3, 0, RECEIVER[1], RECEIVER[0], flags=0x4000)
    router.on_message(_control(t_flag))
    [(_, info), (_, tsni)] = messaging._out.sent
    assert info.header(LateJoinInfoHeader) == LateJoinInfoHeader(0, 4, 77)
    assert tsni.header(TsniHeader) == TsniHeader(((3, 4),))
    assert router.statistics()["late_join_rx_requests_not_retained"] == 1


def test_requests_for_no_late_join_source_are_ignored_and_counted() -> None:
    router, messaging, source = _source_router()
    wrong_topic = LateJoinInfoRequestHeader(77, 0xABCD, 4, RECEIVER[0], RECEIVER[1])
    wrong_session = RetransmissionRequestHeader(77, 0xABCE, 3, 2, RECEIVER[1], RECEIVER[0])
    assert router.on_message(_control(wrong_topic)) and router.on_message(_control(wrong_session))
    assert messaging._out.sent == [] and router.statistics()["late_join_requests_ignored"] == 2
    router.remove_source(source)  # type: ignore[arg-type]
    router.on_message(_control(LateJoinInfoRequestHeader(77, 0xABCD, 3, RECEIVER[0], RECEIVER[1])))
    assert messaging._out.sent == [] and router.statistics()["late_join_requests_ignored"] == 3


def test_without_a_request_port_a_source_does_not_offer_late_join() -> None:
    router = LateJoin(FakeMessaging(address=None))  # type: ignore[arg-type]
    source = FakeSource()
    assert router.add_source(source, RetentionParams(late_join=True)) == ()  # type: ignore[arg-type]
    assert source._retention is None


class FakeSub:
    def __init__(self) -> None:
        stats = SimpleNamespace(lj_recovered=2, lj_lost=1, otr_recovered=3, otr_lost=4)
        self.merge = SimpleNamespace(requester=SimpleNamespace(statistics=lambda: stats))
        self.calls: list[tuple[str, Any]] = []

    def on_late_join_info(self, info: LateJoinInfoHeader) -> None:
        self.calls.append(("info", info))

    def on_retransmission(self, sqn: int, payload: bytes, fragment: Any, properties: Any) -> None:
        self.calls.append(("rx", (sqn, payload, fragment, properties)))

    def on_initial_sqn(self, sqn: int) -> None:
        self.calls.append(("tsni", sqn))


def test_answers_reach_the_subscription_by_request_index_source_index_and_instance() -> None:
    router = LateJoin(FakeMessaging())  # type: ignore[arg-type]
    sub, other = FakeSub(), FakeSub()
    router.add_subscription(sub, 77, INSTANCE, (0xABCD << 32) | 3)
    router.add_subscription(other, 78, b"another!", (0xABCD << 32) | 3)
    ctx = ReturnContextInstanceHeader(INSTANCE)
    assert router.on_message(_control(ctx, LateJoinInfoHeader(0, 4, 77)))
    rx = LbmcMessage(
        MessageType.RETRANSMISSION, 3, 2, (SourceIndexHeader((0xABCD << 32) | 3), ctx), b"m2", None
    )
    assert router.on_message(decode_message(encode_message(rx)))
    assert router.on_message(_control(ctx, TsniHeader(((3, 41),))))
    assert sub.calls == [("info", LateJoinInfoHeader(0, 4, 77)), ("rx", (2, b"m2", None, None)), ("tsni", 41)]
    assert other.calls == []
    # Nobody waits for these: a retransmission is dropped and counted, a TSNI is not Late Join's.
    stray = LbmcMessage(MessageType.RETRANSMISSION, 3, 2, (SourceIndexHeader(5), ctx), b"?", None)
    assert router.on_message(decode_message(encode_message(stray)))
    assert not router.on_message(_control(ReturnContextInstanceHeader(b"nobody!!"), TsniHeader(((3, 1),))))
    stats = router.statistics()
    assert stats["late_join_retransmissions_dropped"] == 1
    # What the subscriptions recovering now did so far counts too.
    assert (stats["late_join_msgs_recovered"], stats["late_join_msgs_unrecoverable"]) == (4, 2)
    assert (stats["otr_msgs_recovered"], stats["otr_msgs_unrecoverable"]) == (6, 8)
    router.remove_subscription(sub, 77, INSTANCE, (0xABCD << 32) | 3)
    assert router.on_message(_control(ctx, LateJoinInfoHeader(0, 4, 77)))
    assert len(sub.calls) == 3 and router.statistics()["late_join_requests_ignored"] == 1


def test_a_source_offers_late_join_only_with_the_option_and_the_functionality_bit() -> None:
    transport = TcpTransport("127.0.0.1", 14371, 1)
    offer = LateJoinOption("127.0.0.1", 14391, 9, 0, 1)
    flagged = ExtendedFunctionalityOption("127.0.0.1", 14391, int(Functionality.LATE_JOIN))
    plain = ExtendedFunctionalityOption("127.0.0.1", 14391, 0)
    instance = ContextInstanceOption(INSTANCE)
    assert late_join_offer(TopicInfo("t", 1, transport, 0, (instance, offer, flagged))) == offer
    assert late_join_offer(TopicInfo("t", 1, transport, 0, (instance, offer, plain))) is None
    assert late_join_offer(TopicInfo("t", 1, transport, 0, (instance, flagged))) is None
