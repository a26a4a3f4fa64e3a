"""Live or refused (ARCHITECTURE.md rule 6): every option openum accepts takes effect, the others are refused.

The registry records what openum implements of each option (``openum.config.IMPLEMENTED``).  These tests
keep it honest in both directions: an option marked implemented is read by code outside
``openum.config`` (a static check, itself tested), and an option not marked is refused when set, by
every way of setting it, unless the process lets unimplemented options through with a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import openum
from openum.config import (
    ENV_POLICY,
    IMPLEMENTED,
    REGISTRY,
    Config,
    Option,
    ReceiverAttributes,
    Registry,
    parse_flat_text,
    parse_xml_text,
    set_unimplemented_policy,
    unimplemented_policy,
)
from openum.config._options import OPTIONS
from openum.config._types import (
    AddressPort,
    Bool,
    CallbackType,
    Enum,
    Int,
    Interface,
    IPv4,
    PortRange,
    Str,
)
from tests.unit.config.option_reads import option_reads, source_files, unread_implemented

PACKAGE = Path(openum.__file__).resolve().parent


@pytest.fixture(autouse=True)
def _refusing(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every test starts refusing (the default) and leaves no policy behind."""
    monkeypatch.delenv(ENV_POLICY, raising=False)
    set_unimplemented_policy(None)
    yield
    set_unimplemented_policy(None)


def _other_value(opt: Option) -> Any:
    """A value the option's type accepts that is not its default (typed, as code would set it)."""
    kind = opt.type
    candidates: list[Any]
    if isinstance(kind, CallbackType):
        return lambda *args: None
    if isinstance(kind, Bool):
        candidates = [not opt.default]
    elif isinstance(kind, Int):
        base = opt.default if isinstance(opt.default, int) else 0
        candidates = [base + 1, base - 1, kind.minimum, kind.maximum]
    elif isinstance(kind, Enum):
        candidates = list(kind.choices.values())
    elif isinstance(kind, IPv4):
        candidates = ["239.192.0.1" if kind.multicast else "127.0.0.2"]
    elif isinstance(kind, Interface):
        candidates = ["127.0.0.2"]
    elif isinstance(kind, AddressPort):
        candidates = ["127.0.0.1:15999"]
    elif isinstance(kind, PortRange):
        candidates = [(15000, 15001)]
    elif isinstance(kind, Str):
        candidates = ["x", "openum"]
    else:
        raise AssertionError(f"no sample value for {type(kind).__name__} ({opt.name})")
    for value in candidates:
        if value is None or value == opt.default:
            continue
        try:
            typed = kind.coerce(value)
        except ValueError:
            continue
        if typed != opt.default:
            return typed
    raise AssertionError(f"no non-default value for {opt.name}")


def _pairs(*, implemented: bool) -> list[tuple[str, Option]]:
    return [
        (scope, opt)
        for scope, opt in REGISTRY.pairs()
        if not opt.alias_of and REGISTRY.support(scope, opt.name).implemented is implemented
    ]


def _ids(pair: tuple[str, Option]) -> str:
    return f"{pair[0]}:{pair[1].name}"


# -- the registry's marks ------------------------------------------------------------------------------


def test_every_option_implemented_is_read_by_code_outside_config() -> None:
    unread = unread_implemented(REGISTRY, source_files(PACKAGE))
    assert not unread, f"marked implemented but read nowhere outside openum.config: {unread}"


def test_the_read_check_flags_an_implemented_mark_that_nothing_reads(tmp_path: Path) -> None:
    marked = dict(IMPLEMENTED)
    marked["context"] = (*IMPLEMENTED["context"], "use_tls")
    lying = Registry(OPTIONS, marked)
    assert unread_implemented(lying, source_files(PACKAGE)) == [("context", "use_tls")]
    # A docstring or an f-string mentions an option; it does not read it.
    mention = tmp_path / "mention.py"
    mention.write_text('"""use_tls"""\n\ndef f(x):\n    """use_tls"""\n    return f"use_tls {x}"\n')
    assert option_reads([mention], {"use_tls"}) == {}
    assert unread_implemented(lying, [*source_files(PACKAGE), mention]) == [("context", "use_tls")]
    # A read is a string constant used as a value.
    reader = tmp_path / "reader.py"
    reader.write_text('def tls(attrs):\n    return attrs.get("use_tls")\n')
    assert option_reads([reader], {"use_tls"}) == {"use_tls": [f"{reader}:2"]}
    assert unread_implemented(lying, [*source_files(PACKAGE), reader]) == []


@pytest.mark.parametrize("pair", _pairs(implemented=False), ids=_ids)
def test_every_option_not_implemented_is_refused_when_set(pair: tuple[str, Option]) -> None:
    scope, opt = pair
    value = _other_value(opt)
    with pytest.raises(openum.ConfigError, match="not implemented in this version of openum") as err:
        REGISTRY.convert(scope, opt.name, value, from_text=False)
    assert (err.value.option, err.value.scope) == (opt.name, scope)
    if not opt.type.code_only:
        with pytest.raises(openum.ConfigError, match="not implemented") as err:
            parse_flat_text(f"{scope} {opt.name} {opt.type.format(value)}\n", "um.cfg")
        assert (err.value.source, err.value.line) == ("um.cfg", 1)
    # Its default stays accepted: it is what openum does.
    assert REGISTRY.permits(scope, opt, opt.default)
    if opt.default is not None and not opt.type.code_only:
        assert REGISTRY.convert(scope, opt.name, opt.default_text, from_text=True)[1] == opt.default


