"""The source side of Late Join and OTR: answering receivers from the retention buffer.

UM Concepts Guide 10.2.3 (the Late Join sequence) and 10.3 (OTR reuses it); wire:
``lbmc-pdm-srs.md`` 2.7 (LJI_REQ 0x4E, UME_LJ_INFO 0x1E, UME_RXREQ 0x15, retransmitted data = LBMC
type 0xA with the original sqn) and ``lbmr-topic-resolution.md`` 6.2 (the TIR's late-join and
extended-functionality topic options).

:class:`RetransmissionResponder` is sans-I/O: the transport decodes a request, hands the header
record to it with ``now_ns``, and sends what it returns:

* :class:`SendLateJoinInfo`: a UME_LJ_INFO header (in a UIM) to ``destination``;
* :class:`SendRetransmission`: the retained message ``message`` re-sent as an LBMC **type 0xA** data
  message with its original sqn (the caller encodes it), unicast to ``destination``;
* :class:`NotRetained`: the requested sqn is gone.  openum then sends ``info`` (a UME_LJ_INFO giving the
  source's current range, under the request's index) so the receiver learns at once that everything
  below ``info.low_seqnum`` is unrecoverable instead of timing out (openum's choice: what real UM
  sends here is not documented; a receiver that gets nothing gives up after its message timeout);
* :class:`SendTsni`: the answer to a retransmission request with the T flag (the receiver's
  ``retransmit_initial_sequence_number_request``): a TSNI record ``(topic_index, last sqn sent)``.

Nothing on the source side limits the rate of answers: UM's Late Join options are all receiver-side
(``retransmit_request_outstanding_maximum`` bounds how much a receiver asks for at once).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from openum.protocol.delivery import SQN_MASK
from openum.protocol.recovery._retention import RetentionBuffer, RetentionParams
from openum.wire.lbmc import LateJoinInfoHeader, LateJoinInfoRequestHeader, RetransmissionRequestHeader
from openum.wire.lbmr import ExtendedFunctionalityOption, Functionality, LateJoinOption

__all__ = [
    "NotRetained",
    "ResponderStatistics",
    "RetransmissionResponder",
    "SendLateJoinInfo",
    "SendRetransmission",
    "SendTsni",
]

T = TypeVar("T")

Address = tuple[str, int]


@dataclass(frozen=True, slots=True)
class SendLateJoinInfo:
    """Send ``header`` (UME_LJ_INFO) to the receiver's request address ``destination``."""

    header: LateJoinInfoHeader
    destination: Address


@dataclass(frozen=True, slots=True)
class SendRetransmission(Generic[T]):
    """Re-send retained message ``sqn`` (LBMC type 0xA, original sqn) to ``destination``."""

    sqn: int
    message: T
    request_idx: int
    destination: Address


@dataclass(frozen=True, slots=True)
class NotRetained:
    """``sqn`` is no longer (or never was) retained; send ``info`` to ``destination`` (module
    docstring)."""

    sqn: int
    info: LateJoinInfoHeader
    destination: Address


@dataclass(frozen=True, slots=True)
class SendTsni:
    """Send a TSNI record ``(topic_index, sqn)`` to ``destination``: ``sqn`` is the last sqn sent
    (``initial sqn - 1`` mod 2**32 when nothing was sent yet)."""

    topic_index: int
    sqn: int
    destination: Address


ResponderOutput = SendLateJoinInfo | SendRetransmission[T] | NotRetained | SendTsni


@dataclass(frozen=True, slots=True)
class ResponderStatistics:
    """Counters of one responder.  ``lji_requests``: LJI_REQs answered.  ``rx_requests``: UME_RXREQs
    for a sqn.  ``retransmissions``: messages re-sent.  ``not_retained``: RXREQs for a sqn not held.
    ``tsni_requests``: RXREQs with the T flag.  ``ignored``: requests dropped because ``late_join`` is
    off, or an LJI_REQ named another topic."""

    lji_requests: int
    rx_requests: int
    retransmissions: int
    not_retained: int
    tsni_requests: int
    ignored: int


