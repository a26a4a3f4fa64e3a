"""Every counter of ``ctx.statistics()`` moves in a real situation (issue 22: nothing declared that never
changes).  The topic-resolution counters are driven here through the public API between real contexts
on 127.0.0.1; the others are asserted where their feature is tested (``ELSEWHERE``), and a check keeps
this map complete: a counter added to :class:`~openum.ContextStatistics` needs a test that moves it.
"""

from __future__ import annotations

import re
import threading
from dataclasses import fields
from pathlib import Path

import openum
from openum import ContextStatistics
from tests.helpers import wait_until
from tests.integration.pubsub import WAIT
from tests.integration.test_lbmrd_process import LbmrdProcess, free_udp_port

TESTS = Path(__file__).resolve().parents[1]

RR = "integration/test_request_response.py"

#: Counters moved by the tests of this file.
HERE = {
    # test_resolution_counters_move_between_two_contexts
    "tr_dgrams_sent", "tr_bytes_sent", "tr_dgrams_rcved", "tr_bytes_rcved", "tr_src_topics", "tr_rcv_topics",
    "tr_rcv_unresolved_topics", "tirs_sent", "tqrs_sent", "wildcard_tqrs_sent", "tirs_rcved", "tqrs_rcved",
    "wildcard_tqrs_rcved", "own_dgrams_ignored", "cache_entries", "requests_sent", "requests_rcved",
    "sources", "receivers", "wildcard_receivers",
    # test_a_rate_limit_holds_records_back
    "records_rate_limited",
    # test_unicast_resolution_counts_keepalives_both_ways
    "keepalives_sent", "keepalives_rcved",
}  # fmt: skip

LATE_JOIN = (
    "late_join_info_requests_sent",
    "late_join_rx_requests_sent",
    "late_join_msgs_recovered",
    "late_join_msgs_unrecoverable",
    "late_join_retransmissions_dropped",
    "late_join_info_requests_rcved",
    "late_join_rx_requests_rcved",
    "late_join_retransmissions_sent",
    "late_join_rx_requests_not_retained",
    "late_join_requests_ignored",
)

#: Counters asserted by the tests of their feature: counter -> test file (relative to tests/).
ELSEWHERE = {
    "tr_dgrams_dropped_ver": "integration/test_topic_resolution.py",
    "tr_dgrams_dropped_type": "integration/test_topic_resolution.py",
    "tr_dgrams_dropped_malformed": "integration/test_topic_resolution.py",
    "tr_dgrams_dropped_unknown_source": "integration/test_unicast_resolver_options.py",
    "tr_dgrams_send_failed": "integration/test_final_advertisements.py",
    "final_advertisements_sent": "integration/test_final_advertisements.py",
    "final_advertisements_rcved": "integration/test_final_advertisements.py",
    "tcp_sessions": "integration/test_tcp_sessions.py",
    "lbtrm_sessions": "integration/test_pubsub_reliable.py",  # f"{transport}_sessions"
    "lbtru_sessions": "integration/test_pubsub_reliable.py",
    "lbtrm_rcv_sessions": "integration/test_pubsub_reliable.py",
    "lbtru_rcv_sessions": "integration/test_pubsub_reliable.py",
    "lbtrm_dgrams_dropped_unknown": "integration/test_pubsub_reliable.py",
    "lbtru_dgrams_dropped_unknown": "integration/test_pubsub_reliable.py",
    "dgrams_dropped_test_hook": "integration/test_pubsub_reliable.py",
    "cache_entries_evicted": "integration/test_hostile_resolution.py",
    "cache_entries_expired": "integration/test_hostile_resolution.py",
    "wildcard_tqrs_dropped_pattern": "integration/test_hostile_resolution.py",
    "wildcard_tqrs_dropped_work": "integration/test_hostile_resolution.py",
    "wildcard_match_steps": "integration/test_hostile_resolution.py",
    "tmr_records_ignored": "integration/test_hostile_resolution.py",
    "request_msgs_sent": RR,
    "request_msgs_rcved": RR,
    "response_msgs_sent": RR,
    "response_msgs_rcved": RR,
    "response_msgs_dropped": RR,
    "immediate_msgs_sent": RR,
    "immediate_msgs_rcved": RR,
    "immediate_msgs_dropped_no_receiver": RR,
    "immediate_control_msgs_ignored": RR,
    "immediate_fragments_dropped": RR,
    "requests_open": RR,
    "uim_port_connections_accepted": RR,
    "uim_port_connections_active": RR,
    "uim_port_connections_refused_limit": RR,
    "uim_port_connections_closed_idle": RR,
    "uim_port_connections_closed_malformed": RR,
    "uim_port_msgs_rcved": RR,
    "uim_port_bytes_rcved": RR,
    "uim_port_msgs_dropped_malformed": RR,
    "uim_out_connections_opened": RR,
    "uim_out_connections_active": RR,
    "uim_out_connections_failed": RR,
    "uim_out_connections_closed_idle": RR,
    "uim_out_connections_closed_stalled": RR,
    "uim_out_msgs_sent": RR,
    "uim_out_bytes_sent": RR,
    "uim_out_msgs_dropped": RR,
    "uim_out_bytes_dropped": RR,
    "uim_out_bytes_queued": RR,
    "mim_msgs_sent": RR,
    "mim_msgs_rcved": RR,
    "mim_unrecoverable_loss": RR,
    "mim_sessions_created": RR,
    "mim_sessions_active": RR,
    "mim_dgrams_dropped_malformed": RR,
    **dict.fromkeys(LATE_JOIN, "integration/test_late_join.py"),
    **dict.fromkeys(
        ("otr_rx_requests_sent", "otr_msgs_recovered", "otr_msgs_unrecoverable"), "integration/test_otr.py"
    ),
}