@pytest.mark.parametrize("pair", _pairs(implemented=True), ids=_ids)
def test_every_option_implemented_is_accepted_with_another_value(pair: tuple[str, Option]) -> None:
    scope, opt = pair
    support = REGISTRY.support(scope, opt.name)
    values = support.values if support.values is not None else (_other_value(opt),)
    for value in values:
        assert REGISTRY.convert(scope, opt.name, value, from_text=False)[1] == opt.type.coerce(value)


def test_partly_implemented_options_refuse_the_other_values() -> None:
    support = REGISTRY.support("source", "transport")
    assert support.text == "partial: tcp, lbtrm, lbtru, lbtipc, lbtsmx"
    for name in ("tcp", "lbtrm", "lbt-ru", "lbtipc", "lbt-smx"):
        Config().set_option(f"source transport {name}")
    for name in ("broker",):
        with pytest.raises(openum.ConfigError, match=f"transport {name} is not implemented") as err:
            Config().set_option(f"source transport {name}")
        assert err.value.allowed == "tcp, lbtrm, lbtru, lbtipc, lbtsmx"
    assert REGISTRY.support("wildcard_receiver", "pattern_type").text == "partial: pcre"
    with pytest.raises(openum.ConfigError, match="pattern_type regex is not implemented"):
        Config().set_option("wildcard_receiver pattern_type regex")


def test_status_texts() -> None:
    assert REGISTRY.support("context", "resolver_multicast_port").text == "implemented"
    assert REGISTRY.support("context", "use_tls").text == "not implemented"
    assert REGISTRY.support("source", "transport").values == ("tcp", "lbtrm", "lbtru", "lbtipc", "lbtsmx")
    # An alias answers for its real option; a scope where an option is not implemented says so.
    assert REGISTRY.support("context", "request_port") == REGISTRY.support(
        "context", "request_tcp_bind_request_port"
    )
    assert REGISTRY.support("context", "operational_mode").implemented
    assert not REGISTRY.support("xsp", "operational_mode").implemented


def test_the_implemented_table_is_checked_when_the_registry_is_built() -> None:
    with pytest.raises(ValueError, match="not an option of the table"):
        Registry(OPTIONS, {"context": ("no_such_option",)})
    with pytest.raises(ValueError, match="twice"):
        Registry(OPTIONS, {"context": ("context_name", "context_name")})
    with pytest.raises(ValueError, match=r"\(source, transport\)"):
        Registry(OPTIONS, {"source": (("transport", ("pigeon",)),)})
    with pytest.raises(ValueError, match="unknown scope"):
        Registry(OPTIONS, {"topic": ()})


# -- refused by every way of setting an option ---------------------------------------------------------


def test_refused_in_a_flat_file_with_file_and_line(tmp_path: Path) -> None:
    cfg = tmp_path / "um.cfg"
    cfg.write_text(
        "context use_tls 1\n# a comment\nreceiver hf_duplicate_delivery 1\n"
        "context resolver_service 127.0.0.1:27000\ncontext resolver_multicast_port 12965\n"
    )
    with pytest.raises(openum.ConfigError) as err:
        openum.Context(cfg)
    found = [(e.source, e.line, e.scope, e.option) for e in err.value.errors]
    assert found == [
        (str(cfg), 1, "context", "use_tls"),
        (str(cfg), 3, "receiver", "hf_duplicate_delivery"),
        (str(cfg), 4, "context", "resolver_service"),
    ]
    assert all("not implemented in this version of openum" in e.reason for e in err.value.errors)


def test_refused_in_xml_files_including_per_topic_entries() -> None:
    xml = (
        '<?xml version="1.0"?>\n<um-configuration version="1.0">\n<applications><application>\n'
        '<contexts><context name="c">\n'
        '<options type="context"><option name="use_tls" default-value="1"/></options>\n'
        '<receivers><topic topicname="orders">\n'
        '<options type="receiver"><option name="hf_duplicate_delivery" default-value="1"/></options>\n'
        "</topic></receivers>\n"
        "</context></contexts></application></applications></um-configuration>\n"
    )
    with pytest.raises(openum.ConfigError) as err:
        parse_xml_text(xml, "um.xml")
    assert [(e.line, e.option) for e in err.value.errors] == [(5, "use_tls"), (7, "hf_duplicate_delivery")]
    assert all(e.source == "um.xml" for e in err.value.errors)


