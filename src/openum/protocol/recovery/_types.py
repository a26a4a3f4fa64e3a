"""Parameters, outputs and helpers shared by the Late Join / OTR requester and the merge.

UM Concepts Guide 10.2.2 and 10.3.3 (the receiver's options); the engines are described in
``_requester`` and ``_merge``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from openum.protocol.delivery import SQN_MASK, Delivery
from openum.wire.lbmc import LateJoinInfoRequestHeader, RetransmissionRequestHeader

__all__ = [
    "MSG_FLAG_OTR",
    "MSG_FLAG_RETRANSMIT",
    "NS_PER_MS",
    "Address",
    "Fragment",
    "LateJoinAbandoned",
    "LateJoinPlanned",
    "LateJoinState",
    "MergeStatistics",
    "RecoveryKind",
    "RecoveryLost",
    "RecoveryOutput",
    "RecoveryParams",
    "RecoveryWarning",
    "RequesterStatistics",
    "SendRequest",
    "Step",
    "ToDc",
    "Unwrap",
    "runs",
]

_HALF: Final = 0x8000_0000
NS_PER_MS: Final = 1_000_000
Address = tuple[str, int]


class RecoveryKind(enum.Enum):
    """Which mechanism recovers a sqn: its messages carry ``MsgFlags.RETRANSMIT`` or ``MsgFlags.OTR``."""

    LATE_JOIN = "late_join"
    OTR = "otr"


class LateJoinState(enum.Enum):
    IDLE = "idle"  # not started (or use_late_join off)
    INFO = "info"  # sending LJI_REQs, waiting for UME_LJ_INFO
    INITIAL_SQN = "initial_sqn"  # the source retains nothing: asking for its initial sqn (T flag)
    RECOVERING = "recovering"  # requesting retained messages
    DONE = "done"
    ABANDONED = "abandoned"  # no UME_LJ_INFO after late_join_info_request_maximum requests


@dataclass(frozen=True, slots=True)
class RecoveryParams:
    """Receiver-side Late Join and OTR options (guide 10.2.2, 10.3.3), UM's defaults; times in ms
    except ``otr_request_log_alert_cooldown`` (seconds)."""

    use_late_join: bool = True
    late_join_info_request_interval: int = 1000
    late_join_info_request_maximum: int = 60
    retransmit_request_interval: int = 500
    retransmit_request_maximum: int = 0
    retransmit_request_message_timeout: int = 10_000
    retransmit_request_outstanding_maximum: int = 10
    retransmit_initial_sequence_number_request: bool = True
    retransmit_message_caching_proximity: int = 5000
    use_otr: int = 2
    otr_request_initial_delay: int = 2000
    otr_request_minimum_interval: int = 1000
    otr_request_maximum_interval: int = 10_000
    otr_request_message_timeout: int = 60_000
    otr_request_outstanding_maximum: int = 200
    otr_request_log_alert_cooldown: int = 300
    otr_message_caching_threshold: int = 10_000
    otr_request_duration: int | None = None

    def __post_init__(self) -> None:
        positive = (
            "late_join_info_request_interval",
            "retransmit_request_interval",
            "retransmit_request_message_timeout",
            "retransmit_request_outstanding_maximum",
            "otr_request_minimum_interval",
            "otr_request_maximum_interval",
            "otr_request_message_timeout",
        )
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in (
            "late_join_info_request_maximum",
            "retransmit_request_maximum",
            "retransmit_message_caching_proximity",
            "otr_request_initial_delay",
            "otr_request_outstanding_maximum",
            "otr_request_log_alert_cooldown",
            "otr_message_caching_threshold",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.use_otr not in (0, 1, 2):
            raise ValueError(f"use_otr must be 0, 1 or 2, got {self.use_otr}")
        if self.otr_request_minimum_interval > self.otr_request_maximum_interval:
            raise ValueError(
                f"otr_request_minimum_interval ({self.otr_request_minimum_interval}) must not exceed "
                f"otr_request_maximum_interval ({self.otr_request_maximum_interval})"
            )
        if self.otr_request_duration is not None and self.otr_request_duration < 0:
            raise ValueError(f"otr_request_duration must be >= 0, got {self.otr_request_duration}")

    @classmethod
    def from_options(cls, receiver: Callable[[str], Any]) -> RecoveryParams:
        """From a receiver attribute getter."""
        kwargs: dict[str, Any] = {}
        for name in cls.__dataclass_fields__:
            value = receiver(name)
            kwargs[name] = value if value is None or isinstance(value, bool) else int(value)
        kwargs["use_late_join"] = bool(kwargs["use_late_join"])
        kwargs["retransmit_initial_sequence_number_request"] = bool(
            kwargs["retransmit_initial_sequence_number_request"]
        )
        return cls(**kwargs)

    def otr_enabled(self, persistent: bool) -> bool:
        """``use_otr`` 1: always; 2: only for a persistent receiver; 0: never."""
        return self.use_otr == 1 or (self.use_otr == 2 and persistent)


@dataclass(frozen=True, slots=True)
class SendRequest:
    """Send ``header`` (in a UIM) to the source's request address ``destination``."""

    header: LateJoinInfoRequestHeader | RetransmissionRequestHeader
    kind: RecoveryKind
    destination: Address


