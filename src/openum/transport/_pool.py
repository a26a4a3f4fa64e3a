"""A context's source transport sessions of one kind: lazy activation, round-robin, explicit ports.

Seed 2.9.2: sources without an explicit port are assigned round-robin over at most
``maximum_ports`` sessions bound to the first free ports of ``port_low..port_high``; a source with an
explicit port uses (or creates) the session on that port, which then joins the round-robin pool.  A
session's options come from its first source; a later source with a conflicting session option gets a
logged warning (seed 3.3.3).

TCP and LBT-RU sessions are pooled by port (:class:`PortSessionPool`); LBT-RM sessions by multicast
group (:mod:`openum.transport.lbtrm`), which reuses :func:`warn_first_wins`.
"""

from __future__ import annotations

import abc
import errno
import random
from collections.abc import Callable, Iterable
from typing import Any, Generic, Protocol, TypeVar

from openum._errors import SystemCallError
from openum.config import REGISTRY, SourceAttributes

__all__ = ["PooledSession", "PortSessionPool", "bind_first_free", "session_options", "warn_first_wins"]


class PooledSession(Protocol):
    """What a pool needs of its sessions."""

    @property
    def port(self) -> int: ...

    @property
    def attrs(self) -> Any: ...

    def close(self) -> None: ...


S = TypeVar("S", bound=PooledSession)
T = TypeVar("T")


#: Source options of every transport's sessions (batching, buffers, TSNIs).
_SHARED_PREFIXES = ("implicit_batching_", "transport_session_", "transport_topic_sequence_number_")


def session_options(prefix: str) -> tuple[str, ...]:
    """Source options that belong to a transport session whose own options start with ``prefix``."""
    return tuple(
        name
        for name in REGISTRY.names("source")
        if REGISTRY.lookup("source", name).session
        and (name.startswith((prefix, *_SHARED_PREFIXES)) or name == "transport")
    )


def warn_first_wins(
    log: Any, kind: str, names: Iterable[str], first_attrs: Any, attrs: Any, where: str
) -> None:
    """Log every option of ``names`` that ``attrs`` (a later ``kind``: source or receiver) sets to a
    value other than the one ``where`` took from its first user's ``first_attrs``."""
    for name in names:
        if attrs.is_set(name) and attrs.get(name) != first_attrs.get(name):
            log.warning(
                "%s option %s=%s is ignored: the %s already uses %s from its first %s",
                kind,
                name,
                attrs.get_str(name),
                where,
                first_attrs.get_str(name),
                kind,
            )


def bind_first_free(ports: Iterable[int], open_port: Callable[[int], T], what: str, option_hint: str) -> T:
    """``open_port(port)`` for each port until one is not in use; a clear error when none is free.

    ``open_port`` raises :class:`OSError` with ``EADDRINUSE``/``EACCES`` for a taken port (tried next);
    any other error is raised at once as :class:`~openum.SystemCallError`.
    """
    tried = list(ports)
    last: OSError | None = None
    for port in tried:
        try:
            return open_port(port)
        except OSError as exc:
            if exc.errno not in (errno.EADDRINUSE, errno.EACCES):
                raise SystemCallError(f"{what}: cannot bind port {port}: {exc.strerror or exc}") from exc
            last = exc
    span = f"{tried[0]}-{tried[-1]}" if tried else "the configured range"
    reason = last.strerror if last else "every port of the range is taken by this context"
    raise SystemCallError(f"{what}: no free port in {span} ({option_hint}): {reason}")


class PortSessionPool(abc.ABC, Generic[S]):
    """Sessions bound to ports of a range, assigned round-robin (seed 2.9.2).

    Subclasses say which options hold the range and the explicit port, and open a session on a port
    (:meth:`_open`, raising ``OSError`` ``EADDRINUSE`` when the port is taken).
    """

    #: Source option naming an explicit port (0: take one from the pool).
    PORT_OPTION: str
    #: What the sessions are, for messages ("TCP session", "LBT-RU session").
    KIND: str

    def __init__(
        self,
        loop: Any,
        context_attrs: Any,
        interface: str,
        log: Any,
        rng: random.Random | None,
        *,
        port_low: int,
        port_high: int,
        maximum_ports: int,
        session_option_names: tuple[str, ...],
        range_hint: str,
    ) -> None:
        self.loop = loop
        self.log = log
        self.interface = interface
        self.context_attrs = context_attrs
        self.rng = rng or random.Random()
        self.port_low = port_low
        self.port_high = port_high
        self.maximum_ports = maximum_ports
        self._session_option_names = session_option_names
        self._range_hint = range_hint
        self._range_size = max(0, port_high - port_low + 1)
        self._implicit: list[S] = []
        self._pool: list[S] = []  # implicit sessions plus explicit ones (seed 2.9.2)
        self._next = 0

    @abc.abstractmethod
    def _open(self, attrs: SourceAttributes, port: int) -> S:
        """Bind and start a session on ``port`` (``OSError`` ``EADDRINUSE``: the port is taken)."""

    @property
    def sessions(self) -> list[S]:
        return list(self._pool)

    def session_for(self, attrs: SourceAttributes) -> S:
        """The session a new source goes to (activating one if needed)."""
        explicit = attrs.get(self.PORT_OPTION)
        if explicit:
            for session in self._pool:
                if session.port == explicit:
                    self._check_first_source_wins(session, attrs)
                    return session
            session = self._activate(attrs, [explicit])
            self._pool.append(session)
            return session
        # Round-robin over the pool's slots: active sessions, then the implicit ones not yet activated
        # (never more than the range has ports).
        not_activated = min(max(1, self.maximum_ports), self._range_size) - len(self._implicit)
        slots = len(self._pool) + max(0, not_activated)
        slot = self._next % slots
        self._next = slot + 1
        if slot >= len(self._pool):
            try:
                session = self._activate(attrs, self._free_ports())
            except SystemCallError as exc:
                if not self._pool:
                    raise
                # The range's other ports are held by other programs: share the sessions there are.
                self._range_size = len(self._implicit)
                self.log.warning("%s; sources share the %d session(s) already open", exc, len(self._pool))
                slot = slot % len(self._pool)
                self._next = slot + 1
            else:
                self._implicit.append(session)
                self._pool.append(session)
                return session
        session = self._pool[slot]
        self._check_first_source_wins(session, attrs)
        return session

    def _free_ports(self) -> list[int]:
        used = {s.port for s in self._pool}
        return [p for p in range(self.port_low, self.port_high + 1) if p not in used]

    def _activate(self, attrs: SourceAttributes, ports: list[int]) -> S:
        return bind_first_free(
            ports, lambda port: self._open(attrs, port), f"{self.KIND} on {self.interface}", self._range_hint
        )

    def _check_first_source_wins(self, session: S, attrs: SourceAttributes) -> None:
        warn_first_wins(
            self.log,
            "source",
            self._session_option_names,
            session.attrs,
            attrs,
            f"{self.KIND} on port {session.port}",
        )

    def release(self, session: S) -> None:
        """Close a session whose last source was deleted (its receivers see EOS, seed 2.11.1)."""
        if session in self._pool:
            self._pool.remove(session)
        if session in self._implicit:
            self._implicit.remove(session)
        session.close()

    def close(self) -> None:
        for session in self._pool:
            session.close()
        self._pool.clear()
        self._implicit.clear()
