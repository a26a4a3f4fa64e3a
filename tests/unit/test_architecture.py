"""Architecture rules that keep openum easy to change (ARCHITECTURE.md 2).

- ``wire`` and ``protocol`` never import socket, select, threading, time or random (sans-I/O);
- each layer imports only the layers below it;
- the core library never imports pyspark;
- the public API is ``openum.__all__``, and every name in it exists.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import openum

SRC = Path(openum.__file__).resolve().parent

# Lowest first. A module may import its own layer and any layer listed before it.
LAYERS = [
    "config",
    "wire",
    "protocol",
    "runtime",
    "transport",
    "monitor",
    "api",
    "daemons",
    "demo",
    "cli",
    "spark",
]
# Leaf modules every layer may use (they import nothing of openum): errors, the version, and the choice
# between compiled and pure-Python hot paths (with its stand-in for mypy_extensions.mypyc_attr).
ALWAYS_ALLOWED = {"openum._accel", "openum._errors", "openum._version"}
SANS_IO_FORBIDDEN = {"socket", "select", "selectors", "threading", "time", "random", "asyncio", "subprocess"}


def _layer_of(module: str) -> str:
    parts = module.split(".")
    if module == "openum.__main__":
        return "cli"
    if len(parts) > 1 and parts[1] in LAYERS:
        return parts[1]
    return "api"  # openum/__init__.py, openum/_context.py and other top-level private modules


def _modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out.append((".".join(parts), path))
    return out


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


MODULES = _modules()


@pytest.mark.parametrize(
    ("module", "path"),
    [m for m in MODULES if _layer_of(m[0]) in ("wire", "protocol")],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_sans_io_layers_import_no_io_threads_clocks_or_randomness(module: str, path: Path) -> None:
    bad = [name for name in _imports(path) if name.split(".")[0] in SANS_IO_FORBIDDEN]
    assert not bad, f"{module} imports {bad}: wire and protocol take time and randomness as arguments"


@pytest.mark.parametrize(("module", "path"), MODULES, ids=lambda v: v if isinstance(v, str) else "")
def test_layers_import_only_layers_below(module: str, path: Path) -> None:
    own = LAYERS.index(_layer_of(module))
    for name in _imports(path):
        if not name.startswith("openum") or name in ALWAYS_ALLOWED:
            continue
        target = _layer_of(name)
        assert LAYERS.index(target) <= own, (
            f"{module} ({LAYERS[own]}) imports {name} ({target}), a higher layer"
        )


@pytest.mark.parametrize(
    ("module", "path"),
    [m for m in MODULES if _layer_of(m[0]) != "spark"],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_core_never_imports_pyspark(module: str, path: Path) -> None:
    assert not any(n.split(".")[0] == "pyspark" for n in _imports(path)), module


def test_public_api_is_curated() -> None:
    assert sorted(set(openum.__all__)) == sorted(openum.__all__), "duplicates in __all__"
    for name in openum.__all__:
        assert hasattr(openum, name), name
    public = {n for n in dir(openum) if not n.startswith("_")}
    # Subpackages are importable but not part of the curated surface.
    extra = (
        public
        - set(openum.__all__)
        - {"config", "runtime", "wire", "cli", "protocol", "transport", "daemons", "testing", "demo", "spark"}
    )
    assert not extra, f"names exported by accident: {sorted(extra)}"
