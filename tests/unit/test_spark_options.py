"""Options of the openum Spark data source, checked without Spark (openum.spark._options).

Spark hands options as strings with lower-cased keys; names are matched without regard to case, unknown
names are refused with the nearest known names, ``option.<scope>.<name>`` keys become checked UM option
lines, ``config`` files are read on the driver and shipped, and the default spool directory is derived
deterministically from what identifies the subscription.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from openum import ConfigError
from openum.spark._options import (
    READ_OPTIONS,
    WRITE_OPTIONS,
    check_names,
    parse_read_options,
    parse_size,
    parse_write_options,
)


def test_read_options_in_spark_spelling_map_to_values_and_um_lines() -> None:
    opts = parse_read_options(
        {
            "pattern": "^md/",
            "maxmessagesperbatch": "500",
            "spooldir": "/tmp/openum-spool-x",
            "maxspoolbytes": "64m",
            "spoolfullpolicy": "FAIL",
            "option.context.resolver_multicast_port": "23965",
            "option.receiver.ordered_delivery": "1",
            "checkpointLocation": "/ignored",
        }
    )
    assert opts.pattern == "^md/"
    assert opts.topic is None
    assert opts.max_messages_per_batch == 500
    assert opts.spool_dir == "/tmp/openum-spool-x"
    assert opts.max_spool_bytes == 64 << 20
    assert opts.spool_full_policy == "fail"
    assert opts.spool_fsync == "batch"
    assert opts.um.lines == ("context resolver_multicast_port 23965", "receiver ordered_delivery 1")
    config = opts.um.build()
    assert config.attributes("context").get("resolver_multicast_port") == 23965
    assert pickle.loads(pickle.dumps(opts)) == opts  # travels to Spark's Python workers


def test_unknown_option_names_are_refused_with_suggestions() -> None:
    with pytest.raises(ConfigError) as err:
        parse_read_options({"topic": "t", "maxMessagesPerBatc": "5"})
    assert "unknown option 'maxMessagesPerBatc'" in str(err.value)
    assert "did you mean 'maxMessagesPerBatch'" in str(err.value)
    assert err.value.suggestions[0] == "maxMessagesPerBatch"
    with pytest.raises(ConfigError, match="it is an option of writing"):
        parse_read_options({"topic": "t", "waitForReceivers": "1"})
    with pytest.raises(ConfigError, match="the publishing sources choose the transport"):
        parse_read_options({"topic": "t", "transport": "lbtrm"})
    with pytest.raises(ConfigError, match="it is an option of reading"):
        parse_write_options({"topic": "t", "spoolDir": "/x"})
    with pytest.raises(ConfigError, match="did you mean 'waitForReceivers'"):
        check_names({"waitforreceiver": "1"}, "write")


def test_um_options_are_checked_by_the_registry() -> None:
    with pytest.raises(ConfigError) as err:
        parse_read_options({"topic": "t", "option.context.resolver_multicast_prot": "1"})
    assert "resolver_multicast_port" in err.value.suggestions
    assert "option.context.resolver_multicast_prot" in str(err.value)
    with pytest.raises(ConfigError, match="invalid value 'abc'"):
        parse_read_options({"topic": "t", "option.context.resolver_multicast_port": "abc"})
    with pytest.raises(ConfigError, match="unknown scope"):
        parse_read_options({"topic": "t", "option.ctx.resolver_multicast_port": "1"})
    with pytest.raises(ConfigError, match=r"option\.<scope>\.<name>"):
        parse_read_options({"topic": "t", "option.context": "1"})


def test_reading_needs_exactly_one_of_topic_and_pattern() -> None:
    with pytest.raises(ConfigError, match="exactly one of the options 'topic'"):
        parse_read_options({})
    with pytest.raises(ConfigError, match="not both"):
        parse_read_options({"topic": "a", "pattern": "b"})
    with pytest.raises(ConfigError, match="not a regular expression"):
        parse_read_options({"pattern": "md/(("})


def test_values_are_checked() -> None:
    with pytest.raises(ConfigError, match="not a whole number"):
        parse_read_options({"topic": "t", "maxMessagesPerBatch": "lots"})
    with pytest.raises(ConfigError, match="too small"):
        parse_read_options({"topic": "t", "maxMessagesPerBatch": "0"})
    with pytest.raises(ConfigError, match="not one of block, fail"):
        parse_read_options({"topic": "t", "spoolFullPolicy": "drop"})
    with pytest.raises(ConfigError, match="not a size"):
        parse_read_options({"topic": "t", "maxSpoolBytes": "big"})
    assert parse_size("1g") == 1 << 30
    assert parse_size("512KiB") == 512 << 10
    assert parse_size("4096") == 4096


def test_default_spool_dir_is_deterministic_and_depends_on_the_subscription(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("OPENUM_SPARK_SPOOL", str(tmp_path))
    a1 = parse_read_options({"pattern": "^md/", "option.context.resolver_multicast_port": "23965"})
    a2 = parse_read_options(
        {"pattern": "^md/", "option.context.resolver_multicast_port": "23965", "maxMessagesPerBatch": "9"}
    )
    b = parse_read_options({"pattern": "^md/", "option.context.resolver_multicast_port": "23966"})
    c = parse_read_options({"topic": "^md/"})
    assert a1.spool_dir == a2.spool_dir  # tuning knobs do not move the spool: a restart finds it
    assert Path(a1.spool_dir).parent == tmp_path
    assert Path(a1.spool_dir).name.startswith("md-")
    assert len({a1.spool_dir, b.spool_dir, c.spool_dir}) == 3


def test_config_files_are_read_on_the_driver_and_shipped(tmp_path: Path) -> None:
    cfg = tmp_path / "app.cfg"
    cfg.write_text("context resolver_multicast_port 24965\nreceiver ordered_delivery 0\n", encoding="utf-8")
    opts = parse_read_options({"topic": "t", "config": str(cfg), "option.receiver.ordered_delivery": "-1"})
    cfg.unlink()  # an executor does not see the driver's files
    config = opts.um.build()
    assert config.attributes("context").get("resolver_multicast_port") == 24965
    assert config.attributes("receiver").get("ordered_delivery") == -1  # option.* wins over the file
    with pytest.raises(ConfigError, match="not found"):
        parse_read_options({"topic": "t", "config": str(tmp_path / "missing.cfg")})
    bad = tmp_path / "bad.cfg"
    bad.write_text("context resolver_multicast_prot 1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.cfg:1"):
        parse_read_options({"topic": "t", "config": str(bad)})


def test_write_options_transport_defaults_and_waiting() -> None:
    opts = parse_write_options(
        {"topic": "out", "transport": "lbtru", "waitForReceivers": "2", "checkpointLocation": "/ck"}
    )
    assert opts.topic == "out"
    assert opts.wait_for_receivers == 2
    assert opts.checkpoint_location == "/ck"
    source = opts.um.build().attributes("source")
    assert source.get("transport") == "lbtru"
    assert source.get("transport_tcp_reuseaddr")  # the writer's default, so a next task can listen again
    with pytest.raises(ConfigError, match=r"option 'transport'.*lbtrm"):
        parse_write_options({"transport": "lbtrx"})
    with pytest.raises(ConfigError, match=r"lbtrm, whose sources are not told"):
        parse_write_options({"transport": "lbtrm", "waitForReceivers": "1"})
    assert parse_write_options({"transport": "lbtrm"}).wait_for_receivers == 0


def test_every_documented_option_is_in_the_docs() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "spark.md").read_text(encoding="utf-8")
    for name in {*READ_OPTIONS, *WRITE_OPTIONS}:
        assert f"`{name}`" in docs, name
