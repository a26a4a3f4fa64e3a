"""Precedence of configuration layers, XML resolution, allow/deny rules and attribute objects."""

from __future__ import annotations

from pathlib import Path

import pytest

import openum
from openum.config import Config, ContextAttributes, SourceAttributes, reset_default_config

XML = """<?xml version="1.0" encoding="UTF-8"?>
<um-configuration version="1.0">
  <templates>
    <template name="base">
      <options type="context">
        <option name="resolver_multicast_port" default-value="13000"/>
      </options>
      <options type="source">
        <option name="transport" default-value="lbtru"/>
      </options>
    </template>
    <template name="fast">
      <options type="context">
        <option name="resolver_multicast_port" default-value="13001"/>
      </options>
    </template>
  </templates>
  <applications>
    <application name="trader" template="base">
      <contexts>
        <context name="A" template="fast">
          <options type="context">
            <option name="operational_mode" default-value="sequential"/>
            <option name="transport_tcp_port_low" order="allow,deny">
              <allow>14371</allow>
              <allow>14380</allow>
            </option>
          </options>
          <sources order="deny,allow">
            <topic topicname="Orders.Special"><options type="source">
              <option name="transport" default-value="tcp"/></options></topic>
            <topic pattern="^Orders"><options type="source">
              <option name="transport" default-value="lbtrm"/></options></topic>
            <topic pattern="^Secret" rule="deny"/>
          </sources>
        </context>
      </contexts>
    </application>
  </applications>
</um-configuration>
"""


@pytest.fixture
def xml_file(tmp_path: Path) -> Path:
    path = tmp_path / "um.xml"
    path.write_text(XML)
    return path


def test_xml_layers_templates_then_context_then_topic(xml_file: Path) -> None:
    config = Config(xml_file, application="trader")
    a = config.attributes("context", context="A")
    assert a.get("operational_mode") == "sequential"
    assert a.get("resolver_multicast_port") == 13001  # context template beats application template
    assert a.origin("resolver_multicast_port").endswith("um.xml:14")
    b = config.attributes("context", context="B")
    assert b.get("operational_mode") == "embedded"
    assert b.get("resolver_multicast_port") == 13000
    src = lambda topic: config.attributes("source", context="A", topic=topic).get("transport")  # noqa: E731
    assert src("Orders.Special") == "tcp"  # exact name wins over an earlier pattern
    assert src("Orders.X") == "lbtrm"
    assert src("Quotes") == "lbtru"
    assert config.topic_permitted("source", "Orders", context="A")
    assert not config.topic_permitted("source", "Secret.plans", context="A")


def test_xml_allow_rules_check_the_final_value(xml_file: Path) -> None:
    config = Config(xml_file, application="trader")
    assert config.attributes("context", context="A", overrides={"transport_tcp_port_low": 14380})
    with pytest.raises(openum.ConfigError) as err:
        config.attributes("context", context="A", overrides={"transport_tcp_port_low": 14000})
    assert "denied" in str(err.value) and err.value.option == "transport_tcp_port_low"


def test_unknown_application_is_refused(xml_file: Path) -> None:
    config = Config(xml_file, application="nobody")
    with pytest.raises(openum.ConfigError) as err:
        config.attributes("context")
    assert "no <application> matches" in str(err.value)


def test_xml_errors_name_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.xml"
    bad.write_text(
        '<?xml version="1.0"?>\n<um-configuration version="1.0">\n<templates>\n<template name="t">\n'
        '<options type="context">\n<option name="resolver_multicast_prot" default-value="1"/>\n'
        '<option name="resolver_multicast_port" default-value="x"/>\n</options></template></templates>\n'
        '<applications><application template="missing"/></applications>\n</um-configuration>\n'
    )
    with pytest.raises(openum.ConfigError) as err:
        Config(bad)
    lines = [(e.line, e.reason) for e in err.value.errors]
    assert lines[0][0] == 6 and "resolver_multicast_port" in lines[0][1]
    assert lines[1][0] == 7 and "invalid value 'x'" in lines[1][1]
    assert lines[2][0] == 9 and "unknown template 'missing'" in lines[2][1]
    broken = tmp_path / "broken.xml"
    broken.write_text('<?xml version="1.0"?>\n<um-configuration>\n<templates>\n</um-configuration>\n')
    with pytest.raises(openum.ConfigError) as err2:
        Config(broken)
    assert err2.value.line == 4 and "not well-formed" in str(err2.value)