def test_every_counter_has_a_test_that_moves_it() -> None:
    declared = {f.name for f in fields(ContextStatistics)}
    assert HERE.isdisjoint(ELSEWHERE)
    assert HERE | set(ELSEWHERE) == declared, "map each new counter to the test that moves it"
    for counter, path in ELSEWHERE.items():
        text = (TESTS / path).read_text()
        # lbtrm_sessions/lbtru_sessions are read as getattr(stats, f"{transport}_sessions") there
        name = re.sub(r"^lbtr[mu]_(?=(rcv_)?sessions$)", "", counter)
        assert name in text, f"{counter}: not asserted in tests/{path}"


def _found(event: threading.Event) -> dict[str, object]:
    return {"source_notification_function": (lambda s, c: event.set(), None, None)}


def test_resolution_counters_move_between_two_contexts() -> None:
    opts = [f"context resolver_multicast_port {free_udp_port()}"]
    with openum.Context(options=opts) as pub, openum.Context(options=opts) as sub:
        pub.create_source("stats/IBM")
        found = threading.Event()
        sub.create_receiver("stats/IBM", lambda m: None, attrs=_found(found))
        sub.create_receiver("stats/nobody", lambda m: None)  # never resolved: keeps querying
        sub.create_wildcard_receiver("^stats/", lambda m: None)
        assert found.wait(WAIT)

        def answered() -> bool:
            stats = pub.statistics()
            return stats.tqrs_rcved > 0 and stats.wildcard_tqrs_rcved > 0

        assert wait_until(answered, WAIT)
        p, s = pub.statistics(), sub.statistics()
        assert p.tr_dgrams_sent > 0 and p.tr_bytes_sent > p.tr_dgrams_sent
        assert p.tirs_sent > 0 and p.tr_src_topics == 1 and p.sources == 1
        assert p.own_dgrams_ignored > 0  # multicast loops the context's own datagrams back to it
        assert s.tr_dgrams_rcved > 0 and s.tr_bytes_rcved > s.tr_dgrams_rcved and s.tirs_rcved > 0
        assert s.tqrs_sent > 0 and s.wildcard_tqrs_sent > 0
        assert (s.tr_rcv_topics, s.tr_rcv_unresolved_topics, s.cache_entries) == (2, 1, 1)
        assert (s.receivers, s.wildcard_receivers, s.sources) == (2, 1, 0)
        pub.topic_resolution_request()
        assert wait_until(lambda: sub.statistics().requests_rcved == 1, WAIT)
        assert pub.statistics().requests_sent == 1


def test_a_rate_limit_holds_records_back() -> None:
    # At most one initial advertisement per 100 ms interval: three new sources cannot all go at once.
    opts = [
        f"context resolver_multicast_port {free_udp_port()}",
        "context resolver_initial_advertisements_per_second 1",
    ]
    with openum.Context(options=opts) as ctx:
        for topic in ("limited/a", "limited/b", "limited/c"):
            ctx.create_source(topic)
        assert wait_until(lambda: ctx.statistics().records_rate_limited > 0, WAIT)
        assert wait_until(lambda: ctx.statistics().tirs_sent >= 3, WAIT)  # held back, not lost


def test_unicast_resolution_counts_keepalives_both_ways() -> None:
    daemon = LbmrdProcess()
    try:
        daemon.wait_started()
        opts = [f"context resolver_unicast_daemon 127.0.0.1:{daemon.port}"]
        with openum.Context(options=opts) as ctx:
            ctx.create_source("unicast/alive")
            # lbmrd answers every keepalive with one of its own (UM Concepts Guide, section 8.1.9)
            assert wait_until(lambda: ctx.statistics().keepalives_rcved > 0, WAIT), ctx.statistics()
            assert ctx.statistics().keepalives_sent > 0
    finally:
        daemon.close()
