"""What openum implements of each option: live or refused (ARCHITECTURE.md rule 6).

The option table (:mod:`openum.config._options`) lists every option UM has; this table says which of
them take effect in this version of openum.  An option listed here is read by openum's code and does
what its documentation says, for every value, or, where values are given, for those values only.  An
option that is not listed is *not implemented*: setting it to anything but its default is refused with
a :class:`~openum.ConfigError` naming the option, its scope and where the setting came from, because an
option that is accepted and then ignored is worse than one that is refused (a migrated UM configuration
with ``use_tls 1`` would run in clear text).  The default value stays accepted: it is what openum does.

A test keeps this table honest in both directions (``tests/unit/config/test_implemented.py``): every
option listed is read by code outside :mod:`openum.config`, and every option not listed is refused
when set.  A change that implements an option adds it here.

Users migrating a large UM configuration can let unimplemented options through with a warning (one per
option, when a context is created): ``OPENUM_UNIMPLEMENTED_OPTIONS=warn`` in the environment,
``--allow-unimplemented`` on the command line, or :func:`set_unimplemented_policy` from code.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Final

from openum._errors import ConfigError

__all__ = [
    "ENV_POLICY",
    "IMPLEMENTED",
    "POLICIES",
    "set_unimplemented_policy",
    "unimplemented_policy",
]

#: An option name (every value implemented) or ``(name, (value, ...))`` (only those values, in UM's text
#: form; the default is always accepted).
Entry = str | tuple[str, tuple[str, ...]]

# One tuple per scope; grouped as the option table is.
# fmt: off
IMPLEMENTED: Final[Mapping[str, tuple[Entry, ...]]] = {
    "context": (
        # identity and operation (UM Concepts Guide, sections 3.1, 8.4)
        "context_name", "default_interface", "operational_mode",
        # callbacks
        "resolver_source_notification_function", "source_notification_function",
        "immediate_message_receiver_function", "immediate_message_topic_receiver_function",
        # request/response and unicast immediate messages (10.7, 10.12): the request port and the
        # outgoing UIM connections
        "request_tcp_bind_request_port", "request_tcp_port", "request_tcp_port_low",
        "request_tcp_port_high", "request_tcp_interface", "request_tcp_listen_backlog",
        "request_tcp_reuseaddr", "request_tcp_activity_timeout",
        "response_tcp_activity_timeout", "response_tcp_deletion_timeout", "response_tcp_interface",
        "response_tcp_nodelay", "response_session_maximum_buffer", "response_session_sender_socket_buffer",
        # multicast immediate messages (10.8): addresses, the temporary session, reception
        "mim_address", "mim_incoming_address", "mim_outgoing_address", "mim_destination_port",
        "mim_incoming_destination_port", "mim_outgoing_destination_port", "mim_src_deletion_timeout",
        "mim_implicit_batching_minimum_length", "mim_implicit_batching_interval",
        "mim_transmission_window_size", "mim_transmission_window_limit", "mim_ignore_interval",
        "mim_sm_minimum_interval", "mim_sm_maximum_interval", "mim_ordered_delivery", "mim_activity_timeout",
        "mim_nak_initial_backoff_interval", "mim_nak_backoff_interval", "mim_nak_suppress_interval",
        "mim_nak_generation_interval", "mim_send_naks", "mim_delivery_control_activity_timeout",
        "mim_delivery_control_activity_check_interval", "mim_unrecoverable_loss_function",
        # delivery control (8.6)
        "delivery_control_maximum_total_map_entries",
        # topic resolution over UDP: multicast and unicast through lbmrd (7.1-7.3, 8.1)
        "resolver_datagram_max_size", "resolver_disable_udp_topic_resolution",
        "resolver_initial_advertisement_bps", "resolver_initial_advertisements_per_second",
        "resolver_initial_queries_per_second", "resolver_initial_query_bps",
        "resolver_sustain_advertisement_bps", "resolver_sustain_advertisements_per_second",
        "resolver_sustain_queries_per_second", "resolver_sustain_query_bps",
        "resolver_wildcard_queries_per_second", "resolver_wildcard_query_bps",
        "resolver_multicast_address", "resolver_multicast_incoming_address",
        "resolver_multicast_incoming_port", "resolver_multicast_interface",
        "resolver_multicast_outgoing_address", "resolver_multicast_outgoing_port", "resolver_multicast_port",
        "resolver_multicast_receiver_socket_buffer", "resolver_multicast_ttl",
        "resolver_unicast_activity_timeout", "resolver_unicast_change_interval", "resolver_unicast_daemon",
        "resolver_unicast_force_alive", "resolver_unicast_interface", "resolver_unicast_keepalive_interval",
        "resolver_unicast_port", "resolver_unicast_port_high", "resolver_unicast_port_low",
        "resolver_unicast_ignore_unknown_source", "resolver_unicast_receiver_socket_buffer",
        "resolver_cache_maximum_entries", "resolver_cache_entry_timeout",
        "source_includes_topic_index",
        # LBT-RM (6.3)
        "transport_lbtrm_datagram_max_size", "transport_lbtrm_multicast_address_high",
        "transport_lbtrm_multicast_address_low", "transport_lbtrm_receiver_socket_buffer",
        "transport_lbtrm_source_port_high", "transport_lbtrm_source_port_low",
        "transport_lbtrm_source_socket_buffer",
        "transport_lbtrm_data_rate_limit", "transport_lbtrm_retransmit_rate_limit",
        "transport_lbtrm_rate_interval",
        # LBT-RU (6.2)
        "transport_lbtru_datagram_max_size", "transport_lbtru_maximum_ports", "transport_lbtru_port_high",
        "transport_lbtru_port_low", "transport_lbtru_receiver_socket_buffer",
        "transport_lbtru_source_socket_buffer",
        "transport_lbtru_data_rate_limit", "transport_lbtru_retransmit_rate_limit",
        "transport_lbtru_rate_interval",
        # LBT-IPC and LBT-SMX (6.4, 6.5)
        "transport_lbtipc_id_low", "transport_lbtipc_id_high", "transport_lbtipc_datagram_max_size",
        "transport_lbtipc_receiver_thread_behavior", "transport_lbtipc_pend_behavior_linger_loop_count",
        "transport_lbtsmx_id_low", "transport_lbtsmx_id_high",
        # TCP (6.1)
        "transport_tcp_datagram_max_size", "transport_tcp_maximum_ports", "transport_tcp_port_high",
        "transport_tcp_port_low", "transport_tcp_receiver_socket_buffer",
    ),
    "source": (
        ("transport", ("tcp", "lbtrm", "lbtru", "lbtipc", "lbtsmx")),
        # late join (10.2): the retention buffer and the TIR's late-join options
        "late_join", "retransmit_retention_size_threshold", "retransmit_retention_size_limit",
        "retransmit_retention_age_threshold",
        # batching (8.11)
        "implicit_batching_interval", "implicit_batching_minimum_length",
        # advertisements (8.1)
        "resolver_advertisement_maximum_initial_interval", "resolver_advertisement_minimum_initial_duration",
        "resolver_advertisement_minimum_initial_interval", "resolver_advertisement_minimum_sustain_duration",
        "resolver_advertisement_send_immediate_response", "resolver_advertisement_sustain_interval",
        "resolver_send_final_advertisements", "resolver_send_initial_advertisement",
        # topic sequence number info (8.9)
        "transport_topic_sequence_number_info_active_threshold",
        "transport_topic_sequence_number_info_interval",
        # TCP
        "transport_session_maximum_buffer", "transport_tcp_activity_timeout", "transport_tcp_interface",
        "transport_tcp_listen_backlog", "transport_tcp_multiple_receiver_behavior", "transport_tcp_nodelay",
        "transport_tcp_port", "transport_tcp_reuseaddr", "transport_tcp_sender_socket_buffer",
        "transport_tcp_use_session_id",
        # LBT-RM
        "transport_lbtrm_destination_port", "transport_lbtrm_ignore_interval",
        "transport_lbtrm_multicast_address", "transport_lbtrm_sm_maximum_interval",
        "transport_lbtrm_sm_minimum_interval", "transport_lbtrm_transmission_window_limit",
        "transport_lbtrm_transmission_window_size",
        # LBT-IPC and LBT-SMX
        "transport_lbtipc_id", "transport_lbtipc_behavior", "transport_lbtipc_transmission_window_size",
        "transport_lbtipc_maximum_receivers_per_transport", "transport_lbtipc_sm_interval",
        "transport_lbtsmx_id", "transport_lbtsmx_datagram_max_size",
        "transport_lbtsmx_transmission_window_size", "transport_lbtsmx_maximum_receivers_per_transport",
        "transport_lbtsmx_sm_interval",
        # LBT-RU
        "transport_lbtru_client_activity_timeout", "transport_lbtru_ignore_interval",
        "transport_lbtru_interface", "transport_lbtru_port", "transport_lbtru_sm_maximum_interval",
        "transport_lbtru_sm_minimum_interval", "transport_lbtru_transmission_window_limit",
        "transport_lbtru_transmission_window_size", "transport_lbtru_use_session_id",
    ),
    "receiver": (
        "source_notification_function",
        # late join (10.2): requests over the source's request port, the merge with live data
        "use_late_join", "late_join_info_request_interval", "late_join_info_request_maximum",
        "retransmit_request_interval", "retransmit_request_maximum", "retransmit_request_message_timeout",
        "retransmit_request_outstanding_maximum", "retransmit_initial_sequence_number_request",
        "retransmit_message_caching_proximity",
        # off-transport recovery (10.3): the same requests when the transport could not repair a gap
        "use_otr", "otr_request_initial_delay", "otr_request_minimum_interval",
        "otr_request_maximum_interval", "otr_request_message_timeout", "otr_request_outstanding_maximum",
        "otr_request_log_alert_cooldown", "otr_message_caching_threshold", "otr_request_duration",
        # delivery control (8.6-8.8)
        "delivery_control_maximum_burst_loss", "ordered_delivery",
        # queries (8.1)
        "resolution_no_source_notification_threshold", "resolution_number_of_sources_query_threshold",
        "resolver_query_maximum_initial_interval", "resolver_query_minimum_initial_duration",
        "resolver_query_minimum_initial_interval", "resolver_query_minimum_sustain_duration",
        "resolver_query_sustain_interval",
        # TCP
        "transport_tcp_activity_timeout",
        # LBT-RM
        "transport_lbtrm_activity_timeout", "transport_lbtrm_nak_backoff_interval",
        "transport_lbtrm_nak_generation_interval", "transport_lbtrm_nak_initial_backoff_interval",
        "transport_lbtrm_nak_suppress_interval", "transport_lbtrm_preactivity_timeout",
        "transport_lbtrm_send_naks",
        # LBT-RU
        "transport_lbtru_acknowledgement_interval", "transport_lbtru_activity_timeout",
        "transport_lbtru_connect_interval", "transport_lbtru_interface",
        "transport_lbtru_maximum_connect_attempts", "transport_lbtru_nak_backoff_interval",
        "transport_lbtru_nak_generation_interval", "transport_lbtru_nak_initial_backoff_interval",
        "transport_lbtru_nak_suppress_interval", "transport_lbtru_port_high", "transport_lbtru_port_low",
        "transport_lbtru_send_naks",
    ),
    "wildcard_receiver": (
        # regex and appcb are deprecated since UM 6.1 (Concepts Guide, section 3.4.2)
        ("pattern_type", ("pcre",)),
        "receiver_create_callback", "receiver_delete_callback", "resolver_no_source_linger_timeout",
        "resolver_query_maximum_interval", "resolver_query_minimum_duration",
        "resolver_query_minimum_interval",
    ),
    "event_queue": (
        "queue_delay_warning", "queue_enqueue_notification", "queue_size_warning",
        "queue_age_enabled", "queue_count_enabled", "queue_service_time_enabled",
    ),
    # No HFX receivers and no XSPs yet: nothing of those scopes is implemented.
    "hfx": (),
    "xsp": (),
}
# fmt: on

#: ``refuse`` (the default): setting an unimplemented option raises ConfigError.  ``warn``: it is
#: accepted, and every context created logs one warning per such option it was configured with.
POLICIES: Final = ("refuse", "warn")

#: The environment variable that sets the policy for a whole process (and the processes it starts).
ENV_POLICY: Final = "OPENUM_UNIMPLEMENTED_OPTIONS"

_policy: str | None = None


def set_unimplemented_policy(policy: str | None) -> None:
    """Refuse (``"refuse"``) or let through with a warning (``"warn"``) options openum does not implement.

    ``None`` returns to what ``OPENUM_UNIMPLEMENTED_OPTIONS`` says (``refuse`` when it is not set).  Meant
    for migrating a large UM configuration: under ``warn`` an unimplemented option has no effect, and each
    context created logs one warning per unimplemented option it was configured with.
    """
    global _policy
    if policy is not None and policy not in POLICIES:
        raise ConfigError(
            f"unknown policy {policy!r} for unimplemented options; allowed: {', '.join(POLICIES)}",
            value=policy,
            allowed=", ".join(POLICIES),
        )
    _policy = policy


def unimplemented_policy() -> str:
    """``refuse`` or ``warn``: set by :func:`set_unimplemented_policy`, else by the environment."""
    if _policy is not None:
        return _policy
    value = os.environ.get(ENV_POLICY, "").strip().lower()
    if not value:
        return "refuse"
    if value not in POLICIES:
        raise ConfigError(
            f"${ENV_POLICY} is {value!r}; allowed: {', '.join(POLICIES)} (refuse when not set)",
            value=value,
            allowed=", ".join(POLICIES),
            source=f"${ENV_POLICY}",
        )
    return value