def test_precedence_defaults_xml_flat_option_code(tmp_path: Path, xml_file: Path) -> None:
    flat = tmp_path / "app.cfg"
    flat.write_text("context resolver_multicast_port 14000\n")
    config = Config(xml_file, flat, application="trader")
    assert config.attributes("context", context="A").get("resolver_multicast_port") == 14000
    config.set_option("context resolver_multicast_port 14001")
    assert config.attributes("context", context="A").get("resolver_multicast_port") == 14001
    attrs = ContextAttributes()
    attrs.set("resolver_multicast_port", "14002")
    final = config.attributes("context", context="A", overrides=attrs)
    assert final.get("resolver_multicast_port") == 14002
    assert final.origin("resolver_multicast_port") == "code"


def test_range_pairs_checked_on_the_effective_values(tmp_path: Path) -> None:
    flat = tmp_path / "ports.cfg"
    flat.write_text("context transport_tcp_port_low 15000\n")
    config = Config(flat)
    with pytest.raises(openum.ConfigError) as err:
        config.attributes("context")
    assert err.value.source == str(flat) and err.value.line == 1
    assert "transport_tcp_port_high" in str(err.value)
    ok = config.attributes("context", overrides={"transport_tcp_port_high": 15010})
    assert ok.get("transport_tcp_port_low") == 15000


def test_attribute_objects() -> None:
    attrs = SourceAttributes()
    assert attrs.get("transport") == "tcp" and not attrs.is_set("transport")
    attrs.set("transport", "lbt-rm")
    assert attrs["transport"] == "lbtrm" and attrs.get_str("transport") == "lbtrm"
    clone = attrs.copy()
    clone.set("transport", "lbtru")
    assert attrs.get("transport") == "lbtrm" and clone.get("transport") == "lbtru"
    with pytest.raises(openum.ConfigError):
        attrs.set("transport", "carrier-pigeon")
    assert attrs.get("transport") == "lbtrm"  # a refused value changes nothing
    with pytest.raises(openum.ConfigError):
        attrs.update({"transport": "tcp", "no_such_option": 1})
    assert attrs.get("transport") == "lbtrm"  # all-or-nothing
    attrs.reset("transport")
    assert attrs.get("transport") == "tcp"


def test_multi_valued_option_appends_and_list_replaces() -> None:
    attrs = ContextAttributes()
    attrs.set("resolver_unicast_daemon", "127.0.0.1:15380")
    attrs.set("resolver_unicast_daemon", "127.0.0.1:15381")
    assert attrs.get("resolver_unicast_daemon") == ("127.0.0.1:15380", "127.0.0.1:15381")
    attrs.set("resolver_unicast_daemon", ["127.0.0.1:15999"])
    assert attrs.get("resolver_unicast_daemon") == ("127.0.0.1:15999",)


def test_callback_options_settable_only_from_code(tmp_path: Path) -> None:
    flat = tmp_path / "cb.cfg"
    flat.write_text("receiver source_notification_function my_function\n")
    with pytest.raises(openum.ConfigError) as err:
        Config(flat)
    assert "only be set from code" in str(err.value)
    attrs = openum.ReceiverAttributes()
    attrs.set("source_notification_function", (print, "clientd"))
    assert attrs.get("source_notification_function") == (print, "clientd")


def test_environment_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    flat = tmp_path / "env.cfg"
    flat.write_text("context resolver_multicast_port 12999\n")
    monkeypatch.setenv("LBM_DEFAULT_CONFIG_FILE", str(flat))
    reset_default_config()
    try:
        with openum.Context(options=["context operational_mode sequential"]) as ctx:
            assert ctx.get_option("resolver_multicast_port") == 12999
        monkeypatch.setenv("LBM_DEFAULT_CONFIG_FILE", str(tmp_path / "missing.cfg"))
        reset_default_config()
        with pytest.raises(openum.ConfigError) as err:
            openum.Context()
        assert "LBM_DEFAULT_CONFIG_FILE" in str(err.value)
    finally:
        monkeypatch.delenv("LBM_DEFAULT_CONFIG_FILE")
        reset_default_config()


def test_context_refuses_bad_configuration_with_file_and_line(tmp_path: Path) -> None:
    flat = tmp_path / "bad.cfg"
    flat.write_text("context operational_mode sequential\ncontext resolver_multicst_port 1\n")
    with pytest.raises(openum.ConfigError) as err:
        openum.Context(flat)
    assert err.value.source == str(flat) and err.value.line == 2
    with pytest.raises(openum.ConfigError) as err2:
        openum.Context(options=["context resolver_multicast_port 99999"])
    assert err2.value.option == "resolver_multicast_port" and err2.value.scope == "context"
    with pytest.raises(openum.ConfigError):
        openum.Context(attrs={"operational_mode": "sometimes"})
