"""setup.py: an in-place build removes the extension modules of modules that are no longer compiled.

Python imports an extension module ahead of the .py beside it, so one left from an older
COMPILED_MODULES would run instead of its source (and openum._accel only looks at the listed modules).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SUFFIX = sysconfig.get_config_var("EXT_SUFFIX") or ".so"


def test_in_place_build_removes_extensions_of_modules_no_longer_compiled(tmp_path: Path) -> None:
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    package = tmp_path / "src" / "openum"
    (package / "wire").mkdir(parents=True)
    shutil.copy(ROOT / "src" / "openum" / "_accel.py", package / "_accel.py")
    for module in ("__init__", "_message", "wire/__init__", "wire/lbtru"):
        (package / f"{module}.py").write_text("")
    listed = package / f"_message{SUFFIX}"  # in COMPILED_MODULES: kept
    stale = package / "wire" / f"lbtru{SUFFIX}"  # not in COMPILED_MODULES: removed
    for path in (listed, stale):
        path.write_bytes(b"not a real extension")
    env = {**os.environ, "OPENUM_PURE_PYTHON": "1"}  # nothing to compile: only the clean-up runs
    done = subprocess.run(
        [sys.executable, "setup.py", "build_ext", "--inplace"],
        check=False,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert listed.exists()
    assert not stale.exists()
    assert "openum.wire.lbtru is no longer compiled" in done.stderr
