"""What the simulated network drives: nodes, their outputs, and the adapter for real engines.

A node is anything with the sans-I/O shape of PRACTICES.md 1: it takes a datagram plus ``now_ns`` and
returns what to send, says when it next needs time (``next_deadline``) and is polled at that time.
openum's engines return richer results (events, deliveries); :class:`EngineNode` splits those into
datagrams to send and everything else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

__all__ = [
    "Adapter",
    "Address",
    "Datagram",
    "Engine",
    "EngineNode",
    "Mailbox",
    "Out",
    "Received",
    "SimNode",
]

#: An endpoint on the simulated host network: ``(ip, port)``.  A multicast group is an address whose
#: IP is in 224.0.0.0/4.
Address = tuple[str, int]


class Out(Protocol):
    """A datagram a node wants sent: ``destination`` None means the node's default group."""

    @property
    def data(self) -> bytes: ...

    @property
    def destination(self) -> Address | None: ...


@dataclass(frozen=True, slots=True)
class Datagram:
    """The plain :class:`Out`: ``data`` to ``destination`` (None: the node's default group)."""

    data: bytes
    destination: Address | None = None


@dataclass(frozen=True, slots=True)
class Received:
    """One datagram a :class:`Mailbox` received."""

    time_ns: int
    src: Address
    data: bytes


class SimNode(Protocol):
    """The interface :class:`~openum.testing.SimNetwork` drives.

    It is a protocol (any object with these three methods will do) and also a base class: subclass
    it and override only what you need; the defaults receive nothing, send nothing and never need
    the clock.  Every method returns the datagrams to send *now* (an iterable of :class:`Out`).
    """

    def datagram_received(self, data: bytes, src: Address, now_ns: int) -> Iterable[Out]:
        """``data`` arrived from ``src`` at ``now_ns``."""
        return ()

    def poll(self, now_ns: int) -> Iterable[Out]:
        """The node's deadline has come (``now_ns >= next_deadline()``)."""
        return ()

    def next_deadline(self) -> int | None:
        """When to call :meth:`poll` next, in the network clock's nanoseconds; None: never."""
        return None


class Engine(Protocol):
    """The shape of an openum sans-I/O engine (the resolver, LBT-RM/RU sessions, ...).

    Results are anything :class:`EngineNode`'s adapter understands.
    """

    def datagram_received(self, data: bytes, src: Any, now_ns: int, /) -> Any: ...

    def poll(self, now_ns: int, /) -> Any: ...

    def next_deadline(self) -> int | None: ...


#: Turns an engine's result (of ``datagram_received``, ``poll`` or :meth:`SimNetwork.emit`) into the
#: datagrams to send.
Adapter = Callable[[Any], Iterable[Out]]

E = TypeVar("E", bound=Engine)


def _is_out(item: object) -> bool:
    return hasattr(item, "data") and hasattr(item, "destination")


class EngineNode(SimNode, Generic[E]):
    """A :class:`SimNode` wrapping a sans-I/O engine.

    With no ``adapter``, :meth:`split` sorts each result: objects with ``.data`` and
    ``.destination`` are sent; lists and tuples (such as an ``(outgoing, delivered, events)`` result)
    are searched recursively; ``None`` is nothing; every other object (``bytes`` too: they are more
    likely a delivered payload than a datagram) is handed to :meth:`on_event`, which appends
    ``(now_ns, item)`` to :attr:`events`.

    With an ``adapter``, the adapter alone decides what is sent; it sees the raw result.

    Subclass it when an engine's methods have other names or signatures: override
    :meth:`datagram_received` / :meth:`poll` / :meth:`next_deadline` and return ``self.adapt(...)``.
    """

    def __init__(self, engine: E, adapter: Adapter | None = None) -> None:
        self.engine = engine
        self.events: list[tuple[int, object]] = []
        self._adapter = adapter
        self._now_ns = 0

    def adapt(self, result: Any, now_ns: int) -> list[Out]:
        """The datagrams to send from one engine result."""
        self._now_ns = now_ns
        if self._adapter is not None:
            return list(self._adapter(result))
        out: list[Out] = []
        self.split(result, out)
        return out

    def split(self, result: Any, out: list[Out]) -> None:
        """The default adapter: sort ``result`` into ``out`` (sent) and :meth:`on_event` (the rest)."""
        if result is None:
            return
        if _is_out(result):
            out.append(result)
        elif isinstance(result, list | tuple):
            for item in result:
                self.split(item, out)
        else:
            self.on_event(result, self._now_ns)

    def on_event(self, item: object, now_ns: int) -> None:
        """Something the engine returned that is not a datagram (an event, a delivered message)."""
        self.events.append((now_ns, item))

    def datagram_received(self, data: bytes, src: Address, now_ns: int) -> Iterable[Out]:
        return self.adapt(self.engine.datagram_received(data, src, now_ns), now_ns)

    def poll(self, now_ns: int) -> Iterable[Out]:
        return self.adapt(self.engine.poll(now_ns), now_ns)

    def next_deadline(self) -> int | None:
        return self.engine.next_deadline()

    def __repr__(self) -> str:
        return f"EngineNode({self.engine!r})"


class Mailbox(SimNode):
    """A node that only records what it receives (in :attr:`received`); it never sends."""

    def __init__(self) -> None:
        self.received: list[Received] = []

    def datagram_received(self, data: bytes, src: Address, now_ns: int) -> Iterable[Out]:
        self.received.append(Received(now_ns, src, data))
        return ()

    @property
    def payloads(self) -> list[bytes]:
        """The data of every datagram received, in arrival order."""
        return [r.data for r in self.received]
