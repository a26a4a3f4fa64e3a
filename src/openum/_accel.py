"""Compiled hot paths and the pure-Python fallback (PRACTICES 14: pure Python first, accelerators
behind an interface).

The modules in :data:`COMPILED_MODULES` (the send and receive paths: sources, transport sessions, the
reliability engines and their DATA headers, demultiplexing, delivery control, the event loop) are
plain, typed Python.  When openum is installed, ``setup.py`` also compiles them to C extension modules
with mypyc, from the same source: the compiled modules behave as the Python ones do and run their code
about twice as fast.

Which one runs is decided once, when :mod:`openum` is imported, for all of them together (compiled
classes and interpreted ones do not mix):

* the compiled modules, when every one of them is present and none is older than its source;
* the pure-Python modules when ``OPENUM_PURE_PYTHON=1`` is set, when nothing was compiled (no C
  compiler when openum was installed, or ``OPENUM_PURE_PYTHON=1`` at install time), or, with a
  :class:`RuntimeWarning`, when some are missing or older than their source (an edited checkout whose
  extension modules were not rebuilt: ``make``, or ``pip install -e .``, rebuilds them).

:data:`COMPILED` tells which, and :data:`REASON` why; ``openum bench`` reports both.  The test suite runs
on both (``make test``).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import TypeVar

__all__ = ["COMPILED", "COMPILED_MODULES", "ENV_PURE", "REASON", "mypyc_attr"]


#: Set to ``1`` to run the pure-Python modules although compiled ones are installed (or, at install
#: time, not to compile them).
ENV_PURE = "OPENUM_PURE_PYTHON"

#: The modules ``setup.py`` compiles with mypyc (one group: their classes call each other natively).
#: A class of these modules may only be subclassed by another class of them, unless it is marked
#: ``@mypyc_attr(allow_interpreted_subclasses=True)`` (``transport._demux.TopicHandler``).
COMPILED_MODULES: tuple[str, ...] = (
    "openum._message",
    "openum._receiver",
    "openum._source",
    "openum._subscription",
    "openum.protocol.delivery",
    "openum.protocol.reliable._common",
    "openum.protocol.reliable._nak",
    "openum.protocol.reliable._ratelimit",
    "openum.protocol.reliable._receiver",
    "openum.protocol.reliable._repair",
    "openum.protocol.reliable._source",
    "openum.protocol.reliable._stats",
    "openum.protocol.reliable._window",
    "openum.protocol.reliable.lbtrm",
    "openum.protocol.reliable.lbtru",
    "openum.runtime._loop",
    "openum.runtime._timers",
    "openum.transport._demux",
    "openum.transport._engine_timer",
    "openum.transport._reliable",
    "openum.transport._source_session",
    "openum.transport.ipc",
    "openum.transport.lbtrm",
    "openum.transport.lbtru",
    "openum.transport.shm",
    "openum.transport.tcp",
    "openum.transport.tcp_receiver",
    "openum.wire._datapath",
)

#: setup.py's mypyc group: its shared library, ``openum__mypyc``, holds the compiled code.
_GROUP_LIBRARY = "openum__mypyc"

# Where an older extension module than its source is still taken for current: a wheel's files are all
# written at install time, in no particular order.
_MTIME_SLACK_S = 2.0

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _source_path(module: str, package_dir: str = _PACKAGE_DIR) -> str:
    return os.path.join(package_dir, *module.split(".")[1:]) + ".py"


def _extension_path(module: str, package_dir: str) -> str | None:
    """The extension file of ``module`` (``package.sub.name``, or a top-level name when ``package_dir``
    is the directory holding the package), or None."""
    base = (
        os.path.join(package_dir, *module.split(".")[1:])
        if "." in module
        else os.path.join(package_dir, module)
    )
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        if os.path.exists(base + suffix):
            return base + suffix
    return None


def _check(
    modules: Sequence[str], package_dir: str = _PACKAGE_DIR, environ: Mapping[str, str] = os.environ
) -> tuple[bool, str]:
    """Whether the compiled ``modules`` (of the package in ``package_dir``) can be used, and why (not);
    warns when some of them are there but cannot be."""
    if environ.get(ENV_PURE, "") not in ("", "0"):
        return False, f"pure Python ({ENV_PURE}={environ[ENV_PURE]})"
    missing: list[str] = []
    stale: list[str] = []
    # mypyc puts the compiled code of the whole group in one library beside the package (the modules'
    # own extension files only load it, and a rebuild leaves those alone when they did not change).
    group_lib = _extension_path(_GROUP_LIBRARY, os.path.dirname(package_dir))
    group_mtime = os.stat(group_lib).st_mtime if group_lib is not None else 0.0
    if group_lib is None:
        missing.append(_GROUP_LIBRARY)
    for module in modules:
        ext = _extension_path(module, package_dir)
        if ext is None:
            missing.append(module)
            continue
        try:
            built = max(os.stat(ext).st_mtime, group_mtime)
            if os.stat(_source_path(module, package_dir)).st_mtime > built + _MTIME_SLACK_S:
                stale.append(module)
        except OSError:  # no source next to it: an installation of compiled modules only
            continue
    if len(missing) == len(modules) + 1:  # every module and the group library
        return False, "pure Python (openum was installed without compiling its hot paths)"
    if missing or stale:
        problem = (
            f"{len(stale)} compiled module(s) older than their source ({', '.join(stale[:3])}...)"
            if stale
            else f"{len(missing)} compiled module(s) missing ({', '.join(missing[:3])}...)"
        )
        warnings.warn(
            f"openum: {problem}; running the pure-Python modules instead. Rebuild the compiled ones with "
            f"`make` (or `pip install -e .`), or set {ENV_PURE}=1 to silence this.",
            RuntimeWarning,
            stacklevel=3,
        )
        return False, f"pure Python ({problem})"
    return True, f"compiled with mypyc ({len(modules)} modules)"


_T = TypeVar("_T")


def mypyc_attr(*attrs: str, **kwattrs: object) -> Callable[[_T], _T]:
    """``mypy_extensions.mypyc_attr`` where mypy is not installed (it only speaks to the compiler).

    A class of a compiled module that Python code may subclass (a test's fake, say) is marked
    ``@mypyc_attr(allow_interpreted_subclasses=True)``."""
    return lambda cls: cls


class _SourceFinder(importlib.abc.MetaPathFinder):
    """Imports the pure-Python source of the modules that also exist compiled."""

    def __init__(self, modules: Sequence[str]) -> None:
        self._modules = frozenset(modules)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self._modules:
            return None
        return importlib.util.spec_from_file_location(fullname, _source_path(fullname))


def _select() -> tuple[bool, str]:
    compiled, reason = _check(COMPILED_MODULES)
    if not compiled and not any(isinstance(f, _SourceFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _SourceFinder(COMPILED_MODULES))
    return compiled, reason


#: True when the compiled modules run; :data:`REASON` says why or why not.
COMPILED, REASON = _select()
