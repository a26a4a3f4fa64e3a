"""The option table: every configuration option openum knows, in one place.

Each row gives the option's UM name, its scopes, type (with range or allowed values), default, unit, a
one-line doc and the Concepts Guide section that names it. ``default_from`` records where the default
comes from: ``guide`` (stated in the Concepts Guide at ``section``), ``um`` (UM's documented default,
from the UM Configuration Guide or, where noted, UM 6.14's own configuration dump) or ``openum``
(openum's own choice; ``note`` says why).

Units are UM's, so UM flat configuration files load unchanged: most intervals are milliseconds, but a
few durations are seconds in UM (``resolver_advertisement_minimum_sustain_duration``,
``resolver_query_minimum_sustain_duration``, ``resolver_query_minimum_duration``,
``transport_topic_sequence_number_info_active_threshold``, ``otr_request_log_alert_cooldown``,
``monitor_interval``); ``unit`` always says which.  ``None`` as a default means "not set": for interfaces
it means "follow default_interface", for incoming/outgoing variants "follow the combined option".

Rows are grouped by feature.  An option whose default differs by scope has one row per scope.
"""

from __future__ import annotations

from typing import Final

from openum.config._registry import Option
from openum.config._types import (
    AddressPort,
    Bool,
    CallbackType,
    Int,
    Interface,
    IPv4,
    Str,
    choices,
    int_choices,
)

__all__ = ["OPTIONS", "RANGE_PAIRS"]

# Scopes (seed 5): one tuple per combination used below.
C: Final = ("context",)
S: Final = ("source",)
R: Final = ("receiver",)
W: Final = ("wildcard_receiver",)
EQ: Final = ("event_queue",)
HFX: Final = ("hfx",)
XSP: Final = ("xsp",)
SR: Final = ("source", "receiver")
CR: Final = ("context", "receiver")
CEQ: Final = ("context", "event_queue")
CXSP: Final = ("context", "xsp")
CHFX: Final = ("context", "hfx")
RHFX: Final = ("receiver", "hfx")

# Value types used by many rows.
U32: Final = Int(0, 0xFFFFFFFF)
PORT: Final = Int(0, 65535)
NONNEG: Final = Int(0)
POS: Final = Int(1)
BOOL: Final = Bool()
TEXT: Final = Str()
IFACE: Final = Interface()
IP: Final = IPv4()
MCAST: Final = IPv4(multicast=True)
OPMODE: Final = choices("embedded", "sequential")
PEND_BUSY: Final = choices("pend", "busy_wait", aliases={"busy-wait": "busy_wait"})
CHANNEL_BEHAVIOR: Final = choices("deliver", "discard")
TRANSPORTS: Final = choices(
    "tcp",
    "lbtrm",
    "lbtru",
    "lbtipc",
    "lbtsmx",
    "broker",
    aliases={"lbt-rm": "lbtrm", "lbt-ru": "lbtru", "lbt-ipc": "lbtipc", "lbt-smx": "lbtsmx"},
)

# Units.
MS: Final = "milliseconds"
US: Final = "microseconds"
SEC: Final = "seconds"
BPS: Final = "bits per second"
BYTES: Final = "bytes"
#: The largest UDP payload over IPv4 (65,535 less the IP and UDP headers): the ceiling of every option that
#: sizes a UDP datagram (a larger one fails in sendto with EMSGSIZE, so it is refused when set).
UDP_PAYLOAD_MAX: Final = 65507
MSGS: Final = "messages"
ENTRIES: Final = "map entries"
DGRAMS: Final = "datagrams"

FOLLOW_IFACE: Final = (
    "UM's default is default_interface if set, else INADDR_ANY; openum leaves it unset (None) so it follows "
    "default_interface, which is 127.0.0.1 (ARCHITECTURE.md 5)."
)

#: The note of an option whose UM default asks for a feature openum does not have yet: its default here
#: says what openum does (ARCHITECTURE.md rule 6), so setting UM's default is refused, not ignored.
NOT_YET: Final = (
    "UM's default is {um}; openum has no {feature} yet, so it behaves as 0 and its default says so (setting "
    "{um} is refused as not implemented). The default becomes UM's when openum implements it."
)

FROM_DUMP: Final = (
    "Default as UM 6.14 reports it in its configuration dump (github.com/UltraMessaging/cfg_dump, README), "
    "not checked against the Configuration Guide text."
)

