"""lbmrd without sockets: the Forwarder under an injected clock, and the XML configuration parser.

Spec 06 PART C (C.1 acceptance tests 1-4, C.3 NAT and DTD acceptance tests), spec 03 A12-A13.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openum._errors import ConfigError
from openum.daemons.lbmrd import (
    DTD,
    Domain,
    Endpoint,
    Forwarder,
    ForwarderStatistics,
    InterfaceError,
    LbmrdConfig,
    Rule,
    Transform,
    effective_settings,
    parse_config_file,
    parse_config_text,
    render_config,
    resolve_interface,
)
from openum.wire.lbmr import (
    LbmrPacket,
    LbtrmTransport,
    LbtruTransport,
    LbtsmxTransport,
    ReceiverAlive,
    ResolverKeepalive,
    SourceAlive,
    TcpTransport,
    TopicInfo,
    TopicQuery,
    TopicResolution,
    Transport,
    WildcardQuery,
    WildcardResolution,
    decode_packet,
    encode_packet,
)

MS = 1_000_000
S = 1_000_000_000

A = ("127.0.0.1", 14402)
B = ("127.0.0.1", 14403)
C = ("127.0.0.1", 14404)


def tir_packet(*transports: Transport, queries: tuple[str, ...] = ()) -> bytes:
    infos = tuple(TopicInfo(f"Topic{i}", i, t) for i, t in enumerate(transports))
    return encode_packet(LbmrPacket(TopicResolution(tuple(TopicQuery(q) for q in queries), infos)))


def tcp(ip: str, port: int, session: int = 0x1234ABCD) -> TcpTransport:
    return TcpTransport(ip, port, session)


def tqr(topic: str) -> bytes:
    return encode_packet(LbmrPacket(TopicResolution(queries=(TopicQuery(topic),))))


KEEPALIVES = {
    "resolver-keepalive": encode_packet(LbmrPacket(ResolverKeepalive())),
    "receiver-alive": encode_packet(LbmrPacket(ReceiverAlive())),
    "source-alive": encode_packet(LbmrPacket(SourceAlive())),
}
KEEPALIVE = KEEPALIVES["resolver-keepalive"]


def make(**kwargs: object) -> Forwarder:
    return Forwarder(ttl_ns=2 * S, activity_ns=200 * MS, **kwargs)  # type: ignore[arg-type]


def dests(out: list[tuple[bytes, tuple[str, int]]]) -> set[tuple[str, int]]:
    return {addr for _, addr in out}


# ---- forwarding (seed 8.1.9; spec 06 C.1 acceptance test 3)


def test_tir_from_a_reaches_every_other_client_byte_for_byte_and_not_a() -> None:
    fwd = make()
    for addr in (A, B, C):
        assert fwd.datagram_received(KEEPALIVE, addr, 0) == [(KEEPALIVE, addr)]  # answered, never forwarded
    data = tir_packet(tcp("127.0.0.1", 14371))
    out = fwd.datagram_received(data, A, 1 * MS)
    assert dests(out) == {B, C}
    assert all(payload is data for payload, _ in out), "no rule matched: the very same bytes go out"
    stats = fwd.statistics()
    assert (stats.tr_dgrams_received, stats.dgrams_forwarded, stats.dgrams_rewritten) == (1, 2, 0)
    assert stats.bytes_forwarded == 2 * len(data)


@pytest.mark.parametrize(
    "data",
    [
        tqr("Orders"),
        encode_packet(LbmrPacket(WildcardResolution(queries=(WildcardQuery("^Ord.*"),)))),
        tir_packet(tcp("10.0.0.1", 14371), queries=("Quotes",)),
    ],
    ids=["tqr", "wildcard-tqr", "tqr-and-tir"],
)
def test_queries_are_forwarded_unchanged(data: bytes) -> None:
    fwd = make()
    fwd.datagram_received(KEEPALIVE, B, 0)
    out = fwd.datagram_received(data, A, 0)
    assert out == [(data, B)]


def test_the_first_datagram_of_a_new_client_registers_it_before_forwarding() -> None:
    fwd = make()
    assert fwd.datagram_received(tir_packet(tcp("127.0.0.1", 14371)), A, 0) == []  # nobody else yet
    assert [(c.address, c.port) for c in fwd.clients()] == [A]
    out = fwd.datagram_received(tqr("Orders"), B, 5 * MS)
    assert dests(out) == {A}
    assert fwd.statistics().clients_added == 2


@pytest.mark.parametrize("kind", list(KEEPALIVES))
def test_keepalives_register_and_refresh_but_are_never_forwarded(kind: str) -> None:
    fwd = make()
    fwd.datagram_received(KEEPALIVE, A, 0)
    # answered to the sender alone (so it knows the daemon is alive), never forwarded
    assert fwd.datagram_received(KEEPALIVES[kind], B, 10 * MS) == [(KEEPALIVE, B)]
    assert fwd.datagram_received(KEEPALIVES[kind], B, 900 * MS) == [(KEEPALIVE, B)]
    (_, b) = fwd.clients()
    assert (b.first_seen_ns, b.last_seen_ns, b.dgrams_received) == (10 * MS, 900 * MS, 2)
    stats = fwd.statistics()
    assert (stats.keepalives_received, stats.keepalives_sent, stats.dgrams_forwarded) == (3, 3, 0)


def test_other_lbmr_types_are_forwarded_and_counted_apart() -> None:
    fwd = make()
    fwd.datagram_received(KEEPALIVE, B, 0)
    ctxinfo = bytes.fromhex("07031900800100000000000000000000000000006374784100")  # W1 §14 #15
    assert fwd.datagram_received(ctxinfo, A, 0) == [(ctxinfo, B)]
    assert fwd.statistics().other_dgrams_received == 1


# ---- dead clients (spec 06 C.1 acceptance tests 1-2)


def test_a_silent_client_is_removed_at_ttl_while_a_keepalive_sender_stays() -> None:
    fwd = make(start_ns=0)
    fwd.datagram_received(tir_packet(tcp("127.0.0.1", 14371)), A, 0)
    removed_at = None
    for step in range(1, 16):  # scans every 200 ms up to 3 s; B keeps alive every 500 ms
        now = step * 200 * MS
        if now % (500 * MS) == 0 or step == 1:
            fwd.datagram_received(KEEPALIVE, B, now)
        assert now >= fwd.next_scan_ns
        removed = fwd.poll(now)
        if removed:
            assert [(c.address, c.port) for c in removed] == [A]
            removed_at = now
            break
        assert A in {(c.address, c.port) for c in fwd.clients()}, f"A removed early at {now}"
    assert removed_at == 2 * S, "A is dead once silent for ttl, found by the scan due then"
    assert [(c.address, c.port) for c in fwd.clients()] == [B]
    # A no longer receives forwarded traffic; B does
    assert dests(fwd.datagram_received(tqr("Orders"), C, removed_at + MS)) == {B}
    stats = fwd.statistics()
    assert (stats.clients_removed, stats.clients_active) == (1, 2)


def test_scan_runs_only_when_due_and_reschedules_by_activity() -> None:
    fwd = Forwarder(ttl_ns=1 * S, activity_ns=1500 * MS, start_ns=0)
    fwd.datagram_received(KEEPALIVE, A, 0)
    assert fwd.next_scan_ns == 1500 * MS
    assert fwd.poll(1400 * MS) == []  # dead since 1 s, but no scan is due yet
    assert [c.port for c in fwd.poll(1500 * MS)] == [A[1]]
    assert fwd.next_scan_ns == 3000 * MS


def test_a_client_heard_just_before_ttl_is_kept() -> None:
    fwd = make()
    fwd.datagram_received(KEEPALIVE, A, 0)
    assert fwd.scan(2 * S - 1) == []
    assert len(fwd.scan(2 * S)) == 1


# ---- remote garbage (PRACTICES.md 6)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00",
        b"\x05\x00\x00\x00",  # type 5 is undefined
        b"\x60\x00\x00\x00",  # version 6
        b"\x02\x01\x00\x00",  # receiver alive with a count
        tir_packet(tcp("127.0.0.1", 14371))[:-3],  # truncated TIR
        b"GET / HTTP/1.1\r\n\r\n",
    ],
    ids=["empty", "one-byte", "type-5", "version-6", "alive-with-count", "truncated-tir", "http"],
)
def test_malformed_datagrams_are_counted_dropped_and_never_make_a_client(data: bytes) -> None:
    fwd = make()
    fwd.datagram_received(KEEPALIVE, B, 0)
    assert fwd.datagram_received(data, A, 0) == []
    assert [(c.address, c.port) for c in fwd.clients()] == [B]
    stats = fwd.statistics()
    assert (stats.dgrams_received, stats.dgrams_dropped_malformed, stats.dgrams_forwarded) == (2, 1, 0)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_any_bytes_are_either_lbmr_or_counted_as_malformed(data: bytes) -> None:
    fwd = make()
    fwd.datagram_received(KEEPALIVE, B, 0)
    out = fwd.datagram_received(data, A, 0)
    stats = fwd.statistics()
    is_client = A in {(c.address, c.port) for c in fwd.clients()}
    assert is_client != bool(stats.dgrams_dropped_malformed)
    # Forwarded to the other client only; a keepalive (which the bytes may happen to be) is answered.
    assert all(addr == B or (addr == A and reply == KEEPALIVE) for reply, addr in out)
    if data in KEEPALIVES.values():
        assert out == [(KEEPALIVE, A)]


def test_datagrams_from_the_daemons_own_address_are_dropped() -> None:
    own = ("127.0.0.1", 15380)
    fwd = make(own_address=own)
    fwd.datagram_received(KEEPALIVE, B, 0)
    assert fwd.datagram_received(tqr("Orders"), own, 0) == []
    assert fwd.statistics().dgrams_dropped_self == 1
    assert len(fwd.clients()) == 1


def test_send_failures_are_counted() -> None:
    fwd = make()
    fwd.send_failed(B, OSError(105, "No buffer space available"), 0)
    fwd.send_failed(B, OSError(105, "No buffer space available"), 1)
    assert fwd.statistics().dgrams_dropped_send == 2


def test_statistics_are_an_immutable_snapshot_with_a_summary() -> None:
    fwd = make()
    fwd.datagram_received(b"junk", A, 0)
    snap = fwd.statistics()
    assert isinstance(snap, ForwarderStatistics)
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.dgrams_received = 5  # type: ignore[misc]
    fwd.datagram_received(b"junk", A, 0)
    assert snap.dgrams_received == 1 and fwd.statistics().dgrams_received == 2
    line = snap.summary()
    assert "received 1 datagrams" in line and "malformed 1" in line and "clients 0 active" in line


def test_every_counter_moves() -> None:
    """Issue 22 (counters are live or absent): one run through what the daemon meets moves every field
    of its statistics; a counter added without a situation here that moves it fails this test."""
    own = ("10.1.1.50", 15380)
    config = parse_config_text(NAT_XML, "nat.xml")
    fwd = Forwarder(
        ttl_ns=2 * S,
        activity_ns=S,
        domains=config.domains,
        transforms=config.transforms,
        own_address=own,
        max_clients=4,
        max_clients_per_host=1,
    )
    first = fwd.statistics()
    snaps = []

    def look() -> None:
        snaps.append(fwd.statistics())

    fwd.datagram_received(KEEPALIVE, NYC_RCV, 0)  # keepalives, answered
    fwd.datagram_received(KEEPALIVE, NJC_RCV, 0)
    look()
    fwd.datagram_received(tir_packet(tcp("10.1.1.50", 14400)), NYC_SRC, MS)  # forwarded, NAT-rewritten
    ctxinfo = bytes.fromhex("07031900800100000000000000000000000000006374784100")  # W1 §14 #15
    fwd.datagram_received(ctxinfo, NYC_SRC, MS)  # other LBMR
    fwd.datagram_received(b"junk", NYC_SRC, MS)  # malformed
    fwd.datagram_received(tqr("Orders"), own, MS)  # a forged sender: the daemon's own address
    fwd.send_failed(NJC_RCV, OSError(105, "No buffer space available"), MS)
    fwd.datagram_received(KEEPALIVE, ("10.1.1.50", 9), MS)  # a second client on NYC_SRC's host: refused
    fwd.datagram_received(KEEPALIVE, ("10.9.9.9", 1), MS)  # the fourth client
    fwd.datagram_received(KEEPALIVE, ("10.9.9.10", 1), MS)  # a fifth: the table is full
    look()
    fwd.datagram_received(KEEPALIVE, NYC_RCV, 3 * S)
    fwd.poll(3 * S)  # the silent clients are removed
    look()
    moved = {
        f.name
        for snap in snaps
        for f in dataclasses.fields(snap)
        if getattr(snap, f.name) != getattr(first, f.name)
    }
    assert moved == {f.name for f in dataclasses.fields(ForwarderStatistics)}


def test_bad_times_are_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        Forwarder(ttl_ns=0, activity_ns=1)


# ---- NAT (seed 8.1.10-11; spec 06 C.3 NAT acceptance test)

NAT_XML = """\
<?xml version="1.0" encoding="UTF-8" ?>
<lbmrd version="1.0">
  <daemon>
    <interface>10.1.1.50</interface>
    <port>12000</port>
  </daemon>
  <domains>
    <domain name="Net-NYC">
      <network>10.1.0.0/16</network>
    </domain>
    <domain name="Net-NJC">
      <network>192.168.1/24</network>
    </domain>
  </domains>
  <transformations>
    <transform source="Net-NYC" destination="Net-NJC">
      <rule>
        <match address="10.1.1.50" port="*" />
        <replace address="192.168.1.1" port="*" />
      </rule>
    </transform>
  </transformations>
