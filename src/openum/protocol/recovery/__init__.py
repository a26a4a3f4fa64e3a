"""Sans-I/O Late Join and Off-Transport Recovery (UM Concepts Guide, sections 2.6, 10.2 and 10.3).

Source side:

* :class:`RetentionBuffer` (``_retention``): the messages a late-join source keeps, evicted by
  ``retransmit_retention_size_limit`` / ``_size_threshold`` / ``_age_threshold`` (rules in its module
  docstring);
* :class:`RetransmissionResponder` (``_responder``): answers LJI_REQ with UME_LJ_INFO and UME_RXREQ with
  the retained message (sent as LBMC type 0xA), "not retained", or a TSNI; gives the TIR's late-join
  topic options.

Receiver side, one of each per (topic, source):

* :class:`RecoveryRequester` (``_requester``; parameters and outputs in ``_types``): LJI_REQ /
  UME_RXREQ scheduling for Late Join and OTR, with their limits, retries and give-up rules;
* :class:`RecoveryMerge` (``_merge``): between the topic's ``DeliveryController`` and the receiver
  callback; merges live data with retransmissions (``MSG_FLAG_RETRANSMIT`` / ``MSG_FLAG_OTR``) so that
  each sqn is delivered or reported lost exactly once, in order with ``ordered_delivery`` 1.

Everything takes ``now_ns`` (and the requester a ``random.Random``-like ``Rng``); nothing here reads a
clock, touches a socket or starts a thread.

Options implemented here (each changes behaviour; the transports apply them when they use these
engines):

* source: ``late_join``, ``retransmit_retention_size_threshold``, ``retransmit_retention_size_limit``,
  ``retransmit_retention_age_threshold`` (:class:`RetentionParams`);
* receiver, Late Join: ``use_late_join``, ``late_join_info_request_interval``,
  ``late_join_info_request_maximum``, ``retransmit_request_interval``, ``retransmit_request_maximum``,
  ``retransmit_request_message_timeout``, ``retransmit_request_outstanding_maximum``,
  ``retransmit_initial_sequence_number_request``, ``retransmit_message_caching_proximity``;
* receiver, OTR: ``use_otr``, ``otr_request_initial_delay``, ``otr_request_minimum_interval``,
  ``otr_request_maximum_interval``, ``otr_request_message_timeout``, ``otr_request_outstanding_maximum``,
  ``otr_request_log_alert_cooldown``, ``otr_message_caching_threshold``, ``otr_request_duration``
  (:class:`RecoveryParams`).
"""

from openum.protocol.recovery._merge import RecoveryMerge
from openum.protocol.recovery._requester import RecoveryRequester
from openum.protocol.recovery._responder import (
    NotRetained,
    ResponderStatistics,
    RetransmissionResponder,
    SendLateJoinInfo,
    SendRetransmission,
    SendTsni,
)
from openum.protocol.recovery._retention import (
    RETENTION_MESSAGE_OVERHEAD,
    RetainedMessage,
    RetentionBuffer,
    RetentionParams,
    RetentionStatistics,
)
from openum.protocol.recovery._types import (
    MSG_FLAG_OTR,
    MSG_FLAG_RETRANSMIT,
    LateJoinAbandoned,
    LateJoinPlanned,
    LateJoinState,
    MergeStatistics,
    RecoveryKind,
    RecoveryLost,
    RecoveryOutput,
    RecoveryParams,
    RecoveryWarning,
    RequesterStatistics,
    SendRequest,
    Step,
    ToDc,
)

__all__ = [
    "MSG_FLAG_OTR",
    "MSG_FLAG_RETRANSMIT",
    "RETENTION_MESSAGE_OVERHEAD",
    "LateJoinAbandoned",
    "LateJoinPlanned",
    "LateJoinState",
    "MergeStatistics",
    "NotRetained",
    "RecoveryKind",
    "RecoveryLost",
    "RecoveryMerge",
    "RecoveryOutput",
    "RecoveryParams",
    "RecoveryRequester",
    "RecoveryWarning",
    "RequesterStatistics",
    "ResponderStatistics",
    "RetainedMessage",
    "RetentionBuffer",
    "RetentionParams",
    "RetentionStatistics",
    "RetransmissionResponder",
    "SendLateJoinInfo",
    "SendRequest",
    "SendRetransmission",
    "SendTsni",
    "Step",
    "ToDc",
]
