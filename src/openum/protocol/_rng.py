"""The randomness protocol state machines take as an argument (PRACTICES.md 4).

``random.Random`` satisfies it; tests pass a seeded one so that NAK backoffs and daemon rotation are
reproducible.  The protocol layer never imports ``random`` itself.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["Rng"]


class Rng(Protocol):
    def random(self) -> float: ...

    def uniform(self, a: float, b: float) -> float: ...

    def randrange(self, start: int, stop: int = ..., step: int = ...) -> int: ...
