"""The choice between the compiled hot paths and the pure-Python ones (openum._accel, PRACTICES 14)."""

from __future__ import annotations

import importlib.machinery
import os
import subprocess
import sys
from pathlib import Path

import pytest

import openum
from openum import _accel

MODULES = ("pkg.alpha", "pkg.sub.beta")
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


def _tree(
    tmp_path: Path, *, compiled: tuple[str, ...] = MODULES, source_age: float = 0.0, library: bool = True
) -> Path:
    """A package directory with the sources of MODULES and extension files for ``compiled`` (and, when
    any and ``library``, mypyc's group library beside the package); the sources are ``source_age``
    seconds newer than the extension files."""
    root = tmp_path / "pkg"
    for module in MODULES:
        base = root.joinpath(*module.split(".")[1:])
        base.parent.mkdir(parents=True, exist_ok=True)
        source = base.with_suffix(".py")
        source.write_text("")
        os.utime(source, (1_000_000 + source_age, 1_000_000 + source_age))
        if module in compiled:
            ext = Path(str(base) + SUFFIX)
            ext.write_bytes(b"")
            os.utime(ext, (1_000_000, 1_000_000))
    if compiled and library:
        group = tmp_path / (_accel._GROUP_LIBRARY + SUFFIX)
        group.write_bytes(b"")
        os.utime(group, (1_000_000, 1_000_000))
    return root


def test_every_module_compiled_and_current_runs_compiled(tmp_path: Path) -> None:
    compiled, reason = _accel._check(MODULES, str(_tree(tmp_path)), {})
    assert compiled
    assert reason == "compiled with mypyc (2 modules)"


def test_the_environment_variable_chooses_pure_python(tmp_path: Path) -> None:
    root = str(_tree(tmp_path))
    assert _accel._check(MODULES, root, {_accel.ENV_PURE: "1"}) == (
        False,
        "pure Python (OPENUM_PURE_PYTHON=1)",
    )
    assert _accel._check(MODULES, root, {_accel.ENV_PURE: "0"})[0]


def test_nothing_compiled_is_pure_python_without_a_warning(
    tmp_path: Path, recwarn: pytest.WarningsRecorder
) -> None:
    compiled, reason = _accel._check(MODULES, str(_tree(tmp_path, compiled=())), {})
    assert not compiled
    assert "installed without compiling" in reason
    assert len(recwarn) == 0


def test_a_missing_compiled_module_means_pure_python_for_all_with_a_warning(tmp_path: Path) -> None:
    with pytest.warns(RuntimeWarning, match=r"1 compiled module\(s\) missing \(pkg.sub.beta"):
        compiled, reason = _accel._check(MODULES, str(_tree(tmp_path, compiled=("pkg.alpha",))), {})
    assert not compiled
    assert "missing" in reason


def test_a_missing_group_library_means_pure_python_with_a_warning(tmp_path: Path) -> None:
    """The modules' extension files only load the group library, which holds the compiled code."""
    with pytest.warns(RuntimeWarning, match=r"1 compiled module\(s\) missing \(openum__mypyc"):
        compiled, _ = _accel._check(MODULES, str(_tree(tmp_path, library=False)), {})
    assert not compiled


def test_a_source_newer_than_its_compiled_module_means_pure_python_with_a_warning(tmp_path: Path) -> None:
    with pytest.warns(RuntimeWarning, match=r"2 compiled module\(s\) older than their source.*make"):
        compiled, _ = _accel._check(MODULES, str(_tree(tmp_path, source_age=60.0)), {})
    assert not compiled
    # Within the slack (a wheel's files written in any order at install time) it still counts as current.
    assert _accel._check(MODULES, str(_tree(tmp_path / "slack", source_age=1.0)), {})[0]


def test_a_rebuilt_group_library_makes_unchanged_module_files_current(tmp_path: Path) -> None:
    """mypyc compiles the code of every module into one library beside the package; a rebuild after a
    source change rewrites it but leaves the modules' own (loader) extension files alone."""
    root = _tree(tmp_path, source_age=60.0)
    os.utime(tmp_path / (_accel._GROUP_LIBRARY + SUFFIX), (1_000_060, 1_000_060))
    assert _accel._check(MODULES, str(root), {})[0]


def test_the_modules_that_run_are_the_ones_openum_says() -> None:
    suffix = ".py" if not openum.COMPILED else SUFFIX
    for module in _accel.COMPILED_MODULES:
        __import__(module)
        assert sys.modules[module].__file__.endswith(suffix), (module, sys.modules[module].__file__)


def test_the_choice_follows_the_environment_in_a_new_process() -> None:
    """OPENUM_PURE_PYTHON=1 runs the sources even where compiled modules are installed."""
    code = "import openum, openum.transport.tcp as t; print(openum.COMPILED, t.__file__.endswith('.py'))"
    env = {**os.environ, _accel.ENV_PURE: "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]


def test_every_compiled_module_exists_as_source() -> None:
    for module in _accel.COMPILED_MODULES:
        assert Path(_accel._source_path(module)).is_file(), module


def test_the_stand_in_for_mypyc_attr_leaves_a_class_as_it_is() -> None:
    class Handler:
        pass

    assert _accel.mypyc_attr(allow_interpreted_subclasses=True)(Handler) is Handler
