"""The `openum` command as a real process: --version and `config options|show|check` (CLI.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import openum

ROOT = Path(__file__).resolve().parents[2]
GUIDE_OPTIONS = ROOT.parent / "shared" / "spec" / "guide-options.tsv"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    for var in ("LBM_DEFAULT_CONFIG_FILE", "OPENUM_CONFIG_FILE", "LBM_XML_CONFIG_FILENAME"):
        if env is None or var not in env:
            full_env.pop(var, None)
    return subprocess.run(
        [sys.executable, "-m", "openum", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=full_env,
        check=False,
    )


def test_version() -> None:
    proc = run("--version")
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"openum {openum.__version__}"


def test_no_command_is_a_usage_error() -> None:
    proc = run()
    assert proc.returncode == 2
    assert "COMMAND" in proc.stderr


def test_options_tsv_lists_every_guide_pair() -> None:
    if not GUIDE_OPTIONS.exists():
        pytest.skip(f"{GUIDE_OPTIONS} is not present in this checkout")
    proc = run("config", "options", "--format", "tsv")
    assert proc.returncode == 0
    rows = [line.split("\t") for line in proc.stdout.splitlines()]
    assert all(len(r) == 5 for r in rows), "tsv rows are scope, option, type, default, status"
    listed = {(r[0], r[1]) for r in rows}
    wanted = {tuple(line.split("\t")[:2]) for line in GUIDE_OPTIONS.read_text().splitlines() if line.strip()}
    assert len(wanted) >= 179
    missing = sorted(wanted - listed)
    assert not missing, f"guide options missing from the registry: {missing}"
    defaults = {(r[0], r[1]): r[3] for r in rows}
    assert defaults[("context", "resolver_multicast_address")] == "224.9.10.11"
    assert defaults[("source", "implicit_batching_minimum_length")] == "2048"
    status = {(r[0], r[1]): r[4] for r in rows}
    assert status[("context", "resolver_multicast_address")] == "implemented"
    assert status[("context", "use_tls")] == "not implemented"
    assert status[("source", "transport")] == "partial: tcp, lbtrm, lbtru, lbtipc, lbtsmx"
    assert set(status.values()) == {
        "implemented",
        "not implemented",
        "partial: tcp, lbtrm, lbtru, lbtipc, lbtsmx",
        "partial: pcre",
    }


def test_check_names_every_unimplemented_line_and_the_opt_out_lets_them_through(tmp_path: Path) -> None:
    cfg = tmp_path / "um.cfg"
    cfg.write_text(
        "context use_tls 1\nreceiver hf_duplicate_delivery 1\ncontext resolver_service 127.0.0.1:27000\n"
        "context resolver_multicast_port 12965\n"
    )
    proc = run("config", "check", str(cfg))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert [ln.split(":")[1] for ln in lines] == ["1", "2", "3"]
    for line, option in zip(
        lines,
        (
            "context option use_tls",
            "receiver option hf_duplicate_delivery",
            "context option resolver_service",
        ),
        strict=True,
    ):
        assert f"{option} is not implemented in this version of openum" in line
    for allow in (["--allow-unimplemented"], []):
        env = None if allow else {"OPENUM_UNIMPLEMENTED_OPTIONS": "warn"}
        proc = run("config", "check", *allow, str(cfg), env=env)
        assert proc.returncode == 0, proc.stderr
        assert f"{cfg}: OK" in proc.stdout
        warned = proc.stderr.strip().splitlines()
        assert [ln.split(": warning: ")[0] for ln in warned] == [f"{cfg}:1", f"{cfg}:2", f"{cfg}:3"]
        assert all("has no effect" in ln for ln in warned)


def test_a_command_refuses_an_unimplemented_option_before_it_starts() -> None:
    proc = run("send", "t", "--count", "1", "--linger", "0", "--option", "context use_tls 1")
    assert proc.returncode == 2
    assert "--option: context option use_tls is not implemented" in proc.stderr
    proc = run("send", "t", "--count", "1", "--linger", "0", "--option", "source transport broker")
    assert proc.returncode == 2
    assert (
        "transport broker is not implemented in this version of openum "
        "(implemented: tcp, lbtrm, lbtru, lbtipc, lbtsmx)" in proc.stderr
    )


def test_options_json_and_scope_filter() -> None:
    proc = run("config", "options", "--format", "json", "--scope", "event_queue")
    assert proc.returncode == 0
    rows = json.loads(proc.stdout)
    assert {r["scope"] for r in rows} == {"event_queue"}
    names = {r["option"] for r in rows}
    assert {"queue_size_warning", "queue_delay_warning", "queue_enqueue_notification"} <= names
    assert all(r["doc"] and r["type"] for r in rows)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("context resolver_multicst_port 12965", ["bad.cfg:2:", "did you mean resolver_multicast_port"]),
        ("receiver transport tcp", ["bad.cfg:2:", "scope source"]),
        ("context resolver_multicast_port 70000", ["bad.cfg:2:", "allowed: an integer from 0 to 65535"]),
        ("source transport pigeon", ["bad.cfg:2:", "allowed: one of: tcp, lbtrm"]),
    ],
    ids=["misspelt", "wrong-scope", "out-of-range", "bad-enum"],
)
def test_check_reports_file_line_and_allowed_values(tmp_path: Path, line: str, expected: list[str]) -> None:
    cfg = tmp_path / "bad.cfg"
    cfg.write_text(f"# comment\n{line}\ncontext operational_mode embedded\n")
    proc = run("config", "check", str(cfg))
    assert proc.returncode == 2
    first = proc.stderr.strip().splitlines()[0]
    assert first.startswith(f"{cfg.parent}/")
    for text in expected:
        assert text in proc.stderr
    # The same file refused by Context(...) with the same location.
    with pytest.raises(openum.ConfigError) as err:
        openum.Context(cfg)
    assert err.value.source == str(cfg) and err.value.line == 2


def test_check_reports_every_bad_line_and_accepts_good_files(tmp_path: Path) -> None:
    bad = tmp_path / "two.cfg"
    bad.write_text("context nope 1\nsource transport tcp\nreceiver ordered_delivery 7\n")
    good = tmp_path / "good.cfg"
    good.write_text("source transport lbt-rm\nreceiver ordered_delivery -1\n")
    proc = run("config", "check", str(bad), str(good))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert [ln.split(":")[1] for ln in lines] == ["1", "3"]
    assert f"{good}: OK" in proc.stdout
    assert run("config", "check", str(good)).returncode == 0


def test_check_xml_errors_and_ranges(tmp_path: Path) -> None:
    xml = tmp_path / "um.xml"
    xml.write_text(
        '<?xml version="1.0"?>\n<um-configuration version="1.0">\n<templates>\n'
        '<template name="t"><options type="context">\n'
        '<option name="transport_tcp_port_low" default-value="abc"/>\n'
        "</options></template></templates></um-configuration>\n"
    )
    proc = run("config", "check", str(xml))
    assert proc.returncode == 2
    assert f"{xml}:5:" in proc.stderr
    ranges = tmp_path / "ranges.cfg"
    ranges.write_text("context transport_tcp_port_low 14000\ncontext transport_tcp_port_high 13000\n")
    proc = run("config", "check", str(ranges))
    assert proc.returncode == 2
    assert f"{ranges}:2:" in proc.stderr and "greater than transport_tcp_port_high" in proc.stderr


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    proc = run("config", "check", str(tmp_path / "nope.cfg"))
    assert proc.returncode == 2
    assert "not found" in proc.stderr


def test_show_effective_configuration_with_files_and_options(tmp_path: Path) -> None:
    cfg = tmp_path / "app.cfg"
    cfg.write_text("source transport lbtru\n")
    proc = run("config", "show", "-c", str(cfg), "--option", "context resolver_multicast_port 13000")
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert "source transport lbtru" in lines
    assert "context resolver_multicast_port 13000" in lines
    assert "context default_interface 127.0.0.1" in lines
    changed = run("config", "show", "--changed", "-c", str(cfg)).stdout.splitlines()
    assert [ln for ln in changed if not ln.startswith("#")] == [f"source transport lbtru  # {cfg}:1"]


def test_show_reads_the_environment_file(tmp_path: Path) -> None:
    cfg = tmp_path / "env.cfg"
    cfg.write_text("context resolver_multicast_port 13001\n")
    proc = run("config", "show", "--scope", "context", env={"LBM_DEFAULT_CONFIG_FILE": str(cfg)})
    assert proc.returncode == 0
    assert "context resolver_multicast_port 13001" in proc.stdout.splitlines()


def test_bad_option_argument_exits_2() -> None:
    proc = run("config", "show", "--option", "context no_such_option 1")
    assert proc.returncode == 2
    assert "--option: unknown option 'no_such_option'" in proc.stderr


def test_configuration_reference_in_docs_is_up_to_date() -> None:
    from openum.cli._config_cmd import render_markdown

    doc = ROOT / "docs" / "configuration.md"
    assert doc.exists(), "docs/configuration.md is missing: run 'make docs'"
    assert doc.read_text() == render_markdown(), "docs/configuration.md is stale: run 'make docs'"
