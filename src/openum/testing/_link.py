"""Link models of the simulated network: random impairments and explicit drop patterns.

A *link* is a set of (source, destination) paths: every path (the global link), every path to one
destination, every path from one source, or one (source, destination) pair.  A datagram crossing a
path is counted by every link that contains the path and dropped by any of their drop rules; its
random fate comes from the most specific link that has a :class:`LinkModel`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from openum.testing._node import Address

__all__ = ["Link", "LinkModel"]


def _probability(name: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"LinkModel.{name} must be a probability in [0, 1], got {value!r}")


def _duration(name: str, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"LinkModel.{name} must be an int >= 0 (nanoseconds), got {value!r}")


@dataclass(frozen=True, slots=True)
class LinkModel:
    """Random impairments of a path, drawn per datagram from the network's seeded randomness.

    - ``loss``: probability that a datagram is lost, independently of the others.
    - ``burst_loss``: ``(p_enter, p_stay)``, a Gilbert-Elliott channel.  Each datagram first moves the
      path's state: from *good* to *bad* with probability ``p_enter``, and stays *bad* with
      probability ``p_stay``; every datagram sent in the bad state is lost.  Mean burst length is
      ``1 / (1 - p_stay)``; the long-run loss rate is ``p_enter / (p_enter + 1 - p_stay)``.  The state
      is kept per (source, destination) pair.  It combines with ``loss``.
    - ``duplicate``: probability that a delivered datagram arrives twice (each copy has its own delay).
    - ``reorder``: probability that a datagram is held back by an extra delay drawn uniformly from
      ``1..reorder_ns``, so datagrams sent after it can overtake it.
    - ``delay_ns``: fixed one-way latency; ``jitter_ns``: plus a uniform ``0..jitter_ns``.
    """

    loss: float = 0.0
    burst_loss: tuple[float, float] | None = None
    duplicate: float = 0.0
    reorder: float = 0.0
    reorder_ns: int = 1_000_000
    delay_ns: int = 0
    jitter_ns: int = 0

    def __post_init__(self) -> None:
        _probability("loss", self.loss)
        _probability("duplicate", self.duplicate)
        _probability("reorder", self.reorder)
        if self.burst_loss is not None:
            if len(self.burst_loss) != 2:
                raise ValueError(f"LinkModel.burst_loss must be (p_enter, p_stay), got {self.burst_loss!r}")
            _probability("burst_loss[0] (p_enter)", self.burst_loss[0])
            _probability("burst_loss[1] (p_stay)", self.burst_loss[1])
        _duration("delay_ns", self.delay_ns)
        _duration("jitter_ns", self.jitter_ns)
        _duration("reorder_ns", self.reorder_ns)
        if self.reorder and self.reorder_ns < 1:
            raise ValueError("LinkModel.reorder_ns must be >= 1 when reorder > 0")

    @property
    def random(self) -> bool:
        """Whether the model draws random numbers at all (a fixed-delay link does not)."""
        return bool(self.loss or self.burst_loss or self.duplicate or self.reorder or self.jitter_ns)


#: The model of a link nobody configured: lossless and instantaneous.
PERFECT = LinkModel()


class Link:
    """The paths from ``src`` (None: any) to ``dst`` (None: any), with their model and drop rules.

    Get one with :meth:`SimNetwork.link`.  :attr:`count` is the number of datagrams that crossed it;
    drop rules count from 0 (the first datagram on the link is index 0).  Rules apply to every
    receiver the link contains: for "the third datagram node B receives" use ``link(dst=B)``.
    """

    __slots__ = ("_rules", "count", "dst", "model", "src")

    def __init__(self, src: Address | None, dst: Address | None, model: LinkModel | None = None) -> None:
        self.src = src
        self.dst = dst
        #: The model of this link; None: inherit from a less specific link.
        self.model = model
        self.count = 0
        self._rules: list[_Rule] = []

    def drop(self, predicate: Callable[[bytes], bool], *, times: int | None = None) -> Link:
        """Drop every datagram whose data satisfies ``predicate`` (at most ``times`` of them).

        Example: ``link.drop(lambda d: lbtrm.decode(d).sqn == 5, times=1)`` drops the first copy of
        LBT-RM sequence number 5 and lets its retransmission through.
        """
        if times is not None and times < 0:
            raise ValueError("times must be >= 0")
        self._rules.append(_Rule(predicate, None, times))
        return self

    def drop_sequence(self, indexes: Iterable[int]) -> Link:
        """Drop the datagrams at these positions on this link (0 is the first datagram)."""
        wanted = frozenset(indexes)
        if any(i < 0 for i in wanted):
            raise ValueError("drop_sequence indexes count from 0")
        self._rules.append(_Rule(None, wanted, None))
        return self

    def clear_drops(self) -> Link:
        """Remove every drop rule."""
        self._rules.clear()
        return self

    def _drops(self, index: int, data: bytes) -> bool:
        return any(rule.matches(index, data) for rule in self._rules)

    def __repr__(self) -> str:
        return f"Link(src={self.src!r}, dst={self.dst!r}, model={self.model!r}, count={self.count})"


class _Rule:
    __slots__ = ("indexes", "left", "predicate")

    def __init__(
        self, predicate: Callable[[bytes], bool] | None, indexes: frozenset[int] | None, left: int | None
    ) -> None:
        self.predicate = predicate
        self.indexes = indexes
        self.left = left

    def matches(self, index: int, data: bytes) -> bool:
        if self.left == 0:
            return False
        if self.indexes is not None:
            hit = index in self.indexes
        else:
            assert self.predicate is not None
            hit = bool(self.predicate(data))
        if hit and self.left is not None:
            self.left -= 1
        return hit
