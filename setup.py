"""Build of openum: the package metadata is in pyproject.toml; this file only adds the compiled hot paths.

The modules listed in ``src/openum/_accel.py`` (``COMPILED_MODULES``) are compiled to C extension modules
with mypyc, from their Python source, when mypyc and a C compiler are available.  They are optional: with
``OPENUM_PURE_PYTHON=1`` set, without mypyc, or when compiling fails (no C compiler, no Python headers),
openum installs as pure Python, says so, and runs the same code interpreted.
"""

from __future__ import annotations

import ast
import os
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
ENV_PURE = "OPENUM_PURE_PYTHON"


def _note(text: str) -> None:
    print(f"openum setup: {text}", file=sys.stderr)


def _compiled_modules() -> list[str]:
    """COMPILED_MODULES of src/openum/_accel.py, read without importing openum."""
    tree = ast.parse((HERE / "src" / "openum" / "_accel.py").read_text())
    for node in tree.body:
        if (
            isinstance(node, ast.AnnAssign)
            and getattr(node.target, "id", None) == "COMPILED_MODULES"
            and node.value is not None
        ):
            return list(ast.literal_eval(node.value))
    raise RuntimeError("src/openum/_accel.py defines no COMPILED_MODULES")


def _remove_stale_extensions() -> None:
    """Delete extension modules in the source tree that are no longer compiled (an in-place build).

    Python imports an extension module ahead of the .py beside it, so one left from an older
    COMPILED_MODULES would shadow its source, and openum._accel only looks at the listed modules."""
    keep = set(_compiled_modules())
    for path in (HERE / "src" / "openum").rglob("*.so"):
        relative = path.relative_to(HERE / "src").with_suffix("")
        module = ".".join(relative.parts).split(".cpython-")[0].split(".abi3")[0]
        if module not in keep:
            _note(f"removing {path.relative_to(HERE)}: {module} is no longer compiled")
            path.unlink()


class OptionalBuildExt(build_ext):
    """build_ext that falls back to pure Python when the compiled modules cannot be built."""

    def run(self) -> None:
        if self.inplace:
            _remove_stale_extensions()
        try:
            super().run()
        except Exception as exc:  # CompileError, LinkError, a missing compiler or header, ...
            _note(f"compiling the hot paths failed ({exc}); openum is installed as pure Python")
            self._remove_partial()

    def _remove_partial(self) -> None:
        # All or nothing: openum._accel refuses a partial set anyway, but a half-built tree would warn.
        for ext in self.extensions:
            path = Path(self.get_ext_fullpath(ext.name))
            if path.exists():
                path.unlink()


def _ext_modules() -> list[object]:
    if os.environ.get(ENV_PURE, "") not in ("", "0"):
        _note(f"{ENV_PURE} is set: pure Python, nothing compiled")
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        _note("mypyc is not available: pure Python, nothing compiled")
        return []
    paths = ["src/" + module.replace(".", "/") + ".py" for module in _compiled_modules()]
    try:
        return list(mypycify(paths, opt_level="3", group_name="openum"))
    except (Exception, SystemExit) as exc:  # mypyc reports type errors by exiting
        _note(f"mypyc could not compile the hot paths ({exc}); pure Python")
        return []


setup(ext_modules=_ext_modules(), cmdclass={"build_ext": OptionalBuildExt})