# The table keeps one compact call per row for readability; the formatter would spread each over 10 lines.
# fmt: off
_ROWS: Final[tuple[Option, ...]] = (
    # --- context: identity, threading and operation (seed 3.1, 8.4, 11) -------------------------------------
    Option(
        "context_name",
        C,
        Str(max_length=128, pattern=r"[A-Za-z0-9_.-]*", pattern_doc="letters, digits, '_', '.', '-'"),
        None,
        "Name of the context; selects per-context values in XML configuration files.", "3.1",
    ),
    Option(
        "operational_mode", CXSP, OPMODE, "embedded",
        "embedded: a context (XSP) thread runs the event loop; sequential: the application calls "
        "process_events().",
        "8.4", default_from="guide",
    ),
    Option(
        "default_interface", C, IFACE, "127.0.0.1",
        "Interface for topic resolution and transports unless a per-feature interface is set.",
        "7.3", default_from="openum",
        note="UM defaults to INADDR_ANY (the first multicast-capable interface); openum keeps everything on"
             " loopback until a deployment sets this (ARCHITECTURE.md 5).",
    ),
    Option(
        "fd_management_type",
        C,
        choices("poll", "select", "epoll", "devpoll", "wsaeventselect", "wincompport"),
        "epoll",
        "Mechanism the context thread uses to wait for socket events.", "8.5.1", default_from="openum",
        note="UM's Unix default is select; openum's context loop is built on epoll (ARCHITECTURE.md 3), "
             "falling back to the platform's best selector where epoll is missing.",
    ),
    Option(
        "file_descriptor_management_behavior", C, PEND_BUSY, "pend",
        "pend: the context/XSP thread sleeps until a socket event; busy_wait: it polls in a tight loop.",
        "11.1.1", default_from="guide",
    ),
    Option(
        "multiple_receive_maximum_datagrams", C, NONNEG, 0,
        "Datagrams read per recvmmsg() call on UDP sockets (0: do not use recvmmsg).",
        "11.6", unit=DGRAMS, default_from="guide",
    ),
    Option(
        "receiver_callback_service_time_enabled", C, BOOL, False,
        "Collect min/mean/max receiver callback service time statistics.", "",
    ),
    Option(
        "source_includes_topic_index", C, BOOL, True,
        "Include the [topic_idx] suffix in source strings of messages and source notifications.", "3.3.1",
    ),
    Option(
        "transport_session_multiple_sending_threads", C, BOOL, True,
        "The application may send on one transport session from several threads (0 makes sends "
        "thread-unsafe).",
        "",
    ),
    Option(
        "transport_session_single_receiving_thread", C, BOOL, False,
        "Only one thread processes received transport messages, allowing lock-free receive paths.", "11.4",
    ),
    Option(
        "compatibility_include_pre_um_6_0_behavior", C, BOOL, False,
        "Interoperate with pre-6.0 applications (adds overhead on the wire).", "",
    ),
    Option(
        "round_robin_xsp_count", C, NONNEG, 0,
        "Number of XSPs the context creates and assigns receiving transport sessions to round-robin (0: "
        "none).",
        "", unit="XSPs", note=FROM_DUMP,
    ),
    Option(
        "transport_demux_tablesz", R, POS, 1,
        "Size (power of two) of the per-transport-session table of receiver delivery controllers.",
        "11.7", session=True,
    ),
    Option(
        "broker", C, AddressPort(list_valued=True), None,
        "A queuing broker IP:port for the 'broker' transport; each setting adds one, 0.0.0.0:0 clears the "
        "list.",
        "6.6",
    ),
    # --- callbacks (seed 3.7: settable from code only) ------------------------------------------------------
    Option(
        "context_event_function", C, CallbackType("callback(context, event, event_data, clientd)"), None,
        "Called for context events; inline or through an event queue.", "",
    ),
    Option(
        "source_event_function", C, CallbackType("callback(context, event, event_data, clientd)"), None,
        "Called for context-level source events such as a MIM source wakeup.", "",
    ),
    Option(
        "source_notification_function",
        CR,
        CallbackType("create(source_string, clientd) -> source_clientd; delete(source_string, ...)"),
        None,
        "Called when a receiver's delivery controller for a source is created and deleted.", "2.11.1",
    ),
    Option(
        "resolver_source_notification_function",
        C,
        CallbackType("callback(topic, source_string, clientd)"),
        None,
        "Called on the context thread when topic resolution discovers a new source on any topic.", "10.1.3",
    ),
    Option(
        "resolver_event_function", C, CallbackType("callback(context, event, event_data, clientd)"), None,
        "Called on topic resolution events (TCP-based TR interest filtering affects it).", "7.3.2",
    ),
    Option(
        "transport_mapping_function",
        C,
        CallbackType("mapping(context, new_transport_info, clientd) -> xsp"),
        None,
        "Called when the context is about to join a transport session; returns the XSP to map it to.",
        "10.1.3",
    ),
    Option(
        "zero_transports_function", XSP, CallbackType("callback(xsp, clientd)"), None,
        "Called when the number of transport sessions mapped to an XSP drops to zero.", "10.1.4",
    ),
    Option(
        "immediate_message_receiver_function", C, CallbackType("callback(message, clientd)"), None,
        "Receives topicless immediate messages (UIM and MIM) and requests.", "10.15",
    ),
    Option(
        "immediate_message_topic_receiver_function", C, CallbackType("callback(message, clientd)"), None,
        "Receives immediate messages with a topic for which the context has no receiver.", "10.15",
    ),
    # --- topic resolution: multicast UDP network (seed 8.1) -------------------------------------------------
    Option(
        "resolver_multicast_address", C, MCAST, "224.9.10.11",
        "Multicast group of UDP topic resolution (sets both the incoming and the outgoing group).", "8.1",
    ),
    Option(
        "resolver_multicast_incoming_address", C, MCAST, None,
        "Multicast group on which the context listens for topic resolution.", "",
        note="None: resolver_multicast_address (UM's documented default).",
    ),
    Option(
        "resolver_multicast_outgoing_address", C, MCAST, None,
        "Multicast group to which the context sends topic resolution.", "",
        note="None: resolver_multicast_address (UM's documented default).",
    ),
    Option(
        "resolver_multicast_port", C, PORT, 12965,
        "UDP port of multicast topic resolution (sets both the incoming and the outgoing port).", "8.1",
    ),
    Option(
        "resolver_multicast_incoming_port", C, PORT, None,
        "UDP port on which the context listens for multicast topic resolution.", "",
        note="None: resolver_multicast_port (UM's documented default).",
    ),
    Option(
        "resolver_multicast_outgoing_port", C, PORT, None,
        "UDP port to which the context sends multicast topic resolution.", "",
        note="None: resolver_multicast_port (UM's documented default).",
    ),
    Option(
        "resolver_multicast_interface", C, IFACE, None,
        "Interface used to send and receive multicast topic resolution.",
        "", default_from="openum", note=FOLLOW_IFACE,
    ),
    Option(
        "resolver_multicast_ttl", C, Int(0, 255), 16,
        "IP time-to-live of multicast topic resolution datagrams, and of LBT-RM data datagrams.", "",
        unit="hops", note=FROM_DUMP,
    ),
    Option(
        "resolver_multicast_receiver_socket_buffer", C, NONNEG, 8388608,
        "SO_RCVBUF of the multicast topic resolution socket (the OS may cap it).",
        "", unit=BYTES, note=FROM_DUMP,
    ),
    # --- topic resolution: unicast UDP through lbmrd (seed 8.1.9) -------------------------------------------
    Option(
        "resolver_unicast_daemon", C, AddressPort(with_interface=True, list_valued=True), None,
        "A unicast resolver daemon (lbmrd) [iface->]IP:port; each setting adds one. Set: unicast TR instead"
        " of multicast.",
        "8.1",
    ),
    Option(
        "resolver_unicast_interface", C, IFACE, None,
        "Interface used for unicast topic resolution.", "", default_from="openum", note=FOLLOW_IFACE,
    ),
    Option(
        "resolver_unicast_port_low", C, PORT, 14402,
        "Lowest local UDP port used for unicast topic resolution.", "", note=FROM_DUMP,
    ),
    Option(
        "resolver_unicast_port_high", C, PORT, 14406,
        "Highest local UDP port used for unicast topic resolution.", "", note=FROM_DUMP,
    ),
    Option(
        "resolver_unicast_receiver_socket_buffer", C, NONNEG, 8388608,
        "SO_RCVBUF of the unicast topic resolution socket.", "", unit=BYTES, note=FROM_DUMP,
    ),
    Option(
        "resolver_unicast_keepalive_interval", C, POS, 500,
        "Interval of keepalives to lbmrd while the context sends no TIRs or TQRs.",
        "8.1.9", unit=MS, note=FROM_DUMP,
    ),
    Option(
        "resolver_unicast_force_alive", C, BOOL, False,
        "Send lbmrd keepalives from context creation, before any topic exists.", "8.1.9",
    ),
    Option(
        "resolver_unicast_activity_timeout", C, NONNEG, 1000,
        "Time without traffic from an lbmrd after which the context considers it inactive.",
        "", unit=MS, note=FROM_DUMP,
    ),
    Option(
        "resolver_unicast_change_interval", C, POS, 500,
        "Interval at which the context switches to the next active lbmrd (randomised).",
        "", unit=MS, note=FROM_DUMP,
    ),
    Option(
        "resolver_unicast_check_interval", C, NONNEG, 200,
        "Interval at which the context checks the activity of its lbmrd daemons.",
        "", unit=MS, note=FROM_DUMP,
    ),
    Option(
        "resolver_unicast_ignore_unknown_source", C, BOOL, True,
        "Ignore unicast topic resolution datagrams that do not come from a configured lbmrd.",
        "", note=FROM_DUMP,
    ),
    Option(
        "resolver_unicast_address", C, IP, None,
        "Deprecated (UMS 5.0): IP address of the lbmrd; use resolver_unicast_daemon.", "", deprecated=True,
        note="UM default 0.0.0.0 means multicast topic resolution; None means the same here.",
    ),
    Option(
        "resolver_unicast_destination_port", C, PORT, 15380,
        "Deprecated (UMS 5.0): UDP port of the lbmrd; also lbmrd's default listening port.",
        "", deprecated=True,
    ),
    Option(
        "resolver_unicast_port", C, PORT, 0,
        "Deprecated (UMS 5.0): local UDP port for unicast TR (0: pick from resolver_unicast_port_low..high).",
        "", deprecated=True,
    ),
    # --- topic resolution: UDP operation, phases and rate limits (seed 8.1.4 - 8.1.8, 2.12.2) ---------------
    Option(
        "resolver_advertisement_minimum_initial_interval", S, NONNEG, 10,
        "Interval between a new source's first and second advertisement; doubles up to the maximum (0: no "
        "initial phase).",
        "8.1.4", unit=MS, default_from="guide",
    ),
    Option(
        "resolver_advertisement_maximum_initial_interval", S, NONNEG, 500,
        "Longest (last) interval of the initial advertising phase (0: no initial phase).",
        "8.1.4", unit=MS, default_from="guide",
    ),
    Option(
        "resolver_advertisement_minimum_initial_duration", S, NONNEG, 5000,
        "Minimum duration of the initial advertising phase (0: the phase never ends).",
        "8.1.4", unit=MS, default_from="guide",
    ),
    Option(
        "resolver_advertisement_sustain_interval", S, NONNEG, 1000,
        "Interval between advertisements in the sustaining phase (0: no sustaining phase).",
        "8.1.5", unit=MS, default_from="guide",
    ),
    Option(
        "resolver_advertisement_minimum_sustain_duration", S, NONNEG, 60,
        "Minimum duration of the sustaining advertising phase (0: the phase never ends); unit is seconds as"
        " in UM.",
        "8.1.5", unit=SEC, default_from="guide",
        note="UM's unit is seconds (Configuration Guide; UM 6.14 dumps 60), so UM files load unchanged: 60 "
             "s = 60000 ms.",
    ),
    Option(
        "resolver_advertisement_send_immediate_response", S, BOOL, True,
        "Answer a matching query with a TIR at once (1) or with the next advertisement the phase schedule "
        "sends (0); either way a query starts another sustaining phase.",
        "", note=FROM_DUMP,
    ),
    Option(
        "resolver_send_initial_advertisement", S, BOOL, True,
        "Send an advertisement as soon as the source is created (phases run either way).", "",
    ),
    Option(
        "resolver_send_final_advertisements", S, NONNEG, 0,
        "Final advertisements sent when the source is deleted, so receivers can deliver EOS (0: none).",
        "2.11.1", unit="advertisements", note=FROM_DUMP,
    ),
    Option(
        "resolver_query_minimum_initial_interval", R, NONNEG, 20,
        "Interval between a new receiver's first and second query; doubles up to the maximum (0: no initial"
        " phase).",
        "8.1.4", unit=MS, default_from="guide",
    ),
    Option(
        "resolver_query_maximum_initial_interval", R, NONNEG, 200,
        "Longest (last) interval of the initial querying phase (0: no initial phase).",
        "8.1.4", unit=MS, default_from="guide",
    ),
    Option(
        "resolver_query_minimum_initial_duration", R, NONNEG, 5000,
        "Minimum duration of the initial querying phase (0: the phase never ends).",
        "8.1.4", unit=MS, default_from="guide",
    ),
    Option(
        "resolver_query_sustain_interval", R, NONNEG, 1000,
        "Interval between queries of an unresolved receiver in the sustaining phase (0: no sustaining "
        "phase).",
        "8.1.5", unit=MS, default_from="guide",
    ),
    Option(
        "resolver_query_minimum_sustain_duration", R, NONNEG, 60,
        "Minimum duration of the sustaining querying phase (0: the phase never ends); unit is seconds as in"
        " UM.",
        "8.1.5", unit=SEC, default_from="guide",
        note="UM's unit is seconds (Configuration Guide; UM 6.14 dumps 60), so UM files load unchanged: 60 "
             "s = 60000 ms.",
    ),
    Option(
        "resolution_number_of_sources_query_threshold", R, NONNEG, 10000000,
        "A receiver stops querying while it knows at least this many sources (0: never query).",
        "8.1.5", unit="sources",
        note="Also stated by the older HTML edition of the Concepts Guide.",
    ),
    Option(
        "resolution_no_source_notification_threshold", R, NONNEG, 0,
        "Deliver NO_SOURCE_NOTIFICATION after this many unanswered queries (0: never).",
        "8.2.4", unit="queries",
    ),
    Option(
        "resolver_initial_advertisements_per_second", C, NONNEG, 1000,
        "Context-wide cap on initial-phase advertisements per second (0: no cap).",
        "8.1.4", unit="advertisements per second", note=FROM_DUMP,
    ),
    Option(
        "resolver_initial_advertisement_bps", C, NONNEG, 1000000,
        "Context-wide cap on the initial-phase advertisement rate (0: no cap).",
        "8.1.4", unit=BPS, note=FROM_DUMP,
    ),
    Option(
        "resolver_sustain_advertisements_per_second", C, NONNEG, 0,
        "Context-wide cap on sustaining-phase advertisements per second (0: no cap).",
        "8.1.5", unit="advertisements per second", note=FROM_DUMP,
    ),
    Option(
        "resolver_sustain_advertisement_bps", C, NONNEG, 1000000,
        "Context-wide cap on the sustaining-phase advertisement rate (0: no cap).", "8.1.5", unit=BPS,
    ),
    Option(
        "resolver_initial_queries_per_second", C, NONNEG, 1000,
        "Context-wide cap on initial-phase queries per second (0: no cap).",
        "8.1.4", unit="queries per second", note=FROM_DUMP,
    ),
    Option(
        "resolver_initial_query_bps", C, NONNEG, 1000000,
        "Context-wide cap on the initial-phase query rate (0: no cap).", "8.1.4", unit=BPS, note=FROM_DUMP,
    ),
    Option(
        "resolver_sustain_queries_per_second", C, NONNEG, 0,
        "Context-wide cap on sustaining-phase queries per second (0: no cap).",
        "8.1.5", unit="queries per second", note=FROM_DUMP,
    ),
    Option(
        "resolver_sustain_query_bps", C, NONNEG, 1000000,
        "Context-wide cap on the sustaining-phase query rate (0: no cap).", "8.1.5", unit=BPS, note=FROM_DUMP,
    ),
    Option(
        "resolver_wildcard_queries_per_second", C, NONNEG, 0,
        "Context-wide cap on wildcard queries per second (0: no cap).", "", unit="queries per second",
    ),
    Option(
        "resolver_wildcard_query_bps", C, NONNEG, 1000000,
        "Context-wide cap on the wildcard query rate (0: no cap).", "", unit=BPS,
    ),
    Option(
        "resolver_datagram_max_size", C, Int(500, UDP_PAYLOAD_MAX), 8192,
        "Largest topic resolution datagram the context sends (TIRs/TQRs are packed up to it); at most "
        "65,507 (what one UDP datagram carries over IPv4).",
        "", unit=BYTES,
        note="UM's minimum is not documented in the sources found; 500 bytes is openum's floor.",
    ),
    Option(
        "resolver_cache", C, BOOL, True,
        "Keep the resolver cache of discovered sources; must stay 1 with TCP-based TR or wildcard receivers.",
        "",
    ),
    Option(
        "resolver_cache_maximum_entries", C, NONNEG, 100000,
        "Sources learned from the network kept in the resolver cache at most; past it the least recently "
        "heard is forgotten, counted as cache_entries_evicted (0: no limit).",
        "7.1.2", unit="sources", default_from="openum",
        note="openum's own option: UM bounds nothing (UM Concepts Guide, section 7.1.2: the cache can grow "
        "without bound), so forged TIRs could fill memory; 100,000 sources take about 30 MB.",
    ),
    Option(
        "resolver_cache_entry_timeout", C, NONNEG, 600000,
        "A source learned from the network and not advertised for this long leaves the resolver cache, "
        "counted as cache_entries_expired; joined receivers are not affected (0: never).",
        "7.1.2", unit=MS, default_from="openum",
        note="openum's own option: UM keeps UDP-resolved entries until EOS (UM Concepts Guide, section "
        "7.1.2); 10 minutes outlasts the default 60 s sustaining phase many times over.",
    ),
    Option(
        "resolver_receiver_map_tablesz", C, NONNEG, 131111,
        "Hash table size (a prime) of the receiver-side resolver cache.", "7.1.2", unit=ENTRIES,
    ),
    Option(
        "resolver_source_map_tablesz", C, NONNEG, 131111,
        "Hash table size (a prime) of the source-side resolver cache.", "", unit=ENTRIES,
    ),
    Option(
        "resolver_wildcard_receiver_map_tablesz", C, NONNEG, 10273,
        "Hash table size (a prime) for wildcard receiver patterns (0: do not cache patterns).",
        "", unit=ENTRIES,
    ),
    Option(
        "resolver_string_hash_function", C, choices("classic", "djb2", "sdbm", "murmur2"), "murmur2",
        "Hash function for topic name strings in the resolver tables.", "",
    ),
    Option(
        "resolver_disable_udp_topic_resolution", C, BOOL, False,
        "Send and process no UDP topic resolution at all (only TCP-based TR through the SRS).", "7.3.4",
    ),
    Option(
        "disable_extended_topic_resolution_message_options", C, BOOL, False,
        "Compatibility with LBM 3.5.3 / UME 2.2.4 topic resolution (drops extended TR options).", "",
    ),
    Option(
        "resolver_context_name_query_minimum_interval", C, NONNEG, 100,
        "Interval between a source's first and second Store (context) name query; doubles up to the maximum.",
        "8.1.7", unit=MS, default_from="guide",
    ),
    Option(
        "resolver_context_name_query_maximum_interval", C, NONNEG, 1000,
        "Longest interval between Store (context) name queries.", "8.1.7", unit=MS, default_from="guide",
    ),
    Option(
        "resolver_context_name_query_duration", C, NONNEG, 0,
        "How long a source queries for a Store name (0: until the name resolves).",
        "8.1.7", unit=MS, default_from="guide",
    ),
    Option(
        "resolver_context_name_activity_timeout", C, NONNEG, 10000,
        "Forget a resolved Store (context) name after this long without its advertisement.",
        "", unit=MS, note=FROM_DUMP,
    ),
    Option(
        "resolver_context_advertisement_interval", C, NONNEG, 10000,
        "Deprecated (UM 6.0): interval between context advertisements (0: none).",
        "", unit=MS, deprecated=True,
    ),
    # --- topic resolution: TCP-based TR through the SRS (seed 7.3) ------------------------------------------
    Option(
        "resolver_service", C, AddressPort(with_interface=True, list_valued=True), None,
        "An SRS [iface->]IP:port for TCP-based TR (up to 5); each setting adds one, 0.0.0.0:0 clears the "
        "list.",
        "7.3.4",
        note="UM also accepts Iface:SrcPort-> prefixes and DNS names; AddressPort takes neither yet.",
    ),
    Option(
        "resolver_service_interest_mode", C, choices("filter", "flood"), "filter",
        "filter: the SRS sends only SIRs for topics the context has receivers for; flood: all SIRs.", "7.3.2",
    ),
    # --- wildcard receivers (seed 3.4.2, 8.1.3) -------------------------------------------------------------
    Option(
        "pattern_type", W, choices("pcre", "regex", "appcb"), "pcre",
        "Pattern syntax of the wildcard receiver (regex and appcb are deprecated since UM 6.1).", "3.4.2",
        note="openum evaluates pcre patterns with Python's re module, which covers the PCRE syntax UM users"
             " write.",
    ),
    Option(
        "pattern_callback", W, CallbackType("callback(topic, clientd) -> 0 to match"), None,
        "Deprecated: application callback deciding topic matches for pattern_type appcb.",
        "", deprecated=True,
    ),
    Option(
        "receiver_create_callback", W, CallbackType("create(topic, attrs, clientd)"), None,
        "Called on the context thread before the receiver of a matching topic is created; attrs (a copy of "
        "its receiver options) may be changed for that topic.",
        "3.4.2",
    ),
    Option(
        "receiver_delete_callback", W, CallbackType("delete(topic, clientd)"), None,
        "Called on the context thread before the receiver of a matching topic is deleted (after "
        "resolver_no_source_linger_timeout, or at close).",
        "3.4.2",
    ),
    Option(
        "resolver_query_minimum_interval", W, NONNEG, 50,
        "Interval between a wildcard receiver's first and second query; doubles up to the maximum (0: no "
        "queries).",
        "", unit=MS,
    ),
    Option(
        "resolver_query_maximum_interval", W, NONNEG, 1000,
        "Longest interval between wildcard queries (0: no wildcard queries).", "", unit=MS,
    ),
    Option(
        "resolver_query_minimum_duration", W, NONNEG, 60,
        "How long a wildcard pattern is queried (0: forever); unit is seconds as in UM.", "", unit=SEC,
        note="Named by the older HTML edition of the Concepts Guide (wildcard topic resolution).",
    ),
    Option(
        "resolver_no_source_linger_timeout", W, NONNEG, 1000,
        "Linger before a wildcard-created receiver whose topic has no sources left is deleted.",
        "10.17.3", unit=MS,
    ),
    Option(
        "hf_receiver", W, BOOL, False,
        "Create hot-failover receivers for the topics matching the wildcard pattern.", "10.17.3",
    ),
    # --- source: transport choice (seed 6) ------------------------------------------------------------------
    Option(
        "transport", S, TRANSPORTS, "tcp",
        "Transport used by sources of this topic.", "6.1", default_from="guide", session=True,
    ),
    # --- transport TCP (seed 6.1, 2.9.2, 2.10) --------------------------------------------------------------
    Option("transport_tcp_port_low", C, PORT, 14371, "Lowest port of the TCP transport port pool.", "2.9.2"),
    Option(
        "transport_tcp_port_high", C, PORT, 14390,
        "Highest port of the TCP transport port pool.", "2.9.2",
    ),
    Option(
        "transport_tcp_maximum_ports", C, Int(1, 65535), 10,
        "Most TCP transport sessions (ports) one context takes from the pool.", "2.9.2", unit="ports",
    ),
    Option(
        "transport_tcp_port", S, PORT, 0,
        "TCP port of this source's transport session (0: pick from transport_tcp_port_low..high).",
        "8.1.11", session=True,
    ),
    Option(
        "transport_tcp_interface", SR, IFACE, None,
        "Interface a TCP source listens on / a TCP receiver connects from.",
        "", default_from="openum", session=True, note=FOLLOW_IFACE,
    ),
    Option(
        "transport_tcp_datagram_max_size", C, Int(500, 65535), 65535,
        "Largest UM datagram (headers plus data) on a TCP transport session.", "8.7.1", unit=BYTES,
        note="The Concepts Guide (8.7.1) says 64K; the Configuration Guide gives 65535.",
    ),
    Option(
        "transport_tcp_nodelay", S, BOOL, True,
        "Set TCP_NODELAY (disable Nagle) on TCP transport sockets.", "", session=True,
    ),
    Option(
        "transport_tcp_listen_backlog", S, POS, 5,
        "listen() backlog of the TCP source socket.", "", unit="connections", session=True,
    ),
    Option(
        "transport_tcp_reuseaddr", S, BOOL, False,
        "Set SO_REUSEADDR on the TCP source socket.", "", session=True, note=FROM_DUMP,
    ),
    Option(
        "transport_tcp_exclusiveaddr", S, BOOL, True,
        "Set SO_EXCLUSIVEADDRUSE on the TCP source socket (Windows only; ignored elsewhere).",
        "", session=True, note=FROM_DUMP,
    ),
    Option(
        "transport_tcp_sender_socket_buffer", S, NONNEG, 0,
        "SO_SNDBUF of the TCP source socket (0: OS default / autotuning).", "", unit=BYTES, session=True,
    ),
    Option(
        "transport_tcp_receiver_socket_buffer", C, NONNEG, 0,
        "SO_RCVBUF of TCP receiver sockets (0: OS default / autotuning).", "", unit=BYTES,
    ),
    Option(
        "transport_tcp_activity_timeout", S, NONNEG, 10000,
        "A TCP source closes a connection that has not presented the session id after this long, and "
        "(receiver-paced) a receiver that has taken no waiting data for this long (0: never).",
        "17.5", unit=MS, default_from="openum", session=True,
        note="UM's default is 0 (never). openum bounds how long one stranger or one suspended receiver "
             "holds a receiver-paced source up (UM Concepts Guide, section 2.10.7, Suspended Receiver "
             "Problem), with the default of transport_lbtru_client_activity_timeout; 0 restores UM's "
             "behaviour.",
    ),
    Option(
        "transport_tcp_activity_timeout", R, NONNEG, 0,
        "Close a TCP transport connection after this long without activity (0: never).",
        "17.5", unit=MS, session=True,
    ),
    Option(
        "transport_tcp_activity_method", R, choices("timer", "SO_KEEPALIVE"), "timer",
        "How a TCP receiver detects a dead source: UM timer or TCP keepalives.", "17.5", session=True,
    ),
    Option(
        "transport_tcp_multiple_receiver_behavior",
        S,
        choices("normal", "source_paced", "bounded_latency"),
        "normal",
        "normal: receiver-paced (send blocks when any receiver is full); source_paced: drop for slow "
        "receivers.",
        "6.1", session=True,
        note="bounded_latency is deprecated since UM 6.9 and behaves as source_paced.",
    ),
    Option(
        "transport_tcp_multiple_receiver_send_order", S, choices("serial", "random"), "serial",
        "Order in which a TCP source writes a message to its receivers.", "", session=True,
    ),
    Option(
        "transport_tcp_use_session_id", S, BOOL, True,
        "Put a random session ID in TCP transport advertisements and check it on connect (0: pre-6.0 peers).",
        "6.1", session=True,
    ),
    Option(
        "transport_source_side_filtering_behavior", S, choices("none", "inclusion", "ulb"), "none",
        "none: send all topics to all receivers; inclusion: a unicast source sends a receiver only its "
        "topics.",
        "2.9.1", session=True,
    ),
    Option(
        "transport_session_maximum_buffer", S, NONNEG, 65536,
        "UM-level buffering cap of a TCP transport session (all receivers when normal, each when "
        "source_paced).",
        "", unit=BYTES, session=True,
    ),
    Option(
        "transport_tcp_dro_loss_recovery_timeout", R, NONNEG, 0,
        "Time a TCP receiver behind a DRO waits for lost data before declaring it lost (0: off).",
        "", unit=MS, session=True, note=FROM_DUMP,
    ),
    # --- transport LBT-RU (seed 6.2) ------------------------------------------------------------------------
    Option(
        "transport_lbtru_port_low", C, PORT, 14380,
        "Lowest UDP port of the LBT-RU source port pool.", "2.9.2",
    ),
    Option(
        "transport_lbtru_port_high", C, PORT, 14389,
        "Highest UDP port of the LBT-RU source port pool.", "2.9.2",
    ),
    Option(
        "transport_lbtru_port_low", R, PORT, 14360,
        "Lowest local UDP port of LBT-RU receivers.", "", note=FROM_DUMP,
    ),
    Option(
        "transport_lbtru_port_high", R, PORT, 14379,
        "Highest local UDP port of LBT-RU receivers.", "", note=FROM_DUMP,
    ),
    Option(
        "transport_lbtru_maximum_ports", C, Int(1, 65535), 5,
        "Most LBT-RU transport sessions (ports) one context takes from the pool.", "2.9.2", unit="ports",
    ),
    Option(
        "transport_lbtru_port", S, PORT, 0,
        "UDP port of this source's LBT-RU session (0: pick from transport_lbtru_port_low..high).",
        "", session=True,
    ),
    Option(
        "transport_lbtru_interface", SR, IFACE, None,
        "Interface of the LBT-RU source / receiver socket.",
        "", default_from="openum", session=True, note=FOLLOW_IFACE,
    ),
    Option(
        "transport_lbtru_datagram_max_size", C, Int(500, UDP_PAYLOAD_MAX), 8192,
        "Largest UM datagram (headers plus data) on an LBT-RU transport session; at most 65,507 "
        "(what one UDP datagram carries over IPv4).",
        "8.7.1", unit=BYTES, default_from="guide",
    ),
    Option(
        "transport_lbtru_data_rate_limit", C, NONNEG, 10000000,
        "Rate limit of new LBT-RU data per context.", "2.12.1", unit=BPS,
    ),
    Option(
        "transport_lbtru_retransmit_rate_limit", C, NONNEG, 5000000,
        "Rate limit of LBT-RU retransmissions per context.", "2.12.1", unit=BPS,
    ),
    Option(
        "transport_lbtru_rate_interval", C, POS, 100,
        "Period of the LBT-RU rate limiter (budget = limit x interval).", "2.12.1", unit=MS,
    ),
    Option(
        "transport_lbtru_receiver_socket_buffer", C, NONNEG, 8388608,
        "SO_RCVBUF of LBT-RU sockets.", "", unit=BYTES, note=FROM_DUMP,
    ),
    Option(
        "transport_lbtru_source_socket_buffer", C, NONNEG, 1048576,
        "SO_SNDBUF of LBT-RU source sockets.", "", unit=BYTES, note=FROM_DUMP,
    ),
    Option(
        "transport_lbtru_recycle_receive_buffers", C, BOOL, False,
        "Reuse LBT-RU receive buffers instead of allocating one per datagram.", "11.3",
    ),
    Option(
        "transport_lbtru_transmission_window_size", S, NONNEG, 25165824,
        "Bytes of sent LBT-RU datagrams kept for retransmission.", "", unit=BYTES, session=True,
    ),
    Option(
        "transport_lbtru_transmission_window_limit", S, NONNEG, 0,
        "Cap on the LBT-RU transmission window including overhead (0: only the size applies).",
        "", unit=BYTES, session=True, note=FROM_DUMP,
    ),
    Option(
        "transport_lbtru_ignore_interval", S, NONNEG, 500,
        "After a retransmission, ignore further NAKs for that datagram this long.", "", unit=MS, session=True,
    ),
    Option(
        "transport_lbtru_sm_minimum_interval", S, POS, 200,
        "First session-message interval after the LBT-RU session goes idle; doubles up to the maximum.",
        "", unit=MS, session=True,
    ),
    Option(
        "transport_lbtru_sm_maximum_interval", S, POS, 10000,
        "Longest interval between LBT-RU session messages while idle.", "", unit=MS, session=True,
    ),
    Option(
        "transport_lbtru_client_activity_timeout", S, POS, 10000,
        "An LBT-RU source drops a receiver (client) it has not heard from for this long.",
        "", unit=MS, session=True,
    ),
    Option(
        "transport_lbtru_client_map_size", S, POS, 7,
        "Hash table size (a prime) of an LBT-RU source's receiver (client) map.",
        "", unit=ENTRIES, session=True, note=FROM_DUMP,
    ),
    Option(
        "transport_lbtru_use_session_id", S, BOOL, True,
        "Put a random session ID in LBT-RU advertisements and data (0: pre-3.3 receivers).",
        "6.2", session=True,
    ),
    Option(
        "transport_lbtru_activity_timeout", R, POS, 60000,
        "An LBT-RU receiver ends the session (EOS) after this long without traffic.",
        "", unit=MS, session=True,
    ),
    Option(
        "transport_lbtru_connect_interval", R, POS, 100,
        "Interval between LBT-RU connection requests while connecting.", "", unit=MS, session=True,
    ),
    Option(
        "transport_lbtru_maximum_connect_attempts", R, POS, 600,
        "LBT-RU connection requests before the receiver gives up on the session.",
        "", unit="attempts", session=True,
    ),
    Option(
        "transport_lbtru_acknowledgement_interval", R, POS, 500,
        "Interval of LBT-RU receiver acknowledgements (keepalives) to the source.", "", unit=MS, session=True,
    ),
    Option(
        "transport_lbtru_nak_initial_backoff_interval", R, NONNEG, 0,
        "Random backoff (0.5x-1.5x) before the first NAK for a gap (0: NAK at once).",
        "", unit=MS, session=True,
    ),
    Option(
        "transport_lbtru_nak_backoff_interval", R, POS, 200,
        "Backoff (randomised 0.5x-1.5x) before repeating a NAK for the same datagram.",
        "", unit=MS, session=True,
    ),
    Option(
        "transport_lbtru_nak_suppress_interval", R, NONNEG, 1000,
        "After an NCF, do not NAK that datagram again for this long.", "", unit=MS, session=True,
    ),
    Option(
        "transport_lbtru_nak_generation_interval", R, Int(5), 10000,
        "Longest time the receiver NAKs for a lost datagram before declaring it unrecoverable.",
        "10.17.2", unit=MS, session=True,
    ),
    Option(
        "transport_lbtru_send_naks", R, BOOL, True,
        "Send NAKs for LBT-RU gaps (0: report loss without NAKing).", "", session=True,
    ),
    Option(
        "transport_lbtru_smart_src_transmission_window_buffer_count", S, POS, 16384,
        "Preallocated transmission window buffers of an LBT-RU Smart Source.",
        "11.8.3", unit="buffers", session=True, note=FROM_DUMP,
    ),
    # --- transport LBT-RM (seed 6.3, 2.12) ------------------------------------------------------------------
    Option(
        "transport_lbtrm_multicast_address_low", C, MCAST, "224.10.10.10",
        "Lowest multicast group of the LBT-RM transport session pool.", "2.9.2",
    ),
    Option(
        "transport_lbtrm_multicast_address_high", C, MCAST, "224.10.10.14",
        "Highest multicast group of the LBT-RM transport session pool.", "2.9.2",
    ),
    Option(
        "transport_lbtrm_multicast_address", S, MCAST, None,
        "Multicast group of this source's LBT-RM session (None: next group of the pool, round-robin).",
        "2.9.2", session=True,
    ),
    Option(
        "transport_lbtrm_destination_port", S, PORT, 14400,
        "UDP destination port of LBT-RM data.", "", session=True,
    ),
    Option(
        "transport_lbtrm_source_port_low", C, PORT, 14390,
        "Lowest local UDP port of LBT-RM sources (receivers send NAKs to it).", "",
    ),
    Option(
        "transport_lbtrm_source_port_high", C, PORT, 14399,
        "Highest local UDP port of LBT-RM sources (receivers send NAKs to it).", "",
    ),
    Option(
        "transport_lbtrm_datagram_max_size", C, Int(500, UDP_PAYLOAD_MAX), 8192,
        "Largest UM datagram (headers plus data) on an LBT-RM transport session; at most 65,507 "
        "(what one UDP datagram carries over IPv4).",
        "8.7.1", unit=BYTES, default_from="guide",
    ),
    Option(
        "transport_lbtrm_data_rate_limit", C, NONNEG, 10000000,
        "Rate limit of new LBT-RM data per context.", "2.12.1", unit=BPS,
    ),
    Option(
        "transport_lbtrm_retransmit_rate_limit", C, NONNEG, 5000000,
        "Rate limit of LBT-RM retransmissions per context; NAKs over it are answered with NCFs.",
        "2.12.1", unit=BPS,
    ),
    Option(
        "transport_lbtrm_rate_interval", C, POS, 10,
        "Period of the LBT-RM rate limiter (budget = limit x interval).",
        "2.12.1", unit=MS, default_from="guide",
    ),
    Option(
        "transport_lbtrm_receiver_socket_buffer", C, NONNEG, 8388608,
        "SO_RCVBUF of LBT-RM receiver sockets.", "17.3.3", unit=BYTES,
    ),
    Option(
        "transport_lbtrm_source_socket_buffer", C, NONNEG, 1048576,
        "SO_SNDBUF of LBT-RM source sockets.", "", unit=BYTES,
    ),
    Option(
        "transport_lbtrm_receiver_timestamp", C, BOOL, False,
        "Timestamp received LBT-RM datagrams (kernel timestamps where available).", "10.6.2",
    ),
    Option("transport_lbtrm_source_timestamp", C, BOOL, False, "Timestamp sent LBT-RM datagrams.", "10.6.2"),
    Option(
        "transport_lbtrm_recycle_receive_buffers", C, BOOL, False,
        "Reuse LBT-RM receive buffers instead of allocating one per datagram.", "11.3",
    ),
    Option(
        "transport_lbtrm_transmission_window_size", S, NONNEG, 25165824,
        "Bytes of sent LBT-RM datagrams kept for retransmission.", "", unit=BYTES, session=True,
    ),
    Option(
        "transport_lbtrm_transmission_window_limit", S, NONNEG, 0,
        "Cap on the LBT-RM transmission window including overhead (0: only the size applies).",
        "", unit=BYTES, session=True,
    ),
    Option(
        "transport_lbtrm_tgsz", S, Int(1, 65535), 8,
        "Transmission group size: datagrams per NAK/parity group of an LBT-RM session.",
        "", unit="datagrams", session=True,
    ),
    Option(
        "transport_lbtrm_ignore_interval", S, NONNEG, 500,
        "After a retransmission, further NAKs for that datagram get at most one NCF for this long.",
        "6.3.1", unit=MS, session=True,
    ),
    Option(
        "transport_lbtrm_sm_minimum_interval", S, POS, 200,
        "First session-message interval after the LBT-RM session goes idle; doubles up to the maximum.",
        "8.11.5", unit=MS, default_from="guide", session=True,
    ),
    Option(
        "transport_lbtrm_sm_maximum_interval", S, POS, 10000,
        "Longest interval between LBT-RM session messages while idle.", "", unit=MS, session=True,
        note="The Concepts Guide (8.10) states the 10 s maximum without naming the option.",
    ),
    Option(
        "transport_lbtrm_activity_timeout", R, POS, 60000,
        "An LBT-RM receiver ends the session (EOS) after this long without traffic.",
        "8.11.6", unit=MS, default_from="guide", session=True,
    ),
    Option(
        "transport_lbtrm_preactivity_timeout", R, NONNEG, 0,
        "Time to wait for the first datagram after joining before ending the session (0: activity timeout "
        "applies).",
        "", unit=MS, session=True,
    ),
    Option(
        "transport_lbtrm_nak_initial_backoff_interval", R, NONNEG, 50,
        "Random backoff (0.5x-1.5x) before the first NAK for a gap (0: NAK at once).",
        "8.11.5", unit=MS, default_from="guide", session=True,
    ),
    Option(
        "transport_lbtrm_nak_backoff_interval", R, POS, 200,
        "Backoff (randomised 0.5x-1.5x) before repeating a NAK for the same datagram.",
        "", unit=MS, session=True,
    ),
    Option(
        "transport_lbtrm_nak_suppress_interval", R, NONNEG, 1000,
        "After an NCF, do not NAK that datagram again for this long.", "", unit=MS, session=True,
    ),
    Option(
        "transport_lbtrm_nak_generation_interval", R, Int(5), 10000,
        "Longest time the receiver NAKs for a lost datagram before declaring it unrecoverable.",
        "8.11.5", unit=MS, default_from="guide", session=True,
    ),
    Option(
        "transport_lbtrm_send_naks", R, BOOL, True,
        "Send NAKs for LBT-RM gaps (0: report loss without NAKing).", "", session=True,
    ),
    Option(
        "transport_lbtrm_smart_src_transmission_window_buffer_count", S, POS, 16384,
        "Preallocated transmission window buffers of an LBT-RM Smart Source.",
        "11.8.3", unit="buffers", session=True, note=FROM_DUMP,
    ),
    # --- transport LBT-IPC (seed 6.4) -----------------------------------------------------------------------
    Option(
        "transport_lbtipc_id_low", C, Int(1, 0xFFFFFFFF), 20001,
        "Lowest transport ID of the LBT-IPC pool.", "6.4.1",
    ),
    Option(
        "transport_lbtipc_id_high", C, Int(1, 0xFFFFFFFF), 20005,
        "Highest transport ID of the LBT-IPC pool.", "6.4.1",
    ),
    Option(
        "transport_lbtipc_id", S, U32, 0,
        "Transport ID of this source's shared-memory area, in or out of the pool (0: next ID of the pool).",
        "6.4.1", session=True,
    ),
    Option(
        "transport_lbtipc_behavior", S, choices("source_paced", "receiver_paced"), "source_paced",
        "source_paced: the writer overwrites unread data; receiver_paced: it waits for the slowest reader.",
        "6.4.2", default_from="guide", session=True,
    ),
    Option(
        "transport_lbtipc_transmission_window_size", S, Int(65536), 25165824,
        "Size of the LBT-IPC shared-memory area.", "6.4.6", unit=BYTES, session=True,
        note="UM's minimum is not given in the sources found; openum requires 64 KB.",
    ),
    Option(
        "transport_lbtipc_maximum_receivers_per_transport", S, POS, 20,
        "Receiver slots (receiver pool size) of an LBT-IPC shared-memory area.",
        "", unit="receivers", session=True,
    ),
    Option(
        "transport_lbtipc_sm_interval", S, POS, 10000,
        "Interval at which an idle LBT-IPC source shows it is alive.", "", unit=MS, session=True,
    ),
    Option(
        "transport_lbtipc_activity_timeout", R, POS, 60000,
        "An LBT-IPC receiver ends the session (EOS) after this long without source activity.",
        "", unit=MS, session=True,
    ),
    Option(
        "transport_lbtipc_datagram_max_size", C, Int(500, 65535), 65535,
        "Largest UM datagram (headers plus data) in an LBT-IPC shared-memory area.", "8.7.1", unit=BYTES,
        note="The Concepts Guide (8.7.1) says 64K; the Configuration Guide gives 65535.",
    ),
    Option(
        "transport_lbtipc_receiver_thread_behavior", C, PEND_BUSY, "pend",
        "pend: the IPC receive thread sleeps on a semaphore when idle; busy_wait: it polls.",
        "6.4.2", default_from="guide",
    ),
    Option(
        "transport_lbtipc_pend_behavior_linger_loop_count", C, POS, 1,
        "Polls of an empty area before a pending IPC receive thread sleeps (1: legacy pend).",
        "6.4.2", unit="iterations",
    ),
    Option(
        "transport_lbtipc_receiver_operational_mode", C, OPMODE, "embedded",
        "embedded: UM runs the IPC receive thread; sequential: the application calls "
        "process_lbtipc_messages().",
        "8.5.3",
    ),
    Option(
        "transport_lbtipc_recycle_receive_buffers", C, BOOL, False,
        "Reuse LBT-IPC receive buffers instead of allocating one per message.", "11.3",
    ),
    Option(
        "transport_lbtipc_dro_loss_recovery_timeout", R, NONNEG, 0,
        "Time an IPC receiver behind a DRO waits for lost data before declaring it lost (0: off).",
        "", unit=MS, session=True, note=FROM_DUMP,
    ),
    # --- transport LBT-SMX (seed 6.5) -----------------------------------------------------------------------
    Option(
        "transport_lbtsmx_id_low", C, Int(1, 0xFFFFFFFF), 30001,
        "Lowest transport ID of the LBT-SMX pool.", "6.5.1",
    ),
    Option(
        "transport_lbtsmx_id_high", C, Int(1, 0xFFFFFFFF), 30005,
        "Highest transport ID of the LBT-SMX pool.", "6.5.1",
    ),
    Option(
        "transport_lbtsmx_id", S, U32, 0,
        "Transport ID of this source's SMX area, in or out of the pool (0: next ID of the pool).",
        "6.5.1", session=True,
    ),
    Option(
        "transport_lbtsmx_datagram_max_size", S, Int(32), 8192,
        "Largest SMX message plus its 16-byte header (SMX does not fragment).",
        "6.5.2", unit=BYTES, session=True,
    ),
    Option(
        "transport_lbtsmx_transmission_window_size", S, Int(64), 131072,
        "Size of the SMX shared-memory area; rounded up to a power of two (at least 2x datagram max size).",
        "6.5.7", unit=BYTES, session=True,
    ),
    Option(
        "transport_lbtsmx_maximum_receivers_per_transport", S, POS, 64,
        "Receiver slots of an LBT-SMX shared-memory area.", "", unit="receivers", session=True,
    ),
    Option(
        "transport_lbtsmx_sm_interval", S, POS, 10000,
        "Interval at which an idle LBT-SMX source updates its shared activity counter.",
        "", unit=MS, session=True,
    ),
    Option(
        "transport_lbtsmx_activity_timeout", R, POS, 60000,
        "An LBT-SMX receiver ends the session (EOS) after this long without source activity.",
        "", unit=MS, session=True,
    ),
    Option(
        "transport_lbtsmx_message_statistics_enabled", C, BOOL, False,
        "Collect LBT-SMX transport statistics (off by default for latency).", "6.5", default_from="guide",
    ),
    # --- batching, fragmentation and TSNI (seed 8.6, 8.7, 8.9) ----------------------------------------------
    Option(
        "implicit_batching_minimum_length", S, POS, 2048,
        "Send the implicit batch once it holds at least this many bytes.",
        "8.6.1", unit=BYTES, default_from="guide", session=True,
    ),
    Option(
        "implicit_batching_interval", S, POS, 200,
        "Send the implicit batch once its oldest message has waited this long.",
        "8.6.1", unit=MS, default_from="guide", session=True,
    ),
    Option(
        "implicit_batching_type", S, choices("default", "adaptive"), "default",
        "Deprecated: 'adaptive' selected adaptive batching.", "", session=True, deprecated=True,
    ),
    Option(
        "dynamic_fragmentation_reduction", C, BOOL, False,
        "Size LBT-RM/LBT-RU datagrams by their actual header instead of the worst case (UM 6.14).", "8.7.4",
    ),
    Option(
        "transport_topic_sequence_number_info_interval", S, NONNEG, 5000,
        "After this long without sending, a source sends TSNIs at this interval (0: no TSNIs).",
        "8.9", unit=MS, default_from="guide", session=True,
    ),
    Option(
        "transport_topic_sequence_number_info_active_threshold", S, NONNEG, 60,
        "How long an idle source keeps sending TSNIs (0: until data resumes); unit is seconds as in UM.",
        "8.9", unit=SEC, session=True,
    ),
    Option(
        "transport_topic_sequence_number_info_request_interval", R, POS, 1000,
        "Interval at which a new receiver requests a TSNI from the source.", "", unit=MS,
    ),
    Option(
        "transport_topic_sequence_number_info_request_maximum", R, NONNEG, 60,
        "TSNI requests a receiver sends before it gives up.", "", unit="requests",
    ),
    # --- delivery controller (seed 2.4, 8.3.1, 8.8) ---------------------------------------------------------
    Option(
        "ordered_delivery", R, int_choices((1, 0, -1)), 1,
        "1: deliver in sequence order, reassembling fragments; -1: arrival order with reassembly; 0: "
        "arrival order without reassembly (deprecated).",
        "8.8", default_from="guide",
    ),
    Option(
        "ordered_delivery", HFX, int_choices((1, -1)), 1,
        "1: the HFX receiver delivers in order; -1: as soon as each message (reassembled) arrives.", "",
    ),
    Option(
        "delivery_control_maximum_burst_loss", R, NONNEG, 1024,
        "A topic sequence gap longer than this is declared lost at once as one burst-loss event.",
        "2.4.5", unit=MSGS,
        note="The Concepts Guide recommends 1000000000 (effectively off) but gives no default.",
    ),
    Option(
        "delivery_control_maximum_burst_loss", HFX, NONNEG, 512,
        "HFX: a sequence gap longer than this is declared lost at once as one burst-loss event.",
        "2.4.5", unit=MSGS,
    ),
    Option(
        "delivery_control_maximum_total_map_entries", CHFX, NONNEG, 200000,
        "Most messages buffered in one delivery controller's order map; beyond it the oldest gaps are "
        "declared lost (0: unbounded).",
        "8.3.1", unit=ENTRIES,
        note="UM bounds the total over a context's delivery controllers; openum bounds each (topic, source) "
             "delivery controller, so a context may hold this many per controller.",
    ),
    Option(
        "delivery_control_loss_check_interval", RHFX, NONNEG, 0,
        "Interval of forced loss checks of a delivery controller (0: only when messages arrive).",
        "", unit=MS,
    ),
    Option(
        "delivery_control_max_delay", HFX, NONNEG, 10000,
        "Minimum wait before an HFX receiver declares a missing message unrecoverable.", "", unit=MS,
    ),
    Option(
        "duplicate_delivery", HFX, BOOL, False,
        "HFX delivers duplicate copies marked as duplicates (overrides hf_duplicate_delivery).", "",
    ),
    Option(
        "delivery_control_message_batching", C, BOOL, False,
        "Receive-side batching: one event-queue dispatch may deliver several messages.", "11.12",
    ),
    Option(
        "delivery_control_loss_tablesz", R, POS, 131,
        "Deprecated: size of the delivery controller loss table.",
        "", unit=ENTRIES, deprecated=True, note=FROM_DUMP,
    ),
    Option(
        "delivery_control_order_tablesz", R, POS, 131,
        "Deprecated: size of the delivery controller order table.",
        "", unit=ENTRIES, deprecated=True, note=FROM_DUMP,
    ),
    Option(
        "channel_map_tablesz", R, POS, 10273,
        "Hash table size of a receiver's Spectrum channel subscriptions.", "10.16.2", unit=ENTRIES,
    ),
    Option(
        "null_channel_behavior", R, CHANNEL_BEHAVIOR, "deliver",
        "What to do with messages carrying no Spectrum channel: deliver to the receiver callback or discard.",
        "10.16.2",
    ),
    Option(
        "unrecognized_channel_behavior", R, CHANNEL_BEHAVIOR, "deliver",
        "What to do with messages on unsubscribed Spectrum channels: deliver to the receiver callback or "
        "discard.",
        "10.16.2",
    ),
    # --- late join (seed 2.6, 10.2) -------------------------------------------------------------------------
    Option(
        "late_join", S, BOOL, False,
        "Offer Late Join and OTR retransmissions from the source's retention buffer.", "2.6",
    ),
    Option(
        "retransmit_retention_size_threshold", S, NONNEG, 0,
        "Retention buffer size the source keeps before it may drop old messages (0: always met).",
        "10.2.4", unit=BYTES, default_from="guide",
    ),
    Option(
        "retransmit_retention_size_limit", S, Int(8192), 25165824,
        "Hard cap of the source's retention buffer (UM minimum 8 KB for UDP, 64 KB for TCP).",
        "2.6", unit=BYTES,
    ),
    Option(
        "retransmit_retention_age_threshold", S, NONNEG, 0,
        "Deprecated: minimum age before retained messages may be dropped (0: no age criterion).",
        "2.6", unit=SEC, deprecated=True,
        note="Listed among deprecated options by the Configuration Guide, still named in Concepts 2.6.",
    ),
    Option(
        "use_late_join", R, BOOL, True, "Take part in Late Join when the source offers it.", "2.6",
    ),
    Option(
        "retransmit_request_interval", R, POS, 500,
        "Interval between Late Join retransmission requests.", "2.6", unit=MS,
    ),
    Option(
        "retransmit_request_maximum", R, NONNEG, 0,
        "Most messages requested, counting back from the newest, when late-joining (0: all retained).",
        "10.2.2", unit=MSGS,
    ),
    Option(
        "retransmit_request_message_timeout", R, POS, 10000,
        "Give up on a requested retransmission and report loss after this long.", "2.6", unit=MS,
    ),
    Option(
        "retransmit_request_outstanding_maximum", R, POS, 10,
        "Most Late Join messages requested and pending at once.", "10.2.6", unit=MSGS, default_from="guide",
    ),
    Option(
        "late_join_info_request_interval", R, POS, 1000,
        "Interval of Late Join Information (LJI) requests.", "2.6", unit=MS,
    ),
    Option(
        "late_join_info_request_maximum", R, NONNEG, 60,
        "LJI requests a receiver sends before it gives up.", "2.6", unit="requests",
    ),
    Option(
        "retransmit_initial_sequence_number_request", R, BOOL, True,
        "Ask a Late Join source that has sent nothing yet for its initial sequence number (answered by a "
        "TSNI).",
        "10.2.2",
    ),
    Option(
        "retransmit_message_caching_proximity", R, U32, 5000,
        "Cache live messages during recovery only when within this many sequence numbers of the recovered "
        "ones (>= 0x7FFFFFFF: off).",
        "10.2.6", unit=MSGS,
        note="Concepts Guide 10.2.6 says 2147483647; the Configuration Guide (6.8 and later) and UM 6.14 "
             "use 5000.",
    ),
    # --- off-transport recovery (seed 10.3) -----------------------------------------------------------------
    Option(
        "use_otr", R, int_choices((0, 1, 2)), 2,
        "0: no OTR; 1: use OTR to recover lost messages; 2: only for persistent receivers.", "10.3.3",
    ),
    Option(
        "otr_request_initial_delay", R, NONNEG, 2000,
        "Delay after a loss before the receiver enters OTR.", "10.3.3", unit=MS,
    ),
    Option(
        "otr_request_minimum_interval", R, POS, 1000,
        "First interval between OTR requests; doubles up to the maximum.", "10.3.3", unit=MS,
    ),
    Option(
        "otr_request_maximum_interval", R, POS, 10000,
        "Longest interval between OTR requests (keep below response_tcp_deletion_timeout).",
        "10.3.3", unit=MS,
    ),
    Option(
        "otr_request_message_timeout", R, POS, 60000,
        "Give up on an OTR-requested message and report loss after this long.", "10.3.3", unit=MS,
    ),
    Option(
        "otr_request_outstanding_maximum", R, NONNEG, 200,
        "Most OTR requests outstanding at once (0: no limit).", "10.3.3", unit=MSGS,
    ),
    Option(
        "otr_request_log_alert_cooldown", R, NONNEG, 300,
        "After this long without OTR requests the next one is logged as a warning again.", "10.3.3", unit=SEC,
    ),
    Option(
        "otr_message_caching_threshold", R, NONNEG, 10000,
        "Enter OTR at once when the order map holds more than this many messages.", "10.3.3", unit=MSGS,
    ),
    Option(
        "otr_request_duration", R, NONNEG, None,
        "Deprecated: how long OTR requests were sent.", "", unit=MS, deprecated=True,
        note="Deprecated and without effect in UM; no default documented in the sources found.",
    ),
    # --- request/response and unicast immediate messages (seed 10.7, 10.12) ---------------------------------
    Option(
        "request_tcp_bind_request_port", C, BOOL, True,
        "Bind the UIM (request) port; 0 disables UIM reception, Request/Response, Late Join and OTR.",
        "10.12.6",
    ),
    Option(
        "request_tcp_port", C, PORT, 0,
        "UIM (request) port of the context (0: first free port of request_tcp_port_low..high).", "10.7.2",
    ),
    Option("request_tcp_port_low", C, PORT, 14391, "Lowest port of the UIM (request) port range.", "10.1.3"),
    Option(
        "request_tcp_port_high", C, PORT, 14395,
        "Highest port of the UIM (request) port range.", "10.1.3",
    ),
    Option(
        "request_tcp_interface", C, IFACE, None,
        "Interface of the UIM (request) port.", "8.1.10", default_from="openum",
        note="Concepts Guide 8.1.10: UM default 0.0.0.0 (INADDR_ANY), overridden by default_interface; None"
             " follows default_interface, which is 127.0.0.1 in openum.",
    ),
    Option(
        "request_tcp_listen_backlog", C, POS, 5,
        "listen() backlog of the UIM (request) port.", "", unit="connections", note=FROM_DUMP,
    ),
    Option(
        "request_tcp_reuseaddr", C, BOOL, True,
        "Set SO_REUSEADDR on the UIM (request) port.", "", default_from="openum",
        note="UM's default is 0. openum sets it so that a restarted context gets its request port back "
             "while connections of its previous run linger in TIME_WAIT (on Linux it never lets two "
             "listeners share a port).",
    ),
    Option(
        "request_tcp_exclusiveaddr", C, BOOL, True,
        "Set SO_EXCLUSIVEADDRUSE on the UIM (request) port (Windows only; ignored elsewhere).",
        "", note=FROM_DUMP,
    ),
    Option(
        "request_tcp_activity_timeout", C, NONNEG, 0,
        "Close an idle incoming UIM connection / enable keepalives after this long (0: off).",
        "17.5", unit=MS, default_from="openum",
        note="Named in Concepts 17.5 without a default; UM's default was not found, 0 (off) assumed.",
    ),
    Option(
        "response_tcp_activity_timeout", C, NONNEG, 0,
        "Close an idle outgoing UIM/response connection / enable keepalives after this long (0: off).",
        "17.5", unit=MS, default_from="openum",
        note="Named in Concepts 17.5 without a default; UM's default was not found, 0 (off) assumed.",
    ),
    Option(
        "response_tcp_deletion_timeout", C, POS, 20000,
        "Keep an unused outgoing UIM/response connection this long before closing it.", "10.7.5", unit=MS,
        note="Concepts Guide 10.7.5/10.12.5 says 2 s; the Configuration Guide says 20000 ms, which also "
             "keeps it above otr_request_maximum_interval as UM requires.",
    ),
    Option(
        "response_tcp_interface", C, IFACE, None,
        "Interface of outgoing UIM/response TCP connections.",
        "2.6", default_from="openum", note=FOLLOW_IFACE,
    ),
    Option("response_tcp_nodelay", C, BOOL, False, "Set TCP_NODELAY on response/UIM sockets.", ""),
    Option(
        "response_session_maximum_buffer", C, NONNEG, 65536,
        "UM-level send buffering of one UIM connection.", "", unit=BYTES,
    ),
    Option(
        "response_session_sender_socket_buffer", C, NONNEG, 0,
        "SO_SNDBUF of UIM connections (0: OS default / autotuning).", "", unit=BYTES,
    ),
    # --- multicast immediate messages (seed 10.8) -----------------------------------------------------------
    Option(
        "mim_address", C, IP, None,
        "Sets both mim_incoming_address and mim_outgoing_address (a multicast group enables MIM reception).",
        "10.8",
        note="UM shows 0.0.0.0; None leaves the incoming and outgoing defaults in place.",
    ),
    Option(
        "mim_incoming_address", C, IP, "0.0.0.0",
        "Multicast group on which MIM is received (0.0.0.0: MIM reception disabled, UM 6.8 and later).",
        "7.4.2",
    ),
    Option(
        "mim_outgoing_address", C, MCAST, "224.10.10.21",
        "Multicast group to which MIM is sent.", "", note=FROM_DUMP,
    ),
    Option(
        "mim_destination_port", C, PORT, 14401,
        "UDP port of MIM (sets both the incoming and the outgoing port).", "", note=FROM_DUMP,
    ),
    Option(
        "mim_incoming_destination_port", C, PORT, None,
        "UDP port on which MIM is received.", "",
        note="None: mim_destination_port (UM's documented default).",
    ),
    Option(
        "mim_outgoing_destination_port", C, PORT, None,
        "UDP port to which MIM is sent.", "",
        note="None: mim_destination_port (UM's documented default).",
    ),
    Option(
        "mim_ordered_delivery", C, int_choices((1, 0, -1)), 1,
        "ordered_delivery for MIM receive sessions (1: in order).", "10.8.6", default_from="guide",
    ),
    Option(
        "mim_src_deletion_timeout", C, POS, 30000,
        "Delete an idle MIM transmit session after this long; the next send creates a new one.",
        "10.8.1", unit=MS, default_from="guide",
    ),
    Option(
        "mim_activity_timeout", C, POS, 60000,
        "End a MIM receive session after this long without traffic.", "", unit=MS, note=FROM_DUMP,
    ),
    Option(
        "mim_delivery_control_activity_timeout", C, POS, 60000,
        "Delete a MIM delivery controller after this long without messages.", "", unit=MS, note=FROM_DUMP,
    ),
    Option(
        "mim_delivery_control_activity_check_interval", C, POS, 5000,
        "Interval of MIM delivery controller activity checks.", "", unit=MS, note=FROM_DUMP,
    ),
    Option(
        "mim_delivery_control_loss_check_interval", C, NONNEG, 0,
        "Interval of forced loss checks of MIM sessions (0: off).", "", unit=MS,
    ),
    Option(
        "mim_delivery_control_order_tablesz", C, POS, 1031,
        "Order table size of MIM delivery controllers.", "", unit=ENTRIES, note=FROM_DUMP,
    ),
    Option(
        "mim_implicit_batching_minimum_length", C, POS, 2048,
        "Implicit batching minimum length of MIM.", "", unit=BYTES, note=FROM_DUMP,
    ),
    Option(
        "mim_implicit_batching_interval", C, POS, 200,
        "Implicit batching interval of MIM.", "", unit=MS, note=FROM_DUMP,
    ),
    Option(
        "mim_ignore_interval", C, NONNEG, 500,
        "MIM source: ignore repeated NAKs for a datagram this long.", "", unit=MS, note=FROM_DUMP,
    ),
    Option(
        "mim_nak_initial_backoff_interval", C, NONNEG, 50,
        "Random backoff before the first MIM NAK for a gap.", "", unit=MS, note=FROM_DUMP,
    ),
    Option(
        "mim_nak_backoff_interval", C, POS, 200,
        "Backoff before repeating a MIM NAK.", "", unit=MS, note=FROM_DUMP,
    ),
    Option(
        "mim_nak_suppress_interval", C, NONNEG, 1000,
        "After a MIM NCF, do not NAK that datagram for this long.", "", unit=MS, note=FROM_DUMP,
    ),
    Option(
        "mim_nak_generation_interval", C, Int(5), 10000,
        "Longest time MIM receivers NAK for a lost datagram before declaring it lost.",
        "", unit=MS, note=FROM_DUMP,
    ),
    Option("mim_send_naks", C, BOOL, True, "Send NAKs for MIM gaps.", "", note=FROM_DUMP),
    Option(
        "mim_sm_minimum_interval", C, POS, 200,
        "First MIM session-message interval after going idle.", "", unit=MS, note=FROM_DUMP,
    ),
    Option(
        "mim_sm_maximum_interval", C, POS, 10000,
        "Longest interval between MIM session messages.", "", unit=MS, note=FROM_DUMP,
    ),
    Option(
        "mim_tgsz", C, Int(1, 65535), 8,
        "Transmission group size of MIM sessions.", "", unit="datagrams", note=FROM_DUMP,
    ),
    Option(
        "mim_transmission_window_size", C, NONNEG, 25165824,
        "Bytes of sent MIM datagrams kept for retransmission.", "", unit=BYTES, note=FROM_DUMP,
    ),
    Option(
        "mim_transmission_window_limit", C, NONNEG, 0,
        "Cap on the MIM transmission window (0: size only).", "", unit=BYTES, note=FROM_DUMP,
    ),
    Option(
        "mim_sqn_window_size", C, POS, 16384,
        "Sequence-number window of MIM duplicate detection.", "", unit=MSGS, note=FROM_DUMP,
    ),
    Option(
        "mim_sqn_window_increment", C, POS, 8192,
        "Step by which the MIM sequence-number window advances.", "", unit=MSGS, note=FROM_DUMP,
    ),
    Option(
        "mim_unrecoverable_loss_function",
        C,
        CallbackType("callback(source_string, sequence_number, clientd)"),
        None,
        "Called for unrecoverable loss on MIM sessions (per context, not per topic).", "",
    ),
    # --- event queues (seed 3.5.4) --------------------------------------------------------------------------
    Option(
        "event_queue_name", EQ, Str(max_length=128), None,
        "Name of the event queue; selects per-queue values in XML configuration files.", "",
    ),
    Option(
        "queue_size_warning", EQ, NONNEG, 0,
        "Call the monitor when more than this many events are queued at dequeue time (0 = off).",
        "3.5.4", unit="events",
    ),
    Option(
        "queue_delay_warning", EQ, NONNEG, 0,
        "Call the monitor when a dequeued event waited longer than this (0 = off).", "3.5.4", unit=US,
    ),
    Option(
        "queue_enqueue_notification", EQ, BOOL, False,
        "Call the monitor on every enqueue (it gets no information about the event).", "3.5.4",
    ),
    Option(
        "queue_age_enabled", EQ, BOOL, False,
        "Measure how long each event waits in the queue (for statistics).", "3.5.1",
    ),
    Option("queue_count_enabled", EQ, BOOL, False, "Count queued events by type (for statistics).", "3.5.1"),
    Option(
        "queue_service_time_enabled", EQ, BOOL, False,
        "Measure the time to service each event (for statistics).", "3.5.1",
    ),
    Option(
        "queue_cancellation_callbacks_enabled", EQ, BOOL, False,
        "Lock so that delete-with-callback (cancellation callbacks) can be used with this queue.", "",
    ),
    Option(
        "queue_objects_purged_on_close", EQ, BOOL, True,
        "Purge a closed object's pending events at once (0: discard them as the queue drains).", "",
    ),
    # --- automatic monitoring (seed 2.13, 7.4.2) ------------------------------------------------------------
    Option(
        "monitor_interval", ('context', 'event_queue', 'receiver', 'wildcard_receiver'), NONNEG, 0,
        "Publish this object's statistics (receivers: topic interest) every this many seconds (0: off).",
        "", unit=SEC,
    ),
    Option(
        "monitor_transport", CEQ, choices("lbm", "lbmsnmp"), "lbm",
        "LBMMON transport module used by automatic monitoring.", "",
    ),
    Option(
        "monitor_transport_opts", CEQ, TEXT, None,
        "Options of the monitoring transport: scope|option=value pairs separated by ';'.", "7.4.2",
    ),
    Option(
        "monitor_appid", CEQ, TEXT, None,
        "Application ID attached to automatically published statistics.", "",
    ),
    Option(
        "monitor_format", C, choices("csv", "pb"), "csv",
        "Format of automatically published statistics.", "",
        note="Default and values from the UM 6.14 configuration dump; pb (protobuf) is UM 6.14's newer "
             "format.",
    ),
    Option("monitor_format_opts", C, TEXT, None, "Options of the monitoring format module.", ""),
    # --- hot failover (seed 10.17) --------------------------------------------------------------------------
    Option(
        "hf_duplicate_delivery", R, BOOL, False,
        "Hot-failover receiver delivers every copy, not only the first.", "10.17.5",
    ),
    Option(
        "hf_optional_messages", R, BOOL, True,
        "Hot-failover receiver delivers messages sent as optional.", "10.17.7",
    ),
    # --- smart sources and message properties (seed 11.8, 10.11) --------------------------------------------
    Option(
        "smart_src_max_message_length", S, POS, 368,
        "Largest message a Smart Source sends without fragmentation; sizes its preallocated buffers.",
        "11.8.3", unit=BYTES, note=FROM_DUMP,
    ),
    Option(
        "smart_src_user_buffer_count", S, POS, 32,
        "Preallocated user buffers of a Smart Source.", "11.8.3", unit="buffers", note=FROM_DUMP,
    ),
    Option(
        "smart_src_retention_buffer_count", S, NONNEG, 1024,
        "Preallocated retention buffers of a Smart Source (Late Join, OTR, persistence).",
        "11.8.3", unit="buffers", note=FROM_DUMP,
    ),
    Option(
        "smart_src_enable_spectrum_channel", S, BOOL, False,
        "Reserve header space so a Smart Source can send on Spectrum channels.", "10.16.4", note=FROM_DUMP,
    ),
    Option(
        "smart_src_message_property_int_count", S, NONNEG, 0,
        "Integer message properties a Smart Source can send (header space is preallocated).",
        "11.8.3", unit="properties", note=FROM_DUMP,
    ),
    Option(
        "mem_mgt_callbacks",
        S,
        CallbackType("alloc/free/create/delete callbacks for Smart Source buffers"),
        None,
        "Application memory management callbacks for Smart Source buffers.", "",
    ),
    # --- encrypted and compressed TCP (seed 10.4, 10.5) -----------------------------------------------------
    Option(
        "use_tls", C, BOOL, False,
        "Encrypt the context's TCP-based traffic with TLS.", "10.4.5", note=FROM_DUMP,
    ),
    Option(
        "tls_cipher_suites", C, TEXT, "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384",
        "Comma-separated acceptable TLS cipher suites, most preferred first.", "10.4.5", note=FROM_DUMP,
    ),
    Option("tls_certificate", C, TEXT, None, "File of this context's certificate (PEM).", "10.4.5"),
    Option(
        "tls_certificate_key", C, TEXT, None,
        "File of the private key of the certificate (PEM).", "10.4.5",
    ),
    Option("tls_certificate_key_password", C, TEXT, None, "Password of the private key.", "10.4.5"),
    Option(
        "tls_trusted_certificates", C, TEXT, "system",
        "File of trusted CA certificates used to verify peers ('system': the OS trust store).",
        "10.4.5", note=FROM_DUMP,
    ),
    Option(
        "tls_compression_negotiation_timeout", C, POS, 5000,
        "Timeout of the TLS/compression negotiation on a new TCP connection.",
        "10.4.5", unit=MS, note=FROM_DUMP,
    ),
    Option(
        "compression", C, choices("none", "lz4"), "none",
        "Compress the context's TCP-based traffic.", "10.5.1", note=FROM_DUMP,
    ),
    # --- persistence (seed 2.10.6, 2.11.3, 8.1.7; the store daemon) -----------------------------------------
    Option(
        "ume_store", S, AddressPort(with_suffix=True, list_valued=True), None,
        "A persistent Store IP:port[:registration id]; each setting adds one, 0.0.0.0:0 clears the list.", "",
    ),
    Option(
        "ume_store_name", S, TEXT, None,
        "Name of a persistent Store, resolved through topic resolution.", "8.1.7",
    ),
    Option(
        "ume_store_behavior",
        S,
        choices("round-robin", "quorum-consensus", aliases={"rr": "round-robin", "qc": "quorum-consensus"}),
        "quorum-consensus",
        "How the source uses several Stores: one at a time (round-robin) or all at once (quorum-consensus).",
        "", note=FROM_DUMP,
    ),
    Option(
        "ume_flight_size", S, POS, 1000,
        "Most messages in flight (sent, not yet stable at the Store) before the send blocks or notifies.",
        "2.11.3", unit=MSGS, note=FROM_DUMP,
    ),
    Option(
        "ume_flight_size_bytes", S, NONNEG, 0,
        "Most bytes in flight before the send blocks or notifies (0: off).",
        "2.11.3", unit=BYTES, note=FROM_DUMP,
    ),
    Option(
        "ume_flight_size_behavior", S, choices("block", "notify"), "block",
        "Over the flight size: block (or EWOULDBLOCK) the send, or send and deliver "
        "FLIGHT_SIZE_NOTIFICATION.",
        "2.11.4", note=FROM_DUMP,
    ),
    Option(
        "ume_registration_interval", SR, POS, 3000,
        "Interval between registration attempts with a Store.", "", unit=MS, note=FROM_DUMP,
    ),
    Option(
        "ume_store_activity_timeout", S, POS, 10000,
        "Consider a Store inactive after this long without contact.", "", unit=MS, note=FROM_DUMP,
    ),
    Option(
        "ume_store_check_interval", S, POS, 500,
        "Interval at which the source checks its Stores' activity.", "", unit=MS, note=FROM_DUMP,
    ),
    Option(
        "ume_activity_timeout", SR, NONNEG, 0,
        "Time the Store keeps this source/receiver's state without activity (0: use the Store's setting).",
        "", unit=MS, note=FROM_DUMP,
    ),
    Option(
        "ume_state_lifetime", SR, NONNEG, 0,
        "Time the Store keeps this source/receiver's state after it goes away (0: use the Store's setting).",
        "", unit=MS, note=FROM_DUMP,
    ),
    Option(
        "ume_session_id", ('context', 'source', 'receiver'), Int(0, 2**64 - 1), 0,
        "Session ID that lets a restarted application resume its Store registrations (0: none).",
        "", note=FROM_DUMP,
    ),
    Option(
        "ume_use_store", R, BOOL, False,
        "Receiver takes part in persistence when the source uses Stores.", "", default_from="openum",
        note=NOT_YET.format(um="1", feature="persistence"),
    ),
    Option(
        "ume_explicit_ack_only", R, BOOL, False,
        "The application acknowledges messages explicitly (no automatic consumption ACKs).",
        "", note=FROM_DUMP,
    ),
    Option(
        "ume_use_ack_batching", R, BOOL, True,
        "Batch the receiver's consumption acknowledgements.", "", note=FROM_DUMP,
    ),
    Option(
        "ume_ack_batching_interval", C, POS, 100,
        "Interval at which batched acknowledgements are sent.", "", unit=MS, note=FROM_DUMP,
    ),
    Option(
        "ume_allow_confirmed_delivery", R, BOOL, False,
        "Send delivery confirmations the source asked for.", "", default_from="openum",
        note=NOT_YET.format(um="1", feature="persistence"),
    ),
    Option(
        "ume_consensus_sequence_number_behavior", S, choices("lowest", "majority", "highest"), "highest",
        "Which Store-reported sequence number a re-registering source resumes from.", "", note=FROM_DUMP,
    ),
    Option(
        "ume_consensus_sequence_number_behavior", R, choices("lowest", "majority", "highest"), "majority",
        "Which Store-reported sequence number a re-registering receiver resumes from.", "", note=FROM_DUMP,
    ),
    Option(
        "ume_receiver_paced_persistence", SR, BOOL, False,
        "Receiver-paced persistence: the Store holds messages until receivers consume them.",
        "", note=FROM_DUMP,
    ),
    Option(
        "ume_proactive_keepalive_interval", C, NONNEG, 3000,
        "Interval of proactive keepalives between a persistent receiver and the source (0: off).",
        "10.1.5", unit=MS,
        note="The Concepts Guide (10.1.5) calls it ume_proactive_heartbeat_interval.",
    ),
    Option(
        "ume_user_receiver_registration_id", C, U32, 0,
        "Registration ID the context's persistent receivers use with the Store (0: the Store assigns one).",
        "", note=FROM_DUMP,
    ),
)

