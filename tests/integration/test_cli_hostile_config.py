"""``openum lbmrd -v`` and ``openum config check`` as real processes on hostile configuration files.

A billion-laughs file, an empty file, an unknown version and a 20 MB value each end the process with
exit status 2 and a short message naming the file and line.  Before the XML reader was hardened the
billion-laughs file ran for minutes, the empty file and ``version="99"`` passed as OK and the message
echoed the 20 MB value.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

LBMRD_OK = """<?xml version="1.0"?>
{doctype}<lbmrd version="{version}">
  <daemon><log>{log}</log></daemon>
  <domains><domain name="d"><network>10.0.0.0/8</network></domain></domains>
  <transformations><transform source="d" destination="d"><rule>
    <match address="{address}"/><replace address="10.0.0.1"/>
  </rule></transform></transformations>
</lbmrd>
"""

UM_OK = """<?xml version="1.0"?>
{doctype}<um-configuration version="{version}">
  <templates><template name="t"><options type="context">
    <option name="context_name" default-value="{value}"><allow>{text}</allow></option>
  </options></template></templates>
</um-configuration>
"""

#: generous: a refusal takes well under a second of the child's CPU; the billion-laughs file took minutes
CPU_BOUND_S = 10.0


def laughs(root: str) -> str:
    entities = ['<!ENTITY lol0 "lol">']
    entities += [f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">' for i in range(1, 10)]
    return f"<!DOCTYPE {root} [\n" + "\n".join(entities) + "\n]>\n"


def run(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run ``openum ARGS``; the result and the CPU time the child used (user + system)."""
    env = dict(os.environ)
    for var in ("LBM_DEFAULT_CONFIG_FILE", "OPENUM_CONFIG_FILE", "LBM_XML_CONFIG_FILENAME"):
        env.pop(var, None)
    before = os.times()
    proc = subprocess.run(
        [sys.executable, "-m", "openum", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return proc, cpu


def lbmrd_file(tmp_path: Path, **fields: str) -> Path:
    values = {"doctype": "", "version": "1.0", "log": "x.log", "address": "10.0.0.1", **fields}
    path = tmp_path / "lbmrd.xml"
    path.write_text(LBMRD_OK.format(**values))
    return path


def um_file(tmp_path: Path, **fields: str) -> Path:
    values = {"doctype": "", "version": "1.0", "value": "x", "text": "x", **fields}
    path = tmp_path / "um.xml"
    path.write_text(UM_OK.format(**values))
    return path


def test_the_ordinary_files_pass(tmp_path: Path) -> None:
    proc, _ = run("lbmrd", "-v", str(lbmrd_file(tmp_path)))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"{tmp_path / 'lbmrd.xml'}: OK")
    proc, _ = run("config", "check", str(um_file(tmp_path)))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"{tmp_path / 'um.xml'}: OK"


@pytest.mark.timeout(150)
def test_billion_laughs_is_refused_at_once(tmp_path: Path) -> None:
    lbmrd_path = lbmrd_file(tmp_path, doctype=laughs("lbmrd"), log="&lol9;")
    um_path = um_file(tmp_path, doctype=laughs("um-configuration"), text="&lol9;")
    for args, path in ((("lbmrd", "-v"), lbmrd_path), (("config", "check"), um_path)):
        proc, cpu = run(*args, str(path))
        assert proc.returncode == 2, proc.stderr
        assert cpu < CPU_BOUND_S
        first = proc.stderr.splitlines()[0]
        assert first.startswith(f"{path}:2: a <!DOCTYPE> with declarations ([ ... ]) is not allowed"), first
        assert "OK" not in proc.stdout


@pytest.mark.parametrize("content", ["", "\n\n", '<?xml version="1.0"?>\n<!-- only a comment -->\n'])
def test_an_empty_file_fails_naming_the_file(tmp_path: Path, content: str) -> None:
    path = tmp_path / "empty.xml"
    path.write_text(content)
    for args in (("lbmrd", "-v"), ("config", "check")):
        proc, _ = run(*args, str(path))
        assert proc.returncode == 2, (args, proc.stdout)
        assert proc.stderr.startswith(f"{path}:"), proc.stderr
        reason = proc.stderr.splitlines()[0].removeprefix(f"{path}:")
        assert "the configuration file is empty" in reason or "the file has no root element" in reason
        assert "OK" not in proc.stdout


def test_an_unknown_version_fails_naming_the_allowed_one(tmp_path: Path) -> None:
    proc, _ = run("config", "check", str(um_file(tmp_path, version="99")))
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"{tmp_path / 'um.xml'}:2: <um-configuration> version '99' is not supported; allowed: version=\"1.0\""
    ]
    proc, _ = run("lbmrd", "-v", str(lbmrd_file(tmp_path, version="99")))
    assert proc.returncode == 2
    assert f"{tmp_path / 'lbmrd.xml'}:2: version '99' is not supported; allowed: \"1.0\"" in proc.stderr


def test_a_20_mb_value_is_not_echoed(tmp_path: Path) -> None:
    big = 20_000_000
    flat = tmp_path / "big.cfg"
    flat.write_text("context context_name " + "a " * (big // 2) + "\n")
    cases = [
        (("lbmrd", "-v"), lbmrd_file(tmp_path, address="1" * big), "<match> address '111"),
        (("config", "check"), um_file(tmp_path, value="b" * big), "context option context_name"),
        (("config", "check"), flat, "context option context_name"),
    ]
    for args, path, names in cases:
        proc, _ = run(*args, str(path))
        assert proc.returncode == 2
        assert len(proc.stderr) < 500, proc.stderr[:600]
        assert proc.stderr.startswith(f"{path}:"), proc.stderr
        assert names in proc.stderr
        assert "bytes)" in proc.stderr and ("(20000000 bytes)" in proc.stderr or "(19999999" in proc.stderr)
