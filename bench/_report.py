"""What the single-layer micro-benchmarks of bench/ print: a line of machine facts and one line per
result, or one JSON object with both (``--json``).  Run as scripts (``python bench/NAME.py``), they
import this module from their own folder."""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Callable
from typing import Any

__all__ = ["machine_facts", "report"]


def machine_facts(**extra: Any) -> dict[str, Any]:
    """Python, implementation, machine and CPU count, then ``extra`` (a benchmark's own settings)."""
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        **extra,
    }


def report(
    results: dict[str, float],
    facts: dict[str, Any],
    as_json: bool,
    key: str,
    line: Callable[[str, float], str],
) -> None:
    """Print ``results`` under ``key`` with ``facts`` as one JSON object, or the facts and ``line(name,
    value)`` per result."""
    if as_json:
        print(json.dumps({key: results, **facts}, sort_keys=True))
        return
    print(" ".join(f"{k}={v}" for k, v in facts.items()))
    for name, value in results.items():
        print(line(name, value))