# Spellings the Concepts Guide uses that are not UM's option names (guide defects): listed so that a
# reader of the guide finds them, and accepted in files; each sets the real option.
OPTIONS: Final[tuple[Option, ...]] = (
    *_ROWS,
    Option(
        "request_port", C, BOOL, True,
        "Guide spelling (10.2) of request_tcp_bind_request_port (split across a line); sets that option.",
        "10.2", alias_of="request_tcp_bind_request_port",
    ),
    Option(
        "smx_transmission_window_size", S, Int(64), 131072,
        "Guide spelling (transport_lbt-smx_...) of transport_lbtsmx_transmission_window_size.",
        "6.5", alias_of="transport_lbtsmx_transmission_window_size",
    ),
    Option(
        "ume_proactive_heartbeat_interval", C, NONNEG, 3000,
        "Guide name (10.1.5) of ume_proactive_keepalive_interval; sets that option.",
        "10.1.5", unit=MS, alias_of="ume_proactive_keepalive_interval",
    ),
)
# fmt: on

#: (scope, low option, high option): in an effective configuration each low must not exceed its high.
#: Multicast address pairs compare as IPv4 addresses (``ipaddress.IPv4Address``), not as text.  For
#: interval pairs a value of 0 means "phase disabled" and exempts the pair from the check.
RANGE_PAIRS: Final[tuple[tuple[str, str, str], ...]] = (
    ("context", "transport_tcp_port_low", "transport_tcp_port_high"),
    ("context", "transport_lbtru_port_low", "transport_lbtru_port_high"),
    ("receiver", "transport_lbtru_port_low", "transport_lbtru_port_high"),
    ("context", "transport_lbtrm_source_port_low", "transport_lbtrm_source_port_high"),
    ("context", "transport_lbtrm_multicast_address_low", "transport_lbtrm_multicast_address_high"),
    ("context", "transport_lbtipc_id_low", "transport_lbtipc_id_high"),
    ("context", "transport_lbtsmx_id_low", "transport_lbtsmx_id_high"),
    ("context", "request_tcp_port_low", "request_tcp_port_high"),
    ("context", "resolver_unicast_port_low", "resolver_unicast_port_high"),
    (
        "context",
        "resolver_context_name_query_minimum_interval",
        "resolver_context_name_query_maximum_interval",
    ),
    ("context", "mim_sm_minimum_interval", "mim_sm_maximum_interval"),
    (
        "source",
        "resolver_advertisement_minimum_initial_interval",
        "resolver_advertisement_maximum_initial_interval",
    ),
    ("source", "transport_lbtrm_sm_minimum_interval", "transport_lbtrm_sm_maximum_interval"),
    ("source", "transport_lbtru_sm_minimum_interval", "transport_lbtru_sm_maximum_interval"),
    ("receiver", "resolver_query_minimum_initial_interval", "resolver_query_maximum_initial_interval"),
    ("receiver", "otr_request_minimum_interval", "otr_request_maximum_interval"),
    ("wildcard_receiver", "resolver_query_minimum_interval", "resolver_query_maximum_interval"),
)
