"""A static check that options marked implemented are read by openum's code (issue 22's registry test).

An option is *read* where its name appears as a string constant in a module outside ``openum.config``
(``attrs.get("transport_tcp_port_low")``, ``source("transport_lbtrm_ignore_interval")``, a tuple of
session option names, ``PORT_OPTION = "transport_tcp_port"``).  Docstrings and the literal parts of
f-strings do not count: they mention an option, they do not read it.  Names built at run time
(``prefix + "rate_interval"``) are invisible here, so the code spells every option name out.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

from openum.config import Registry

__all__ = ["option_reads", "unread_implemented"]


def _mentions_only(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings or parts of f-strings."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                skip.add(id(body[0].value))
        elif isinstance(node, ast.JoinedStr):
            skip.update(id(part) for part in node.values)
    return skip


def option_reads(files: Iterable[Path], names: set[str]) -> dict[str, list[str]]:
    """``{option name: ["path:line", ...]}`` for every name of ``names`` read in ``files``."""
    found: dict[str, list[str]] = {}
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        skip = _mentions_only(tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and node.value in names
                and id(node) not in skip
            ):
                found.setdefault(node.value, []).append(f"{path}:{node.lineno}")
    return found


def source_files(package_dir: Path) -> list[Path]:
    """The modules of the ``openum`` package at ``package_dir``, without ``openum.config``."""
    config = package_dir / "config"
    return sorted(p for p in package_dir.rglob("*.py") if config not in p.parents)


def unread_implemented(registry: Registry, files: Iterable[Path]) -> list[tuple[str, str]]:
    """``(scope, option)`` pairs marked implemented (fully or partly) that no module reads."""
    marked = [
        (scope, opt.name)
        for scope, opt in registry.pairs()
        if not opt.alias_of and registry.support(scope, opt.name).implemented
    ]
    reads = option_reads(files, {name for _, name in marked})
    return [(scope, name) for scope, name in marked if name not in reads]