def test_refused_from_code_options_and_mappings() -> None:
    with pytest.raises(openum.ConfigError, match="receiver option hf_duplicate_delivery is not implemented"):
        ReceiverAttributes().set("hf_duplicate_delivery", 1)
    with pytest.raises(openum.ConfigError, match="hf_duplicate_delivery"):
        ReceiverAttributes(values={"hf_duplicate_delivery": 1})
    for line in (
        "context use_tls 1",
        "receiver hf_duplicate_delivery 1",
        "context resolver_service 127.0.0.1:27000",
    ):
        with pytest.raises(openum.ConfigError, match="not implemented") as err:
            openum.Context(options=[line])
        assert err.value.source == "--option"
    with pytest.raises(openum.ConfigError, match="compression"):
        openum.Context({"context": {"compression": "lz4"}})
    with pytest.raises(openum.ConfigError, match="context_event_function"):
        openum.Context(attrs={"context_event_function": lambda *a: None})
    with openum.Context(options=["context resolver_multicast_port 12965"]) as ctx:
        with pytest.raises(openum.ConfigError, match="hf_duplicate_delivery"):
            ctx.create_receiver("t", attrs={"hf_duplicate_delivery": 1})
        with pytest.raises(openum.ConfigError, match="monitor_interval"):
            ctx.create_wildcard_receiver("^t", attrs={"monitor_interval": 5})


# -- the opt-out: let through, one warning per option --------------------------------------------------


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "not implemented in this version of openum" in r.getMessage()
    ]


def test_opt_out_lets_options_through_with_one_warning_per_option(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    monkeypatch.setenv(ENV_POLICY, "warn")
    assert unimplemented_policy() == "warn"
    cfg = tmp_path / "um.cfg"
    cfg.write_text("context use_tls 1\nreceiver ume_registration_interval 100\n")
    options = ["context resolver_service 127.0.0.1:27000", "context use_tls 1"]  # use_tls twice
    caplog.set_level(logging.WARNING, logger="openum")
    with openum.Context(cfg, options=options) as ctx:
        warned = _warnings(caplog)
        assert len(warned) == 3, warned
        assert any("context option use_tls 1 " in w and f"{cfg}:1" in w for w in warned)
        assert any("receiver option ume_registration_interval 100 " in w for w in warned)
        assert any("context option resolver_service 127.0.0.1:27000 " in w for w in warned)
        assert all("has no effect" in w and f"{ENV_POLICY}=warn" in w for w in warned)
        # Receivers created later do not repeat them; a new option set from code gets its own warning.
        ctx.create_receiver("a").close()
        ctx.create_receiver("b", attrs={"hf_duplicate_delivery": 1}).close()
        ctx.create_receiver("c", attrs={"hf_duplicate_delivery": 1}).close()
        warned = _warnings(caplog)
        assert len(warned) == 4
        assert "receiver option hf_duplicate_delivery 1 " in warned[-1] and "code" in warned[-1]
    assert ctx.closed


def test_opt_out_from_code_and_its_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    set_unimplemented_policy("warn")
    assert unimplemented_policy() == "warn"
    assert ReceiverAttributes(values={"hf_duplicate_delivery": 1}).get("hf_duplicate_delivery") == 1
    set_unimplemented_policy("refuse")
    monkeypatch.setenv(ENV_POLICY, "warn")
    assert unimplemented_policy() == "refuse"  # code wins over the environment
    set_unimplemented_policy(None)
    assert unimplemented_policy() == "warn"
    with pytest.raises(openum.ConfigError, match="allow") as err:
        set_unimplemented_policy("ignore")
    assert err.value.allowed == "refuse, warn"
    monkeypatch.setenv(ENV_POLICY, "yes")
    with pytest.raises(openum.ConfigError, match=ENV_POLICY) as err:
        unimplemented_policy()
    assert err.value.allowed == "refuse, warn"


def test_refusing_again_after_the_opt_out_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_POLICY, "warn")
    Config().set_option("context use_tls 1")
    monkeypatch.setenv(ENV_POLICY, "refuse")
    with pytest.raises(openum.ConfigError, match="use_tls"):
        Config().set_option("context use_tls 1")


def test_config_lists_what_it_let_through(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_POLICY, "warn")
    config = Config().set_options(["context use_tls 1", "context resolver_multicast_port 12965"])
    config.set_option("source transport broker", source="app.cfg:7")
    assert [(s.scope, s.option.name, s.origin) for s in config.unimplemented()] == [
        ("context", "use_tls", "--option"),
        ("source", "transport", "app.cfg:7"),
    ]
    text = REGISTRY.unimplemented_text("source", REGISTRY.lookup("source", "transport"), "broker")
    assert text == (
        "source option transport broker is not implemented in this version of openum "
        "(implemented: tcp, lbtrm, lbtru, lbtipc, lbtsmx)"
    )


def test_an_event_queue_warns_about_what_was_let_through(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(ENV_POLICY, "warn")
    caplog.set_level(logging.WARNING, logger="openum")
    evq = openum.EventQueue(attrs={"queue_objects_purged_on_close": 0})
    try:
        warned = _warnings(caplog)
        assert len(warned) == 1
        assert "event_queue option queue_objects_purged_on_close 0 " in warned[0] and "code" in warned[0]
    finally:
        evq.close()
