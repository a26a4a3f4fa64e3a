"""Source strings (seed 3.3.1): the seed's examples, round trips, the topic index suffix and errors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from openum._source_string import SourceString, SourceStringError, TransportKind, from_topic_info
from openum.wire.lbmr import (
    LbtipcTransport,
    LbtrdmaTransport,
    LbtrmTransport,
    LbtruTransport,
    LbtsmxTransport,
    TcpTransport,
    TopicInfo,
    UnknownTransport,
)

# --- the seed's examples (seed 3.3.1)


def test_tcp_example() -> None:
    s = SourceString.parse("TCP:192.168.0.4:45789:f1789bcc[1539853954]")
    assert s == SourceString(TransportKind.TCP, "192.168.0.4", 45789, 0xF1789BCC, topic_index=1539853954)


def test_lbtrm_example() -> None:
    s = SourceString.parse("LBTRM:10.29.3.88:14390:e0679abb:231.13.13.13:14400[1539853954]")
    assert s.transport is TransportKind.LBTRM
    assert (s.ip, s.port, s.session_id) == ("10.29.3.88", 14390, 0xE0679ABB)
    assert (s.group, s.dest_port, s.topic_index) == ("231.13.13.13", 14400, 1539853954)


def test_lbtru_example_has_no_session_id() -> None:
    s = SourceString.parse("LBT-RU:192.168.3.189:34678[1539853954]")
    assert s == SourceString(TransportKind.LBTRU, "192.168.3.189", 34678, None, topic_index=1539853954)


@pytest.mark.parametrize(
    ("prefix", "kind"), [("LBT-IPC", TransportKind.LBTIPC), ("LBT-SMX", TransportKind.LBTSMX)]
)
def test_shared_memory_examples(prefix: str, kind: TransportKind) -> None:
    s = SourceString.parse(f"{prefix}:6481f8d4:20000[1539853954]")
    assert s == SourceString(kind, session_id=0x6481F8D4, transport_id=20000, topic_index=1539853954)
    assert s.ip is None and s.port is None


@pytest.mark.parametrize(
    "text",
    [
        "TCP:192.168.0.4:45789:f1789bcc[1539853954]",
        "LBTRM:10.29.3.88:14390:e0679abb:231.13.13.13:14400[1539853954]",
        "LBT-RU:192.168.3.189:34678[1539853954]",
        "LBT-IPC:6481f8d4:20000[1539853954]",
        "LBT-SMX:6481f8d4:20000[1539853954]",
        "TCP:192.168.0.4:45789",
        "LBT-RU:192.168.3.189:34678:0000abcd[0]",
        "BROKER",
    ],
)
def test_examples_format_back_unchanged(text: str) -> None:
    assert SourceString.parse(text).format() == text
    assert str(SourceString.parse(text)) == text


def test_topic_index_suffix_follows_include_topic_index() -> None:
    s = SourceString.parse("LBTRM:10.29.3.88:14390:e0679abb:231.13.13.13:14400[7]")
    assert s.format(include_topic_index=False) == "LBTRM:10.29.3.88:14390:e0679abb:231.13.13.13:14400"
    assert s.format(include_topic_index=True).endswith("[7]")
    no_index = SourceString.parse("LBT-IPC:6481f8d4:20000")
    assert no_index.topic_index is None
    assert no_index.format(include_topic_index=True) == "LBT-IPC:6481f8d4:20000"


def test_session_id_is_eight_lower_case_hex_digits_and_parses_any_case() -> None:
    s = SourceString(TransportKind.TCP, "127.0.0.1", 14371, 0xAB, topic_index=1)
    assert s.format() == "TCP:127.0.0.1:14371:000000ab[1]"
    assert SourceString.parse("TCP:127.0.0.1:14371:AB[1]") == s


def test_transport_accepts_the_plain_string() -> None:
    s = SourceString("lbtsmx", session_id=1, transport_id=2)  # type: ignore[arg-type]
    assert s.transport is TransportKind.LBTSMX


# --- round trips (seed 3.3.1 acceptance test: parse(format(x)) == x for every transport type)

_ip = st.ip_addresses(v=4).map(str)
_port = st.integers(0, 0xFFFF)
_u32 = st.integers(0, 0xFFFFFFFF)
_index = st.none() | _u32

source_strings = st.one_of(
    st.builds(
        SourceString,
        st.sampled_from([TransportKind.TCP, TransportKind.LBTRU]),
        _ip,
        _port,
        st.none() | _u32,
        topic_index=_index,
    ),
    st.builds(
        SourceString,
        st.just(TransportKind.LBTRM),
        _ip,
        _port,
        _u32,
        _ip,
        _port,
        topic_index=_index,
    ),
    st.builds(
        SourceString,
        st.sampled_from([TransportKind.LBTIPC, TransportKind.LBTSMX]),
        session_id=_u32,
        transport_id=_port,
        topic_index=_index,
    ),
    st.just(SourceString(TransportKind.BROKER)),
)


@given(source_strings)
def test_parse_format_round_trip(s: SourceString) -> None:
    assert SourceString.parse(s.format()) == s


@given(source_strings)
def test_without_topic_index_round_trips_to_no_index(s: SourceString) -> None:
    parsed = SourceString.parse(s.format(include_topic_index=False))
    assert parsed.topic_index is None
    assert parsed.format() == s.format(include_topic_index=False)


@given(st.text(max_size=40))
def test_parse_raises_only_source_string_error(text: str) -> None:
    try:
        s = SourceString.parse(text)
    except SourceStringError:
        return
    assert s.format() == text or SourceString.parse(s.format()) == s


# --- from a TIR


@pytest.mark.parametrize(
    ("transport", "expected"),
    [
        (TcpTransport("10.0.0.1", 14371, 0x1234ABCD), "TCP:10.0.0.1:14371:1234abcd[5]"),
        (TcpTransport("10.0.0.1", 14371, None), "TCP:10.0.0.1:14371[5]"),
        (LbtruTransport("10.0.0.2", 14380, 0xBEEF), "LBT-RU:10.0.0.2:14380:0000beef[5]"),
        (LbtruTransport("10.0.0.2", 14380, None), "LBT-RU:10.0.0.2:14380[5]"),
        (
            LbtrmTransport("10.0.0.3", "224.10.10.10", 0xE0679ABB, 14400, 14390),
            "LBTRM:10.0.0.3:14390:e0679abb:224.10.10.10:14400[5]",
        ),
        (LbtipcTransport(0x7F000001, 0x6481F8D4, 20000), "LBT-IPC:6481f8d4:20000[5]"),
        (LbtsmxTransport(0x7F000001, 0x6481F8D4, 20001), "LBT-SMX:6481f8d4:20001[5]"),
    ],
)
def test_from_topic_info(transport: object, expected: str) -> None:
    info = TopicInfo("Orders", 5, transport)  # type: ignore[arg-type]
    assert from_topic_info(info).format() == expected
    assert SourceString.from_topic_info(info) == SourceString.parse(expected)


@pytest.mark.parametrize(
    "transport", [LbtrdmaTransport("10.0.0.1", 1, 2), UnknownTransport(0x02, b"\x00" * 6)]
)
def test_from_topic_info_without_a_format(transport: object) -> None:
    with pytest.raises(SourceStringError, match="no source string format"):
        from_topic_info(TopicInfo("Orders", 5, transport))  # type: ignore[arg-type]


# --- errors


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "expected one of TCP:src_ip:src_port"),
        ("UDP:1.2.3.4:5", "expected one of"),
        ("LBT-RM:10.0.0.1:14390:e0679abb:224.10.10.10:14400", "LBT-RM is spelt LBTRM"),
        ("LBTRU:10.0.0.1:14390", "LBTRU is spelt LBT-RU"),
        ("TCP:10.0.0.1", r"1 field\(s\) after the prefix, need 2 or 3"),
        ("TCP:10.0.0.1:70000", "port must be an integer in 0..65535"),
        ("TCP:10.0.0.1:14371:xyz", "session id 'xyz' is not 1-8 hexadecimal digits"),
        ("TCP:10.0.0.1:14371:123456789", "not 1-8 hexadecimal digits"),
        ("TCP:host.example:14371", "ip 'host.example' is not a dotted IPv4 address"),
        ("TCP:10.0.0.256:14371", "not a dotted IPv4 address"),
        ("LBTRM:10.0.0.1:14390:e0679abb:224.10.10.10", "need 5"),
        ("LBT-IPC:6481f8d4", "need 2"),
        ("LBT-IPC:6481f8d4:20000[4294967296]", "topic_index must be an integer"),
        ("LBT-SMX:6481f8d4:20000[x]", "not a decimal number"),
        ("BROKER:1", "just BROKER"),
        ("BROKER[1]", "just BROKER"),
    ],
)
def test_parse_errors_name_the_problem_and_the_format(text: str, match: str) -> None:
    with pytest.raises(SourceStringError, match=match) as info:
        SourceString.parse(text)
    assert isinstance(info.value, ValueError)


def test_bad_prefix_lists_every_format() -> None:
    with pytest.raises(SourceStringError) as info:
        SourceString.parse("SMX:1:2")
    for form in ("TCP:", "LBTRM:", "LBT-RU:", "LBT-IPC:", "LBT-SMX:", "BROKER"):
        assert form in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"transport": "udp"}, "transport must be one of"),
        ({"transport": TransportKind.TCP, "ip": "10.0.0.1"}, "needs port"),
        ({"transport": TransportKind.LBTRM, "ip": "10.0.0.1", "port": 1, "session_id": 1}, "needs group"),
        (
            {"transport": TransportKind.LBTIPC, "session_id": 1, "transport_id": 2, "ip": "10.0.0.1"},
            "has no ip",
        ),
        (
            {"transport": TransportKind.TCP, "ip": "10.0.0.1", "port": 1, "session_id": -1},
            "session_id must be",
        ),
        ({"transport": TransportKind.TCP, "ip": "nope", "port": 1}, "ip must be a dotted IPv4"),
        ({"transport": TransportKind.BROKER, "topic_index": 1}, "no topic index"),
        ({"transport": TransportKind.LBTSMX, "session_id": 1, "transport_id": 70000}, "transport_id must be"),
    ],
)
def test_constructor_validates_fields_for_the_kind(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(SourceStringError, match=match):
        SourceString(**kwargs)  # type: ignore[arg-type]


def test_parse_refuses_non_strings() -> None:
    with pytest.raises(SourceStringError, match="must be a str"):
        SourceString.parse(b"TCP:1.2.3.4:5")  # type: ignore[arg-type]


def test_is_frozen_and_hashable() -> None:
    s = SourceString.parse("LBT-IPC:6481f8d4:20000[1]")
    assert {s: 1}[SourceString.parse("LBT-IPC:6481f8d4:20000[1]")] == 1
    with pytest.raises(AttributeError):
        s.port = 1  # type: ignore[misc]