class RetransmissionResponder(Generic[T]):
    """Answers LJI_REQ and UME_RXREQ for one source (one topic) from its :class:`RetentionBuffer`.

    ``topic_index``: the source's topic index on its transport session (LJI_REQs naming another are
    ignored; the caller routes RXREQs, which carry no topic index when a receiver sends them).
    ``initial_sqn``: the source's first topic sqn (UM starts at 0), for the answers given before it has
    sent anything.  With ``params.late_join`` false every request is ignored (counted)."""

    __slots__ = (
        "_buffer",
        "_enabled",
        "_ignored",
        "_initial",
        "_lji",
        "_not_retained",
        "_rx",
        "_rx_sent",
        "_topic_index",
        "_tsni",
    )

    def __init__(
        self,
        buffer: RetentionBuffer[T],
        params: RetentionParams,
        *,
        topic_index: int,
        initial_sqn: int = 0,
    ) -> None:
        if not 0 <= initial_sqn <= SQN_MASK or not 0 <= topic_index <= SQN_MASK:
            raise ValueError(f"topic_index and initial_sqn must be u32, got {topic_index}, {initial_sqn}")
        self._buffer = buffer
        self._enabled = params.late_join
        self._topic_index = topic_index
        self._initial = initial_sqn
        self._lji = self._rx = self._rx_sent = self._not_retained = self._tsni = self._ignored = 0

    @property
    def buffer(self) -> RetentionBuffer[T]:
        return self._buffer

    def current_range(self, now_ns: int) -> tuple[int, int]:
        """``(low, high)`` retained at ``now_ns`` (after expiring by age).  When nothing is retained
        the range is empty: ``low`` is the next sqn to be sent and ``high == low - 1`` (mod 2**32)."""
        self._buffer.expire(now_ns)
        rng = self._buffer.range()
        if rng is not None:
            return rng
        last = self._buffer.last_sqn
        low = self._initial if last is None else (last + 1) & SQN_MASK
        return low, (low - 1) & SQN_MASK

    def on_late_join_info_request(
        self, request: LateJoinInfoRequestHeader, now_ns: int
    ) -> SendLateJoinInfo | None:
        """Answer an LJI_REQ with the retained range under the request's index.  With the L flag, the
        range starts no lower than ``tx_low_sqn`` (the receiver needs nothing before it).  The M and O
        limits are the receiver's to apply (it counts back from its first live message, which the source
        does not know)."""
        if not self._enabled or request.topic_idx != self._topic_index:
            self._ignored += 1
            return None
        self._lji += 1
        low, high = self.current_range(now_ns)
        if request.flags & LateJoinInfoRequestHeader.LOW_SQN:
            want = request.tx_low_sqn
            if 0 < ((want - low) & SQN_MASK) < 0x8000_0000:  # want is after low
                # past high: it wants nothing retained, an empty range
                low = want if ((high - want) & SQN_MASK) < 0x8000_0000 else (high + 1) & SQN_MASK
        header = LateJoinInfoHeader(low, high, request.request_idx)
        return SendLateJoinInfo(header, (request.req_ip, request.req_port))

    def on_retransmission_request(
        self, request: RetransmissionRequestHeader, now_ns: int
    ) -> SendRetransmission[T] | NotRetained | SendTsni | None:
        """Answer a UME_RXREQ: the retained message, :class:`NotRetained`, or (T flag) a TSNI."""
        if not self._enabled:
            self._ignored += 1
            return None
        destination = (request.rx_ip, request.rx_port)
        if request.flags & RetransmissionRequestHeader.TSNI:
            self._tsni += 1
            last = self._buffer.last_sqn
            sqn = (self._initial - 1) & SQN_MASK if last is None else last
            return SendTsni(self._topic_index, sqn, destination)
        self._rx += 1
        self._buffer.expire(now_ns)
        message = self._buffer.get(request.seqnum)
        if message is None:
            self._not_retained += 1
            low, high = self.current_range(now_ns)
            return NotRetained(
                request.seqnum, LateJoinInfoHeader(low, high, request.request_idx), destination
            )
        self._rx_sent += 1
        return SendRetransmission(request.seqnum, message, request.request_idx, destination)

    def topic_options(
        self, source_ip: str, request_port: int, transport_index: int, now_ns: int
    ) -> tuple[LateJoinOption, ExtendedFunctionalityOption] | tuple[()]:
        """What the source's TIR carries to advertise Late Join (``lbmr-topic-resolution.md`` 6.2): the
        late-join option 0x04 (the request port and the retained range) and the extended-functionality
        option 0x0E with the LATE_JOIN bit.  Empty when ``late_join`` is off.  (A persistent source
        would also set the UME option's late-join flag 0x4000; that option is persistence's.)"""
        if not self._enabled:
            return ()
        low, high = self.current_range(now_ns)
        return (
            LateJoinOption(source_ip, request_port, high, low, transport_index),
            ExtendedFunctionalityOption(source_ip, request_port, int(Functionality.LATE_JOIN)),
        )

    def statistics(self) -> ResponderStatistics:
        return ResponderStatistics(
            lji_requests=self._lji,
            rx_requests=self._rx,
            retransmissions=self._rx_sent,
            not_retained=self._not_retained,
            tsni_requests=self._tsni,
            ignored=self._ignored,
        )