</lbmrd>
"""

NYC_SRC = ("10.1.1.50", 14402)
NYC_RCV = ("10.1.2.3", 14403)
NJC_RCV = ("192.168.1.7", 14404)


def nat_forwarder(xml: str = NAT_XML) -> Forwarder:
    config = parse_config_text(xml, "nat.xml")
    fwd = Forwarder(ttl_ns=60 * S, activity_ns=S, domains=config.domains, transforms=config.transforms)
    for addr in (NYC_RCV, NJC_RCV):
        fwd.datagram_received(KEEPALIVE, addr, 0)
    return fwd


def copies(out: list[tuple[bytes, tuple[str, int]]]) -> dict[tuple[str, int], bytes]:
    return {addr: payload for payload, addr in out}


def test_nat_acceptance_tir_rewritten_for_the_other_domain_and_unchanged_at_home() -> None:
    fwd = nat_forwarder()
    data = tir_packet(tcp("10.1.1.50", 14400))
    got = copies(fwd.datagram_received(data, NYC_SRC, MS))
    assert got[NYC_RCV] == data, "a 10.1.x.x client sees the TIR byte for byte"
    njc = decode_packet(got[NJC_RCV])
    assert isinstance(njc.body, TopicResolution)
    assert njc.body.infos[0].transport == tcp("192.168.1.1", 14400)
    assert njc.body.infos[0].topic == "Topic0" and njc.body.infos[0].index == 0
    stats = fwd.statistics()
    assert (stats.dgrams_rewritten, stats.tirs_rewritten, stats.dgrams_forwarded) == (1, 1, 2)
    assert [(c.domain) for c in fwd.clients()] == ["Net-NYC", "Net-NJC", "Net-NYC"]


def test_nat_no_transform_for_the_reverse_direction() -> None:
    fwd = nat_forwarder()
    data = tir_packet(tcp("10.1.1.50", 14400))  # even if it names the NATed host
    got = copies(fwd.datagram_received(data, ("192.168.1.9", 14402), 0))
    assert got[NYC_RCV] == data and got[NJC_RCV] == data


def test_nat_rewrites_lbtru_and_lbtrm_addresses_and_leaves_others() -> None:
    fwd = nat_forwarder()
    data = tir_packet(
        LbtruTransport("10.1.1.50", 14380, 7),
        LbtrmTransport("10.1.1.50", "224.10.10.10", 0xCAFEBABE, 14400, 14390),
        tcp("10.1.1.51", 14371),  # another host: no rule
        LbtsmxTransport(1, 2, 3),  # no address at all
        queries=("Orders",),
    )
    got = decode_packet(copies(fwd.datagram_received(data, NYC_SRC, 0))[NJC_RCV])
    assert isinstance(got.body, TopicResolution)
    assert got.body.queries == (TopicQuery("Orders"),)
    assert [tir.transport for tir in got.body.infos] == [
        LbtruTransport("192.168.1.1", 14380, 7),
        LbtrmTransport("192.168.1.1", "224.10.10.10", 0xCAFEBABE, 14400, 14390),
        tcp("10.1.1.51", 14371),
        LbtsmxTransport(1, 2, 3),
    ]
    assert fwd.statistics().tirs_rewritten == 2


ips = st.builds(ipaddress.IPv4Address, st.integers(0, 2**32 - 1)).map(str)
ports = st.integers(0, 65535)


@settings(max_examples=200, deadline=None)
@given(
    ip=ips,
    port=ports,
    sid=st.none() | st.integers(0, 2**32 - 1),
    replace_ip=ips,
    replace_port=st.none() | ports,
    kind=st.sampled_from(["tcp", "lbtru", "lbtrm"]),
)
def test_nat_rewritten_copies_always_encode(
    ip: str, port: int, sid: int | None, replace_ip: str, replace_port: int | None, kind: str
) -> None:
    """Any address and port a rule can hold, put into any TIR that decodes, encodes: a rewritten copy is
    never lost (there is no counter for copies that could not be encoded, because there are none)."""
    transport: Transport
    if kind == "tcp":
        transport = TcpTransport(ip, port, sid)
    elif kind == "lbtru":
        transport = LbtruTransport(ip, port, sid)
    else:
        transport = LbtrmTransport(ip, "224.10.10.10", sid or 1, 14400, port)
    rule = Rule(Endpoint(ip, None), Endpoint(replace_ip, replace_port))
    domains = (
        Domain("src", (ipaddress.IPv4Network("10.0.0.0/8"),)),
        Domain("dst", (ipaddress.IPv4Network("192.168.0.0/16"),)),
    )
    fwd = Forwarder(ttl_ns=S, activity_ns=S, domains=domains, transforms=(Transform("src", "dst", (rule,)),))
    fwd.datagram_received(KEEPALIVE, ("192.168.1.7", 14404), 0)
    ((copy, _),) = fwd.datagram_received(tir_packet(transport), ("10.1.1.50", 14402), 0)
    got = decode_packet(copy)
    assert isinstance(got.body, TopicResolution)
    rewritten = got.body.infos[0].transport
    new_port = port if replace_port is None else replace_port
    if isinstance(rewritten, LbtrmTransport):
        assert (rewritten.source_ip, rewritten.source_port) == (replace_ip, new_port)
    else:
        assert (rewritten.ip, rewritten.port) == (replace_ip, new_port)  # type: ignore[union-attr]
    assert fwd.statistics().tirs_rewritten == 1


def test_nat_specific_ports_match_and_replace() -> None:
    xml = NAT_XML.replace(
        '<match address="10.1.1.50" port="*" />\n        <replace address="192.168.1.1" port="*" />',
        '<match address="10.1.1.50" port="12001" />\n        <replace address="192.168.1.1" port="22001" />',
    )
    fwd = nat_forwarder(xml)
    got = decode_packet(
        copies(
            fwd.datagram_received(tir_packet(tcp("10.1.1.50", 12001), tcp("10.1.1.50", 12002)), NYC_SRC, 0)
        )[NJC_RCV]
    )
    assert isinstance(got.body, TopicResolution)
    assert [t.transport for t in got.body.infos] == [tcp("192.168.1.1", 22001), tcp("10.1.1.50", 12002)]


def test_nat_wildcard_resolution_tirs_are_rewritten_too() -> None:
    fwd = nat_forwarder()
    data = encode_packet(
        LbmrPacket(
            WildcardResolution((WildcardQuery("^Ord"),), (TopicInfo("Orders", 1, tcp("10.1.1.50", 1)),))
        )
    )
    got = decode_packet(copies(fwd.datagram_received(data, NYC_SRC, 0))[NJC_RCV])
    assert isinstance(got.body, WildcardResolution)
    assert got.body.infos[0].transport == tcp("192.168.1.1", 1)
    assert got.body.queries == (WildcardQuery("^Ord"),)


def test_nat_clients_outside_every_domain_get_the_original() -> None:
    fwd = nat_forwarder()
    fwd.datagram_received(KEEPALIVE, ("172.16.0.1", 14402), 0)
    data = tir_packet(tcp("10.1.1.50", 14400))
    got = copies(fwd.datagram_received(data, NYC_SRC, 0))
    assert got[("172.16.0.1", 14402)] == data
    assert fwd.domain_of("172.16.0.1") is None


def test_nat_most_specific_network_decides_the_domain() -> None:
    xml = NAT_XML.replace("<network>192.168.1/24</network>", "<network>10.1.9.0/24</network>")
    fwd = nat_forwarder(xml)
    assert fwd.domain_of("10.1.9.5") == "Net-NJC"
    assert fwd.domain_of("10.1.8.5") == "Net-NYC"


# ---- the configuration file (seed chapter 16; spec 06 C.3 DTD acceptance test)

DUMMY_XML = """\
<?xml version="1.0" encoding="UTF-8" ?>
<lbmrd version="1.0">
  <daemon>
    <interface>127.0.0.1</interface>
    <port>15381</port>
    <ttl>30</ttl>
    <activity>5000</activity>
    <log>lbmrd.log</log>
    <resolver_unicast_send_socket_buffer>
      1048576
    </resolver_unicast_send_socket_buffer>
    <resolver_unicast_receiver_socket_buffer>2097152</resolver_unicast_receiver_socket_buffer>
  </daemon>
  <domains>
    <domain name="dummy">
      <network>0.0.0.0/32</network>
    </domain>
  </domains>
  <transformations>
    <transform source="dummy" destination="dummy">
      <rule>
        <match address="0.0.0.0" port="0"/>
        <replace address="0.0.0.0" port="0"/>
      </rule>
    </transform>
  </transformations>
