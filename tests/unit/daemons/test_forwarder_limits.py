"""lbmrd's client table fed by strangers (issue 23, item 4): any UDP sender could become a client and
each client multiplies every TIR/TQR, so the table is bounded per host and in total, a new sender past
a bound gets nothing forwarded or answered (counted), and clients that only send keepalives leave the
table ``ttl`` after their keepalives stop."""

from __future__ import annotations

import pytest

from openum.daemons.lbmrd._forwarder import (
    DEFAULT_MAX_CLIENTS,
    DEFAULT_MAX_CLIENTS_PER_HOST,
    Forwarder,
)
from openum.wire.lbmr import (
    LbmrPacket,
    ResolverKeepalive,
    TcpTransport,
    TopicInfo,
    TopicResolution,
    encode_packet,
)

S = 1_000_000_000
KEEPALIVE = encode_packet(LbmrPacket(ResolverKeepalive()))
TIR = encode_packet(
    LbmrPacket(TopicResolution(infos=(TopicInfo("Orders", 1, TcpTransport("10.0.0.1", 14371, 7)),)))
)


def test_two_thousand_senders_from_one_host_make_at_most_the_per_host_limit_of_clients() -> None:
    fwd = Forwarder()
    for port in range(10_000, 12_000):
        fwd.datagram_received(KEEPALIVE, ("127.0.0.1", port), 0)
    stats = fwd.statistics()
    assert stats.clients_active == DEFAULT_MAX_CLIENTS_PER_HOST == 64
    assert stats.dgrams_dropped_host_limit == 2000 - 64
    assert stats.keepalives_sent == 64  # refused senders are not answered either
    # one TIR from a client becomes at most one copy per other client
    copies = fwd.datagram_received(TIR, ("127.0.0.1", 10_000), 1)
    assert len(copies) == 63
    # ... and from a refused sender, none
    assert fwd.datagram_received(TIR, ("127.0.0.1", 11_999), 1) == []
    assert fwd.statistics().dgrams_forwarded == 63


def test_many_hosts_fill_the_table_to_its_total_and_no_further() -> None:
    fwd = Forwarder()
    hosts = [f"10.{i // 250}.{i % 250}.1" for i in range(DEFAULT_MAX_CLIENTS + 500)]
    for host in hosts:
        fwd.datagram_received(KEEPALIVE, (host, 15000), 0)
    stats = fwd.statistics()
    assert stats.clients_active == DEFAULT_MAX_CLIENTS == 1024
    assert stats.dgrams_dropped_table_full == 500
    assert len(fwd.datagram_received(TIR, (hosts[0], 15000), 1)) == DEFAULT_MAX_CLIENTS - 1
    assert "table full 500" in fwd.statistics().summary()


def test_room_made_by_the_dead_client_scan_is_used_by_new_clients() -> None:
    fwd = Forwarder(ttl_ns=10 * S, activity_ns=S, max_clients=2, max_clients_per_host=2)
    fwd.datagram_received(KEEPALIVE, ("127.0.0.1", 1), 0)
    fwd.datagram_received(KEEPALIVE, ("127.0.0.1", 2), 0)
    fwd.datagram_received(KEEPALIVE, ("127.0.0.1", 3), 0)
    assert fwd.statistics().dgrams_dropped_table_full == 1
    for t in range(1, 10):  # client 1 keeps sending keepalives, client 2 stops
        fwd.datagram_received(KEEPALIVE, ("127.0.0.1", 1), t * S)
        fwd.poll(t * S)
    fwd.poll(10 * S)
    assert [c.port for c in fwd.clients()] == [1]  # the keepalive-only client that stopped is gone
    fwd.datagram_received(KEEPALIVE, ("127.0.0.1", 3), 10 * S)
    assert sorted(c.port for c in fwd.clients()) == [1, 3]


def test_limits_of_zero_mean_no_limit_and_negative_ones_are_refused() -> None:
    fwd = Forwarder(max_clients=0, max_clients_per_host=0)
    for port in range(1, 3001):
        fwd.datagram_received(KEEPALIVE, ("127.0.0.1", port), 0)
    assert fwd.statistics().clients_active == 3000
    with pytest.raises(ValueError, match="max_clients"):
        Forwarder(max_clients=-1)
