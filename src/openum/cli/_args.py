"""Argument types shared by the ``openum`` subcommands (argparse ``type=`` callables).

argparse reports a ``ValueError`` from these as ``invalid <name> value``, and an
``ArgumentTypeError`` with its own text, so each names what was wrong and what is allowed.
"""

from __future__ import annotations

import argparse

__all__ = ["counter_size", "non_negative", "positive"]


def positive(text: str) -> int:
    """An integer of at least 1 (counts, repeats)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def non_negative(text: str) -> int:
    """An integer of at least 0."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, not {value}")
    return value


def counter_size(text: str) -> int:
    """A payload size that holds the 8-byte counter the test tools put first."""
    value = int(text)
    if value < 8:
        raise argparse.ArgumentTypeError(f"--size must be at least 8 bytes (the counter), not {value}")
    return value