</lbmrd>
"""


def test_the_dummy_configuration_is_accepted() -> None:
    config = parse_config_text(DUMMY_XML, "dummy.xml")
    d = config.daemon
    assert (d.interface, d.port, d.ttl, d.activity, d.log) == ("127.0.0.1", 15381, 30, 5000, "lbmrd.log")
    assert (d.send_socket_buffer, d.receiver_socket_buffer) == (1048576, 2097152)
    assert [dom.name for dom in config.domains] == ["dummy"]
    assert config.transforms[0].rules[0].match.port == 0
    assert config.warnings == ()


def test_the_nat_example_is_accepted_with_the_short_cidr_form_and_the_lbmrdr_spelling() -> None:
    config = parse_config_text(NAT_XML.replace("lbmrd", "lbmrdr"), "nat.xml")
    assert config.domains[1].networks == (ipaddress.IPv4Network("192.168.1.0/24"),)
    rule = config.transforms[0].rules[0]
    assert (str(rule.match), str(rule.replace)) == ("10.1.1.50:*", "192.168.1.1:*")
    assert rule.apply("10.1.1.50", 14400) == ("192.168.1.1", 14400)
    assert rule.apply("10.1.1.51", 14400) is None


def errors_of(xml: str, name: str = "bad.xml") -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config_text(textwrap.dedent(xml), name)
    return [e.location_message() for e in info.value.errors]


def test_no_domains_fails_naming_the_file_line_and_the_missing_element() -> None:
    errs = errors_of(
        """\
        <?xml version="1.0" encoding="UTF-8" ?>
        <lbmrd version="1.0">
          <daemon><port>15380</port></daemon>
        </lbmrd>
        """
    )
    assert any(e.startswith("bad.xml:2: <lbmrd> needs a <domains>") for e in errs), errs
    assert any("bad.xml:2: <lbmrd> needs a <transformations>" in e for e in errs), errs
    assert all("(daemon?, domains, transformations)" in e for e in errs)


def test_an_idref_naming_no_domain_fails() -> None:
    errs = errors_of(
        """\
        <lbmrd version="1.0">
          <domains><domain name="a"><network>10.0.0.0/8</network></domain></domains>
          <transformations>
            <transform source="nosuch" destination="a">
              <rule><match address="10.0.0.1"/><replace address="10.0.0.2"/></rule>
            </transform>
          </transformations>
        </lbmrd>
        """
    )
    assert errs == [
        "bad.xml:4: <transform source='nosuch'> names no <domain> (an IDREF must match a domain name); "
        "defined domains: a"
    ]


@pytest.mark.parametrize(
    "network", ["10.1.0.0/33", "host.example.com", "10.1.1", "10.1.256.0/16", "10.1.0.0/x"]
)
def test_a_bad_network_fails_on_its_line(network: str) -> None:
    errs = errors_of(
        f"""\
        <lbmrd version="1.0">
          <domains>
            <domain name="a">
              <network>{network}</network>
            </domain>
          </domains>
          <transformations><transform source="a" destination="a">
            <rule><match address="0.0.0.0"/><replace address="0.0.0.0"/></rule>
          </transform></transformations>
        </lbmrd>
        """
    )
    assert len(errs) == 1 and errs[0].startswith(f"bad.xml:4: network '{network}' is not valid; allowed:"), (
        errs
    )


def test_elements_out_of_order_fail() -> None:
    errs = errors_of(
        """\
        <lbmrd version="1.0">
          <transformations><transform source="a" destination="a">
            <rule><match address="0.0.0.0"/><replace address="0.0.0.0"/></rule>
          </transform></transformations>
          <domains><domain name="a"><network>0.0.0.0/32</network></domain></domains>
        </lbmrd>
        """
    )
    assert errs == [
        "bad.xml:5: <domains> must come before <transformations> inside <lbmrd>; "
        "allowed: (daemon?, domains, transformations), in that order"
    ]


def test_every_error_is_collected_in_line_order() -> None:
    errs = errors_of(
        """\
        <lbmrd version="2.0" colour="red">
          <daemon>
            <port>70000</port>
            <ttl>soon</ttl>
            <speed>9</speed>
          </daemon>
          <daemon/>
          <domains>
            stray text
            <domain name="a"><network>0.0.0.0/32</network></domain>
            <domain name="a"><network>10.0.0.0/8</network></domain>
            <domain name="1bad"><network>11.0.0.0/8</network></domain>
          </domains>
          <transformations>
            <transform source="a">
              <rule><replace address="10.0.0.1" port="x"/><match address="ten"/></rule>
              <rule><match address="0.0.0.0"><oops/></match><replace address="0.0.0.0"/></rule>
            </transform>
          </transformations>
        </lbmrd>
        """
    )
    lines = [int(e.split(":")[1]) for e in errs]
    assert lines == sorted(lines)
    joined = "\n".join(errs)
    for expected in (
        "bad.xml:1: attribute 'colour' is not allowed on <lbmrd>; allowed: version",
        "bad.xml:1: version '2.0' is not supported; allowed: \"1.0\"",
        "bad.xml:3: port 70000 is out of range; allowed: an integer from 1 to 65535",
        "bad.xml:4: ttl 'soon' is not an integer",
        "bad.xml:5: <speed> is not allowed inside <daemon>; allowed: (activity|interface|port|ttl|log|",
        "bad.xml:7: <daemon> may appear only once inside <lbmrd>",
        "bad.xml:9: text 'stray text' is not allowed inside <domains>",
        "bad.xml:11: domain name 'a' is already defined at line 10",
        "bad.xml:12: domain name '1bad' is not a valid XML ID",
        "bad.xml:15: <transform> needs the attribute 'destination'",
        "bad.xml:16: <match> must come before <replace> inside <rule>",
        "bad.xml:16: <replace> port 'x' is not valid; allowed: '*' or an integer from 0 to 65535",
        "bad.xml:16: <match> address 'ten' is not valid; allowed: a dotted-decimal IPv4 host address",
        "bad.xml:17: <oops> is not allowed inside <match>; it holds nothing (it is an EMPTY element)",
    ):
        assert expected in joined, f"missing {expected!r} in:\n{joined}"


def test_not_well_formed_xml_names_the_line() -> None:
    assert errors_of("<lbmrd version='1.0'>\n  <domains>\n</lbmrd>\n") == [
        "bad.xml:3: not well-formed XML: mismatched tag"
    ]


def test_a_wrong_root_element_fails() -> None:
    assert errors_of("<um-configuration version='1.0'/>") == [
        'bad.xml:1: the root element must be <lbmrd version="1.0">, not <um-configuration>'
    ]


def test_rule_addresses_outside_their_domains_are_warnings() -> None:
    xml = NAT_XML.replace('match address="10.1.1.50"', 'match address="172.16.0.1"')
    config = parse_config_text(xml, "nat.xml")
    assert config.warnings == (
        "nat.xml:18: warning: <match> address 172.16.0.1 is outside the source domain 'Net-NYC' "
        "(10.1.0.0/16)",
    )


def test_a_missing_file_is_a_config_error(tmp_path: object) -> None:
    with pytest.raises(ConfigError, match="cannot read the configuration file"):
        parse_config_file(f"{tmp_path}/nope.xml")


def test_the_dtd_is_the_seeds_with_root_lbmrd() -> None:
    assert DTD.startswith("<!ELEMENT lbmrd (daemon?, domains, transformations)>\n<!ATTLIST lbmrd\n")
    for element in ("daemon", "domains", "domain", "network", "transformations", "transform", "rule"):
        assert f"<!ELEMENT {element} " in DTD
    assert "<!ATTLIST domain name ID #REQUIRED>" in DTD
    assert 'port CDATA "*"' in DTD


# ---- settings: command line over file over defaults


def test_command_line_wins_over_the_file_which_wins_over_defaults() -> None:
    config = parse_config_text(DUMMY_XML, "dummy.xml")
    s = effective_settings(config, {"port": 16000, "ttl": None})
    assert (s.port, s.ttl, s.activity, s.interface) == (16000, 30, 5000, "127.0.0.1")
    assert s.origin("port") == "command line"
    assert s.origin("ttl") == "dummy.xml:6"
    none = effective_settings(None, {})
    assert (none.port, none.ttl, none.activity, none.interface, none.log) == (
        15380,
        60,
        60000,
        "127.0.0.1",
        None,
    )
    assert none.origin("port") == "default"


@pytest.mark.parametrize("xml", [NAT_XML, DUMMY_XML, None], ids=["nat", "dummy", "no-file"])
def test_dump_config_output_is_a_valid_file_with_the_same_meaning(xml: str | None) -> None:
    config = parse_config_text(xml, "in.xml") if xml else None
    s = effective_settings(config, {"ttl": 7})
    dumped = render_config(s, config)
    again: LbmrdConfig = parse_config_text(dumped, "dumped.xml")
    assert again.daemon.ttl == 7 and again.daemon.port == s.port and again.daemon.interface == s.interface
    if config is not None:
        assert [(d.name, d.networks) for d in again.domains] == [(d.name, d.networks) for d in config.domains]
        assert [t.rules for t in again.transforms] == [t.rules for t in config.transforms]
    assert "<!-- seconds; command line -->" in dumped


# ---- interfaces (seed §15.1 "-i")

LOCAL = [("lo", "127.0.0.1"), ("eth0", "10.29.3.43"), ("eth1", "192.168.5.7")]


@pytest.mark.parametrize(
    ("spec", "address"),
    [
        (None, "127.0.0.1"),
        ("0.0.0.0", "127.0.0.1"),
        ("10.29.3.43", "10.29.3.43"),
        ("10.0.0.0/8", "10.29.3.43"),
        ("192.168.5/24", "192.168.5.7"),
        ("eth1", "192.168.5.7"),
        ('"eth0"', "10.29.3.43"),
        ("0.0.0.0/0", "127.0.0.1"),
    ],
)
def test_interfaces_resolve_to_a_local_address(spec: str | None, address: str) -> None:
    assert resolve_interface(spec, LOCAL) == address


def test_an_interface_matching_nothing_local_is_an_error() -> None:
    with pytest.raises(InterfaceError, match=r"no local interface is on 172\.16\.0\.0/12"):
        resolve_interface("172.16.0.0/12", LOCAL)
