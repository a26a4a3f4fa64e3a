"""The option table (openum.config._options): coverage of the guide, typed defaults, ranges, metadata."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Any

import pytest

from openum._errors import ConfigError
from openum.config._options import OPTIONS, RANGE_PAIRS
from openum.config._registry import Option, Registry
from openum.config._types import AddressPort, Interface, IPv4, OptionValueError

GUIDE_OPTIONS = Path(__file__).resolve().parents[3].parent / "shared/spec/guide-options.tsv"

#: Names in guide-options.tsv that are not UM options but spellings of one in the Concepts Guide text:
#: "request_tcp_bind_↵request_port" split across a PDF line, "transport_lbt-smx_transmission_window_size"
#: split at the hyphen, and the guide's name for ume_proactive_keepalive_interval (10.1.5).
GUIDE_SPELLINGS = {
    "request_port": "request_tcp_bind_request_port",
    "smx_transmission_window_size": "transport_lbtsmx_transmission_window_size",
    "ume_proactive_heartbeat_interval": "ume_proactive_keepalive_interval",
}

REGISTRY = Registry(OPTIONS)


def _ids(opt: Option) -> str:
    return f"{'/'.join(opt.scopes)}:{opt.name}"


def _default(scope: str, name: str) -> Any:
    opt = REGISTRY.get(scope, name)
    assert opt is not None, f"({scope}, {name}) missing"
    return opt.default


def _guide_pairs() -> list[tuple[str, str]]:
    if not GUIDE_OPTIONS.is_file():
        pytest.skip(f"{GUIDE_OPTIONS} is absent (shared spec not checked out next to the repository)")
    pairs = []
    for line in GUIDE_OPTIONS.read_text(encoding="utf-8").splitlines():
        if line.strip():
            scope, name = line.split("\t")[:2]
            pairs.append((scope.strip(), name.strip()))
    return pairs


def test_table_size() -> None:
    assert len(OPTIONS) >= 300
    assert len(REGISTRY) >= len(OPTIONS)


def test_every_guide_option_is_in_the_registry() -> None:
    pairs = _guide_pairs()
    assert len(pairs) == 179
    missing = [
        (scope, name) for scope, name in pairs if (scope, GUIDE_SPELLINGS.get(name, name)) not in REGISTRY
    ]
    assert missing == []


@pytest.mark.parametrize("opt", OPTIONS, ids=_ids)
def test_default_is_accepted_by_its_type(opt: Option) -> None:
    if opt.default is None or opt.type.code_only:
        return
    assert opt.type.coerce(opt.default) == opt.default
    # ... and survives a round trip through configuration-file text.
    assert opt.type.parse(opt.default_text) == opt.default


@pytest.mark.parametrize("opt", OPTIONS, ids=_ids)
def test_metadata(opt: Option) -> None:
    assert re.fullmatch(r"[a-z][a-z0-9_]*", opt.name)
    assert opt.doc, "doc must be non-empty"
    assert opt.doc.strip() == opt.doc
    assert "\n" not in opt.doc, "doc must be a one-liner"
    assert len(opt.doc) <= 200
    assert opt.doc.endswith("."), "doc should be a sentence"
    assert re.fullmatch(r"(\d+(\.\d+)*)?", opt.section), f"bad section {opt.section!r}"
    assert opt.default_from in ("guide", "um", "openum")
    if opt.default_from == "openum":
        assert opt.note, "openum's own defaults must say why in note"
    if opt.default_from == "guide":
        assert opt.section, "a guide default must cite the section that states it"
    if re.search(r"_(interval|timeout|duration|delay|cooldown)$", opt.name) and not opt.type.code_only:
        assert opt.unit, "time options must name their unit"
    if opt.session:
        assert not set(opt.scopes) & {"context", "event_queue", "xsp"}, "session options are source/receiver"


def test_names_are_unique_per_scope_and_scopes_valid() -> None:
    seen: set[tuple[str, str]] = set()
    for opt in OPTIONS:
        for scope in opt.scopes:
            assert (scope, opt.name) not in seen
            seen.add((scope, opt.name))


def _as_comparable(value: Any) -> Any:
    if isinstance(value, str):
        return ipaddress.IPv4Address(value)
    return value


@pytest.mark.parametrize("pair", RANGE_PAIRS, ids=lambda p: f"{p[0]}:{p[1]}")
def test_range_pair_defaults(pair: tuple[str, str, str]) -> None:
    scope, low_name, high_name = pair
    low, high = _default(scope, low_name), _default(scope, high_name)
    assert low is not None
    assert high is not None
    assert _as_comparable(low) <= _as_comparable(high)


def test_defaults_keep_traffic_on_this_machine() -> None:
    for opt in OPTIONS:
        if isinstance(opt.type, Interface):
            assert opt.default in (None, "127.0.0.1"), opt.name
        elif isinstance(opt.type, IPv4) and not opt.type.multicast:
            assert opt.default in (None, "0.0.0.0"), opt.name
        elif isinstance(opt.type, AddressPort):
            assert opt.default is None, opt.name
    assert _default("context", "default_interface") == "127.0.0.1"


@pytest.mark.parametrize(
    ("scope", "name", "value"),
    [
        ("context", "resolver_multicast_address", "224.9.10.11"),
        ("context", "resolver_multicast_port", 12965),
        ("context", "resolver_unicast_destination_port", 15380),
        ("context", "transport_tcp_port_low", 14371),
        ("context", "transport_tcp_port_high", 14390),
        ("context", "transport_lbtru_port_low", 14380),
        ("context", "transport_lbtru_port_high", 14389),
        ("receiver", "transport_lbtru_port_low", 14360),
        ("receiver", "transport_lbtru_port_high", 14379),
        ("context", "transport_lbtrm_multicast_address_low", "224.10.10.10"),
        ("context", "transport_lbtrm_multicast_address_high", "224.10.10.14"),
        ("source", "transport_lbtrm_destination_port", 14400),
        ("context", "transport_lbtrm_source_port_low", 14390),
        ("context", "transport_lbtrm_source_port_high", 14399),
        ("context", "request_tcp_port_low", 14391),
        ("context", "request_tcp_port_high", 14395),
        ("source", "resolver_advertisement_minimum_initial_interval", 10),
        ("source", "resolver_advertisement_maximum_initial_interval", 500),
        ("source", "resolver_advertisement_minimum_initial_duration", 5000),
        ("source", "resolver_advertisement_sustain_interval", 1000),
        ("receiver", "resolver_query_minimum_initial_interval", 20),
        ("receiver", "resolver_query_maximum_initial_interval", 200),
        ("receiver", "resolver_query_minimum_initial_duration", 5000),
        ("receiver", "resolver_query_sustain_interval", 1000),
        ("source", "implicit_batching_minimum_length", 2048),
        ("source", "implicit_batching_interval", 200),
        ("receiver", "transport_lbtrm_nak_generation_interval", 10000),
        ("context", "transport_lbtrm_rate_interval", 10),
        ("receiver", "delivery_control_maximum_burst_loss", 1024),
        ("hfx", "delivery_control_maximum_burst_loss", 512),
        ("source", "transport", "tcp"),
        ("receiver", "ordered_delivery", 1),
        ("context", "operational_mode", "embedded"),
    ],
)
def test_important_defaults(scope: str, name: str, value: Any) -> None:
    assert _default(scope, name) == value


@pytest.mark.parametrize(
    ("scope", "name"),
    [
        ("source", "resolver_advertisement_minimum_sustain_duration"),
        ("receiver", "resolver_query_minimum_sustain_duration"),
        ("wildcard_receiver", "resolver_query_minimum_duration"),
    ],
)
def test_sustain_durations_keep_ums_seconds(scope: str, name: str) -> None:
    # UM states these in seconds (1 minute = 60); UM configuration files must load unchanged.
    opt = REGISTRY.get(scope, name)
    assert opt is not None
    assert (opt.default, opt.unit) == (60, "seconds")


def test_ms_units_of_the_phase_options() -> None:
    for scope, name in [
        ("source", "resolver_advertisement_minimum_initial_interval"),
        ("receiver", "transport_lbtrm_nak_generation_interval"),
        ("source", "implicit_batching_interval"),
    ]:
        opt = REGISTRY.get(scope, name)
        assert opt is not None
        assert opt.unit == "milliseconds"


def test_transport_enum_accepts_um_spellings() -> None:
    opt = REGISTRY.lookup("source", "transport")
    spellings = [("LBT-RM", "lbtrm"), ("lbtru", "lbtru"), ("lbt-ipc", "lbtipc"), ("LBT-SMX", "lbtsmx")]
    for text, value in spellings:
        assert opt.type.parse(text) == value
    assert opt.session


def test_scope_spellings_and_per_scope_rows() -> None:
    assert REGISTRY.lookup("wildcard-receiver", "pattern_type").default == "pcre"
    assert REGISTRY.lookup("hfx", "ordered_delivery").type.parse("-1") == -1
    with pytest.raises(ConfigError, match="ordered_delivery"):
        REGISTRY.convert("hfx", "ordered_delivery", "0", from_text=True)


def test_deprecated_options_are_marked() -> None:
    for scope, name in [
        ("context", "resolver_context_advertisement_interval"),
        ("context", "resolver_unicast_port"),
        ("source", "retransmit_retention_age_threshold"),
        ("wildcard_receiver", "pattern_callback"),
    ]:
        opt = REGISTRY.get(scope, name)
        assert opt is not None, name
        assert opt.deprecated, name
    assert not REGISTRY.lookup("context", "resolver_unicast_daemon").deprecated


def test_session_options() -> None:
    for scope, name in [
        ("source", "implicit_batching_interval"),
        ("receiver", "transport_lbtrm_nak_generation_interval"),
        ("source", "transport_lbtrm_transmission_window_size"),
        ("source", "transport_tcp_multiple_receiver_behavior"),
    ]:
        assert REGISTRY.lookup(scope, name).session, name
    assert not REGISTRY.lookup("receiver", "ordered_delivery").session


def test_callbacks_are_code_only() -> None:
    opt = REGISTRY.lookup("context", "resolver_source_notification_function")
    assert opt.type.code_only
    assert opt.default is None


@pytest.mark.parametrize(
    "name",
    ["transport_lbtrm_datagram_max_size", "transport_lbtru_datagram_max_size", "resolver_datagram_max_size"],
)
def test_udp_datagram_sizes_stop_at_what_one_udp_datagram_carries(name: str) -> None:
    """65,507 bytes is the largest UDP payload over IPv4; a larger setting would fail every sendto
    (EMSGSIZE) and lose the data, so it is refused when set, naming the allowed range."""
    opt = next(o for o in OPTIONS if o.name == name)
    assert opt.type.parse("65507") == 65507
    assert "65507" in opt.type.describe()  # what the error names as allowed
    with pytest.raises(OptionValueError, match="out of range"):
        opt.type.parse("65508")


@pytest.mark.parametrize("name", ["resolver_unicast_keepalive_interval", "resolver_unicast_change_interval"])
def test_unicast_daemon_intervals_refuse_zero(name: str) -> None:
    """0 would send keepalives on every turn of the loop (a storm at the daemons), or never leave a
    silent daemon: refused, naming the allowed range."""
    opt = next(o for o in OPTIONS if o.name == name)
    assert opt.type.parse("1") == 1
    with pytest.raises(OptionValueError, match="out of range"):
        opt.type.parse("0")
