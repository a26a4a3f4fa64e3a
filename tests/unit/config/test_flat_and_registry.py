"""Flat files, --option lines and mappings: UM's syntax and ConfigError's contents."""

from __future__ import annotations

from pathlib import Path

import pytest

import openum
from openum.config import REGISTRY, Config, parse_flat_text, parse_option_line
from openum.config._flat import settings_from_mapping


def test_flat_file_with_comments_and_values_with_spaces(tmp_path: Path) -> None:
    text = (
        "# a comment\n"
        "\n"
        "context resolver_multicast_port 12000   # inline comment\n"
        "SOURCE transport LBT-RM\n"
        "   receiver ordered_delivery -1\n"
    )
    settings = parse_flat_text(text, "app.cfg")
    assert [(s.scope, s.option.name, s.value) for s in settings] == [
        ("context", "resolver_multicast_port", 12000),
        ("source", "transport", "lbtrm"),
        ("receiver", "ordered_delivery", -1),
    ]
    assert settings[0].origin == "app.cfg:3"


def test_every_bad_line_is_reported_with_file_and_line() -> None:
    text = (
        "context resolver_multicst_port 12000\n"
        "context resolver_multicast_port 12000\n"
        "receiver transport tcp\n"
        "context transport_tcp_port_low 70000\n"
        "nonsense\n"
        "bogus_scope transport tcp\n"
    )
    with pytest.raises(openum.ConfigError) as err:
        parse_flat_text(text, "bad.cfg")
    errors = err.value.errors
    assert [e.line for e in errors] == [1, 3, 4, 5, 6]
    assert all(e.source == "bad.cfg" for e in errors)
    misspelt, wrong_scope, out_of_range = errors[0], errors[1], errors[2]
    assert misspelt.option == "resolver_multicst_port" and misspelt.scope == "context"
    assert "resolver_multicast_port" in misspelt.suggestions
    assert "did you mean resolver_multicast_port" in str(misspelt)
    assert wrong_scope.scope == "receiver" and "scope source" in str(wrong_scope)
    assert out_of_range.value == "70000" and out_of_range.allowed == "an integer from 0 to 65535"
    assert str(err.value).splitlines()[0].startswith("bad.cfg:1: ")
    assert err.value.errnum == openum.LBM_EINVAL


def test_option_line_needs_three_fields() -> None:
    with pytest.raises(openum.ConfigError) as err:
        parse_option_line("context resolver_multicast_port")
    assert "SCOPE OPTION VALUE" in str(err.value)


def test_mapping_shapes() -> None:
    settings = settings_from_mapping(
        {
            "context": {"resolver_multicast_port": 12001},
            "source transport": "lbtru",
            ("receiver", "ordered_delivery"): 0,
        }
    )
    assert {(s.scope, s.option.name, s.value) for s in settings} == {
        ("context", "resolver_multicast_port", 12001),
        ("source", "transport", "lbtru"),
        ("receiver", "ordered_delivery", 0),
    }


def test_misspelt_option_in_wrong_scope_still_gets_a_suggestion() -> None:
    with pytest.raises(openum.ConfigError) as err:
        REGISTRY.lookup("context", "transprt")
    assert "transport" in err.value.suggestions


def test_nothing_is_applied_when_one_setting_is_bad() -> None:
    config = Config()
    with pytest.raises(openum.ConfigError):
        config.set_options(["context resolver_multicast_port 12002", "context nope 1"])
    assert config.settings == []
    assert config.attributes("context").get("resolver_multicast_port") == 12965