@dataclass(frozen=True, slots=True)
class LateJoinPlanned:
    """The receiver's stream starts at ``start``: every sqn from it up to the first live message is
    being recovered (or was reported lost)."""

    start: int


@dataclass(frozen=True, slots=True)
class LateJoinAbandoned:
    """No UME_LJ_INFO came: the receiver's stream starts at its first live message."""


@dataclass(frozen=True, slots=True)
class RecoveryLost:
    """Sqns ``first..last`` (inclusive) cannot be recovered: report them once.  ``burst``: as one
    UNRECOVERABLE_LOSS_BURST (the source no longer holds them), else one UNRECOVERABLE_LOSS per sqn."""

    first: int
    last: int
    kind: RecoveryKind
    burst: bool


@dataclass(frozen=True, slots=True)
class RecoveryWarning:
    """A line for the receiver's log at warning level."""

    text: str


RecoveryOutput = SendRequest | LateJoinPlanned | LateJoinAbandoned | RecoveryLost | RecoveryWarning


@dataclass(frozen=True, slots=True)
class RequesterStatistics:
    """Counters of one requester.  ``lji_requests``: LJI_REQs sent.  ``lj_requests`` /
    ``otr_requests``: UME_RXREQs sent (re-sends included); ``lj_resends`` / ``otr_resends``: of which
    re-sends.  ``lj_recovered`` / ``otr_recovered``: sqns answered.  ``lj_lost`` / ``otr_lost``: sqns
    given up.  ``lj_outstanding`` / ``otr_outstanding``: sqns requested and unanswered now;
    ``otr_pending``: sqns waiting for OTR now.  ``lj_info_ignored``: UME_LJ_INFOs for another request
    index or out of turn."""

    lji_requests: int
    lj_requests: int
    lj_resends: int
    lj_recovered: int
    lj_lost: int
    lj_outstanding: int
    otr_requests: int
    otr_resends: int
    otr_recovered: int
    otr_lost: int
    otr_outstanding: int
    otr_pending: int
    lj_info_ignored: int


def _signed(delta: int) -> int:
    delta &= SQN_MASK
    return delta - (1 << 32) if delta >= _HALF else delta


class Unwrap:
    """Maps u32 sqns to unbounded integers near the newest seen, so ranges compare as plain ints."""

    __slots__ = ("_ref",)

    def __init__(self) -> None:
        self._ref: int | None = None

    def __call__(self, sqn: int) -> int:
        ref = self._ref
        if ref is None:
            self._ref = sqn
            return sqn
        value = ref + _signed(sqn - ref)
        if value > ref:
            self._ref = value
        return value


# ------------------------------------------------------------------------------------- the merge

#: ``LBM_MSG_FLAG_RETRANSMIT`` (``openum.MsgFlags.RETRANSMIT``): recovered by Late Join.
MSG_FLAG_RETRANSMIT: Final = 0x8
#: ``LBM_MSG_FLAG_OTR`` (``openum.MsgFlags.OTR``): recovered by OTR.
MSG_FLAG_OTR: Final = 0x100000

Fragment = tuple[int, int, int]
"""``(first_sqn, offset, total_length)`` of an LBMC FRAG header."""

ToDc = Callable[[int, bytes | memoryview, int, Fragment | None, int, object], tuple[bool, list[Delivery]]]
"""``to_dc(sqn, payload, now_ns, fragment, flags, properties) -> (taken, outputs)``: offer an OTR
retransmission to the topic's delivery controller.  ``taken``: the sqn was still an open gap there, so
the DC delivers it in place, with the flags given, and its held messages behind it; otherwise the DC
had already resolved that sqn and the merge places it itself.  ``outputs``: whatever the DC returned
(its timers may have fired), handed to the merge as live output either way."""


class Step(NamedTuple):
    """What one call produced: deliver, send, log."""

    deliveries: list[Delivery]
    requests: Sequence[SendRequest]
    warnings: Sequence[str]


@dataclass(frozen=True, slots=True)
class MergeStatistics:
    """Counters of one merge.  ``delivered``: DATA handed on; ``recovered_late_join`` /
    ``recovered_otr``: of which retransmissions.  ``duplicates_dropped``: arrivals for sqns already
    delivered, held or reported.  ``live_dropped``: live messages not cached (requested again).
    ``held``: items held now.  ``losses`` / ``bursts``: loss events handed on.  ``fragments_discarded``:
    retransmitted fragments that could not form a message."""

    delivered: int
    recovered_late_join: int
    recovered_otr: int
    duplicates_dropped: int
    live_dropped: int
    held: int
    losses: int
    bursts: int
    fragments_discarded: int


def runs(sqns: list[int]) -> list[tuple[int, int]]:
    """Sorted ints as inclusive ``(first, last)`` runs of consecutive values."""
    runs: list[tuple[int, int]] = []
    for s in sqns:
        if runs and runs[-1][1] == s - 1:
            runs[-1] = (runs[-1][0], s)
        else:
            runs.append((s, s))
    return runs
