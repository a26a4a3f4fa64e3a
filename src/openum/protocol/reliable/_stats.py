"""Statistics snapshots of the reliability engines, with UM's counter names (seed 2.13, 17.2; spec 06 D).

UM's ``lbm_src_transport_stats_lbtrm_t`` / ``..._lbtru_t`` and ``lbm_rcv_transport_stats_lbtrm_t`` /
``..._lbtru_t`` names are kept; counters UM does not have are marked *(openum)*.  Times are in
milliseconds, as in UM.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from openum.protocol.reliable._common import NS_PER_MS
from openum.protocol.reliable._nak import LossDetector

__all__ = [
    "RmReceiverStatistics",
    "RmSourceStatistics",
    "RuReceiverStatistics",
    "RuSourceStatistics",
]


@dataclass(frozen=True, slots=True)
class _ReceiverStatistics:
    """Counters of one receiving transport session (shared by LBT-RM and LBT-RU).

    ``msgs_rcved``/``bytes_rcved``: valid DATA datagrams of this session received (duplicates and
    retransmissions included) and their bytes.  ``rxs_rcved`` *(openum)*: of those, retransmissions.
    ``sms_rcved`` *(openum)*: session messages.  ``lost``: datagrams detected missing (each once, whether
    recovered or not).  ``out_of_order``: original (not retransmitted) datagrams that filled a gap.
    ``duplicate_data``: datagrams dropped because their sequence number was already delivered.
    ``late_repairs`` *(openum)*: datagrams delivered after the transport had given up on them.
    ``nak_pckts_sent``/``naks_sent``: NAK packets and the sequence numbers they carried.
    ``ncf_pckts_rcved``/``ncfs_rcved`` *(openum)*: NCF packets and entries received; ``ncfs_ignored``,
    ``ncfs_rx_delay``, ``ncfs_shed``, ``ncfs_unknown``: entries by reason ("NAK ignored", "retransmit
    delay", "NAK shed", any other: "do not retry" or an undefined reason, which openum sources never
    send).  ``nak_stm_min/mean/max``: ms from the first NAK for a datagram to its repair.
    ``nak_tx_min/mean/max``: NAKs sent per repaired datagram (both over repaired datagrams that were
    NAKed; 0 when none).  ``unrecovered_txw``: datagrams given up because the source's window no longer
    holds them; ``unrecovered_tmo``: because the NAK generation interval passed.  ``losses_pending``
    *(openum)*: missing datagrams being recovered now.  ``lbm_msgs_rcved``, ``lbm_msgs_no_topic_rcved``:
    LBMC messages, and those for no subscribed topic, as counted by the layer above
    (``count_lbm_messages``).  ``dgrams_dropped_size``: too short for their header; ``_version``:
    version not 0; ``_type``: a type this end never receives; ``_hdr``: malformed header or options;
    ``_sid``: of another session (session ID or, for LBT-RU, sender address; for LBT-RM, where UM has
    no such counter *(openum)*, a NAK port that is not the source's).  ``dgrams_dropped_window``
    *(openum)*: DATA, session messages and NCFs whose sequence numbers lie too far from the next one
    expected (more than 8,192 datagrams either way, ``RECEIVE_WINDOW``: a forged or garbage sequence
    number) and that no second datagram confirmed.

    Two counters of UM's structures are absent because nothing in openum moves them: ``lbm_reqs_rcved``
    (openum has no request/response yet) and ``dgrams_dropped_other`` (every datagram a session is
    given is counted under a reason above; once a session ends the context no longer hands it any,
    and counts them in its ``lbtrm/lbtru_dgrams_dropped_unknown``).
    """

    msgs_rcved: int
    bytes_rcved: int
    rxs_rcved: int
    sms_rcved: int
    lost: int
    out_of_order: int
    duplicate_data: int
    late_repairs: int
    nak_pckts_sent: int
    naks_sent: int
    ncf_pckts_rcved: int
    ncfs_rcved: int
    ncfs_ignored: int
    ncfs_rx_delay: int
    ncfs_shed: int
    ncfs_unknown: int
    nak_stm_min: int
    nak_stm_mean: int
    nak_stm_max: int
    nak_tx_min: int
    nak_tx_mean: int
    nak_tx_max: int
    unrecovered_txw: int
    unrecovered_tmo: int
    losses_pending: int
    lbm_msgs_rcved: int
    lbm_msgs_no_topic_rcved: int
    dgrams_dropped_size: int
    dgrams_dropped_type: int
    dgrams_dropped_version: int
    dgrams_dropped_hdr: int
    dgrams_dropped_sid: int
    dgrams_dropped_window: int


@dataclass(frozen=True, slots=True)
class RmReceiverStatistics(_ReceiverStatistics):
    """LBT-RM receiver transport statistics (``lbm_rcv_transport_stats_lbtrm_t``); fields as in
    :class:`_ReceiverStatistics`."""


@dataclass(frozen=True, slots=True)
class RuReceiverStatistics(_ReceiverStatistics):
    """LBT-RU receiver transport statistics (``lbm_rcv_transport_stats_lbtru_t``).

    Adds *(openum)*: ``creqs_sent`` (connection requests), ``acks_sent``, ``rsts_rcved`` (RSTs from
    the source's address of this session: with its session ID, or bare), ``rsts_refuted`` (bare RSTs
    the source disowned by answering the CREQ that checked them: forged, or from a source that had
    dropped this client and took it back), ``client_id`` (assigned by the source; ``None`` until
    known), ``connected``.  An RST naming another session counts in ``dgrams_dropped_sid``.
    """

    creqs_sent: int
    acks_sent: int
    rsts_rcved: int
    rsts_refuted: int
    client_id: int | None
    connected: bool


@dataclass(frozen=True, slots=True)
class _SourceStatistics:
    """Counters of one sending transport session (shared by LBT-RM and LBT-RU).

    ``msgs_sent``/``bytes_sent``: new DATA datagrams written and their bytes (for LBT-RU every unicast
    copy counts).  ``txw_msgs``/``txw_bytes``: datagrams and payload bytes in the transmission window
    now.  ``nak_pckts_rcved``/``naks_rcved``: NAK packets and the sequence numbers they carried.
    ``naks_ignored``: NAKs within the ignore interval of a retransmission.  ``naks_shed``: NAKs for data
    no longer (or never) in the window.  ``naks_rx_delay_ignored``: NAKs that had to wait for the
    retransmit rate limit.  ``rxs_sent``/``rx_bytes_sent``: retransmissions and their bytes.
    ``ncf_pckts_sent`` *(openum)*: NCF packets; ``ncfs_ignored``, ``ncfs_rx_delay``, ``ncfs_shed``
    *(openum, sent side)*: NCF entries sent by reason.  ``rctlr_data_msgs``: datagrams queued by the
    rate controller for this session; ``rctlr_rx_msgs``: retransmissions waiting for the retransmit
    budget now.  ``sends_refused`` *(openum)*: sends refused while the rate controller was blocked.
    ``sms_sent`` *(openum)*: session messages.  ``dgrams_dropped_*`` *(openum)*: NAKs (and LBT-RU
    CREQs and ACKs) refused, by reason as for receivers (``_sid``: a session ID or NAK port of another
    session, e.g. from receivers of a session that used the port before), plus ``_other``: NAKs in a
    format openum cannot serve (parity NAKs, which need FEC).
    """

    msgs_sent: int
    bytes_sent: int
    txw_msgs: int
    txw_bytes: int
    nak_pckts_rcved: int
    naks_rcved: int
    naks_ignored: int
    naks_shed: int
    naks_rx_delay_ignored: int
    rxs_sent: int
    rx_bytes_sent: int
    ncf_pckts_sent: int
    ncfs_ignored: int
    ncfs_rx_delay: int
    ncfs_shed: int
    rctlr_data_msgs: int
    rctlr_rx_msgs: int
    sends_refused: int
    sms_sent: int
    dgrams_dropped_size: int
    dgrams_dropped_type: int
    dgrams_dropped_version: int
    dgrams_dropped_hdr: int
    dgrams_dropped_sid: int
    dgrams_dropped_other: int


@dataclass(frozen=True, slots=True)
class RmSourceStatistics(_SourceStatistics):
    """LBT-RM source transport statistics (``lbm_src_transport_stats_lbtrm_t``)."""


@dataclass(frozen=True, slots=True)
class RuSourceStatistics(_SourceStatistics):
    """LBT-RU source transport statistics (``lbm_src_transport_stats_lbtru_t``).

    Adds ``num_clients`` (connected receivers now) and *(openum)* ``creqs_rcved``, ``acks_rcved``,
    ``clients_timed_out``, ``rsts_sent``.  UM's LBT-RU structure has no ``txw_*`` or ``rctlr_*``: here
    they are *(openum)*, with the meanings of LBT-RM's (an LBT-RU session has a transmission window and
    a rate controller too).
    """

    num_clients: int
    creqs_rcved: int
    acks_rcved: int
    clients_timed_out: int
    rsts_sent: int


class Drops:
    """Mutable ``dgrams_dropped_*`` counters."""

    __slots__ = ("hdr", "other", "sid", "size", "type", "version")

    def __init__(self) -> None:
        self.size = 0
        self.type = 0
        self.version = 0
        self.hdr = 0
        self.sid = 0
        self.other = 0

    def receiver_fields(self) -> dict[str, int]:
        """A receiving session's ``dgrams_dropped_*`` (``other`` is a source's only)."""
        return {
            "dgrams_dropped_size": self.size,
            "dgrams_dropped_type": self.type,
            "dgrams_dropped_version": self.version,
            "dgrams_dropped_hdr": self.hdr,
            "dgrams_dropped_sid": self.sid,
        }

    def fields(self) -> dict[str, int]:
        """A source session's ``dgrams_dropped_*``."""
        out = self.receiver_fields()
        out["dgrams_dropped_other"] = self.other
        return out


class ReceiverCounters:
    """Mutable per-datagram counters of a receiving session (the detector keeps the loss ones)."""

    __slots__ = (
        "bytes_rcved",
        "drops",
        "lbm_msgs_no_topic_rcved",
        "lbm_msgs_rcved",
        "msgs_rcved",
        "rxs_rcved",
        "sms_rcved",
    )

    def __init__(self) -> None:
        self.msgs_rcved = 0
        self.bytes_rcved = 0
        self.rxs_rcved = 0
        self.sms_rcved = 0
        self.lbm_msgs_rcved = 0
        self.lbm_msgs_no_topic_rcved = 0
        self.drops = Drops()

    def fields(self, det: LossDetector) -> dict[str, Any]:
        stm_n, stm_sum, stm_min, stm_max = det.nak_stm
        tx_n, tx_sum, tx_min, tx_max = det.nak_tx
        return {
            "msgs_rcved": self.msgs_rcved,
            "bytes_rcved": self.bytes_rcved,
            "rxs_rcved": self.rxs_rcved,
            "sms_rcved": self.sms_rcved,
            "lost": det.lost,
            "out_of_order": det.out_of_order,
            "duplicate_data": det.duplicate_data,
            "late_repairs": det.late_repairs,
            "nak_pckts_sent": det.nak_pckts_sent,
            "naks_sent": det.naks_sent,
            "ncf_pckts_rcved": det.ncf_pckts_rcved,
            "ncfs_rcved": det.ncfs_rcved,
            "ncfs_ignored": det.ncfs_ignored,
            "ncfs_rx_delay": det.ncfs_rx_delay,
            "ncfs_shed": det.ncfs_shed,
            "ncfs_unknown": det.ncfs_unknown,
            "nak_stm_min": stm_min // NS_PER_MS,
            "nak_stm_mean": stm_sum // stm_n // NS_PER_MS if stm_n else 0,
            "nak_stm_max": stm_max // NS_PER_MS,
            "nak_tx_min": tx_min,
            "nak_tx_mean": tx_sum // tx_n if tx_n else 0,
            "nak_tx_max": tx_max,
            "unrecovered_txw": det.unrecovered_txw,
            "unrecovered_tmo": det.unrecovered_tmo,
            "losses_pending": det.pending,
            "lbm_msgs_rcved": self.lbm_msgs_rcved,
            "lbm_msgs_no_topic_rcved": self.lbm_msgs_no_topic_rcved,
            **self.drops.receiver_fields(),
            "dgrams_dropped_window": det.out_of_window,
        }
