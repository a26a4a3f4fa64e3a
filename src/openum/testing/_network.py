"""The simulated network: addresses, multicast groups, links, the packet hook and the event loop.

Everything happens at discrete instants of a :class:`FakeClock`.  The loop jumps the clock to the
next instant anything is due (a datagram arriving, a node's deadline), delivers the datagrams due
then (in send order), polls the nodes whose deadline has passed (in registration order), sends what
they return and repeats.  Randomness comes from per-path generators derived from the seed, so a run
depends only on the seed and on what the nodes do.
"""

from __future__ import annotations

import heapq
import ipaddress
import os
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Final, Literal, TypeVar, overload

from openum.runtime import ManualClock
from openum.testing._clock import FakeClock
from openum.testing._link import PERFECT, Link, LinkModel
from openum.testing._node import Adapter, Address, EngineNode, Out, SimNode
from openum.testing._pcap import udp_frame, write_pcap
from openum.testing._records import COPIES, Counters, Fate, LivelockError, NodeStats, Packet, SentDatagram

__all__ = ["Hook", "SimNetwork"]

#: The largest UDP payload over IPv4 (65535 - 20 - 8).
MAX_DATAGRAM: Final = 65_507
#: Default for ``write_pcap``: simulated time 0 is shown as 2023-11-14 22:13:20 UTC.
PCAP_EPOCH_NS: Final = 1_700_000_000 * 1_000_000_000

N = TypeVar("N", bound=SimNode)
Hook = Callable[["Packet"], "Packet | None"]


class _Entry:
    """A registered node and the loop's view of it."""

    __slots__ = ("addr", "alive", "deadline", "default_group", "index", "node")

    def __init__(self, node: SimNode, addr: Address, default_group: Address | None, index: int) -> None:
        self.node = node
        self.addr = addr
        self.default_group = default_group
        self.index = index
        self.deadline: int | None = None
        self.alive = True


@lru_cache(maxsize=4096)
def _is_multicast(ip: str) -> bool:
    return ipaddress.IPv4Address(ip).is_multicast


def _check_address(what: str, addr: object) -> Address:
    if not (
        isinstance(addr, tuple)
        and len(addr) == 2
        and isinstance(addr[0], str)
        and isinstance(addr[1], int)
        and 0 <= addr[1] <= 0xFFFF
    ):
        raise ValueError(f"{what} must be an (ipv4, port) tuple, got {addr!r}")
    try:
        _is_multicast(addr[0])
    except ValueError:
        raise ValueError(f"{what} must be an (ipv4, port) tuple, got {addr!r}") from None
    return addr


class SimNetwork:
    """A deterministic simulated UDP network for sans-I/O engines (see the package docstring).

    ``seed`` fixes every random draw; ``clock`` defaults to a new :class:`FakeClock` at 0.
    ``loopback``: whether a multicast datagram also reaches its sender when the sender is a member
    (like ``IP_MULTICAST_LOOP``; default False).  ``capture``: keep :attr:`packets` and :attr:`sent`
    (turn off for very long runs).  ``max_steps_per_instant``: how many steps one ``run_*`` call (or
    consecutive ``step()`` calls) may take without the clock moving before :class:`LivelockError` (a
    node whose deadline stays in the past, or zero-delay traffic that never ends).
    """

    def __init__(
        self,
        seed: int | str = 0,
        clock: ManualClock | None = None,
        *,
        loopback: bool = False,
        capture: bool = True,
        max_steps_per_instant: int = 100_000,
    ) -> None:
        self.seed = seed
        self.clock: ManualClock = clock if clock is not None else FakeClock()
        self.loopback = loopback
        self.capture = capture
        self.max_steps_per_instant = max_steps_per_instant
        #: Every datagram on every path, in the order they were sent (when ``capture``).
        self.packets: list[Packet] = []
        self._sent: list[SentDatagram] = []
        self._nodes: dict[Address, _Entry] = {}
        self._groups: dict[Address, list[Address]] = {}
        self._links: dict[tuple[Address | None, Address | None], Link] = {(None, None): Link(None, None)}
        self._links[(None, None)].model = PERFECT
        self._hooks: list[Hook] = []
        self._counters: dict[Address, Counters] = {}
        self._rngs: dict[tuple[Address, Address], random.Random] = {}
        self._bad: dict[tuple[Address, Address], bool] = {}
        # (arrival_ns, seq, src, dst, data): seq breaks ties in send order.
        self._inflight: list[tuple[int, int, Address, Address, bytes]] = []
        self._deadlines: list[tuple[int, int, _Entry]] = []
        self._seq = 0
        self._send_index = 0
        self._node_index = 0
        self._steps_at_instant = 0

    # -- time -----------------------------------------------------------------------------------

    def now_ns(self) -> int:
        """The network clock's time."""
        return self.clock.now_ns()

    # -- nodes and groups -----------------------------------------------------------------------

    @overload
    def add(
        self,
        node: N,
        addr: Address,
        *,
        default_group: Address | None = None,
        groups: Iterable[Address] = (),
        adapter: None = None,
    ) -> N: ...

    @overload
    def add(
        self,
        node: Any,
        addr: Address,
        *,
        default_group: Address | None = None,
        groups: Iterable[Address] = (),
        adapter: Adapter,
    ) -> EngineNode[Any]: ...

    def add(
        self,
        node: Any,
        addr: Address,
        *,
        default_group: Address | None = None,
        groups: Iterable[Address] = (),
        adapter: Adapter | None = None,
    ) -> Any:
        """Register ``node`` at ``addr`` and return it (wrapped in an :class:`EngineNode` when an
        ``adapter`` is given).  ``default_group`` is where its datagrams with destination None go;
        ``groups`` are multicast groups it joins."""
        _check_address("addr", addr)
        if _is_multicast(addr[0]):
            raise ValueError(f"a node address must be unicast, got {addr!r}")
        if addr in self._nodes:
            raise ValueError(f"{addr!r} already has a node")
        if default_group is not None:
            _check_address("default_group", default_group)
        if adapter is not None:
            node = EngineNode(node, adapter)
        for method in ("datagram_received", "poll", "next_deadline"):
            if not callable(getattr(node, method, None)):
                raise TypeError(f"{node!r} has no {method}(): pass adapter= or wrap it in an EngineNode")
        entry = _Entry(node, addr, default_group, self._node_index)
        self._node_index += 1
        self._nodes[addr] = entry
        for group in groups:
            self.join(addr, group)
        self._refresh(entry)
        return node

    def remove(self, addr: Address) -> SimNode:
        """Unregister the node at ``addr`` (it leaves its groups; datagrams in flight to it are dropped)."""
        entry = self._nodes.pop(addr)
        entry.alive = False
        for members in self._groups.values():
            if addr in members:
                members.remove(addr)
        return entry.node

    def node(self, addr: Address) -> SimNode:
        """The node registered at ``addr``."""
        return self._nodes[addr].node

    @property
    def nodes(self) -> Mapping[Address, SimNode]:
        """Every registered node by address, in registration order."""
        return {addr: e.node for addr, e in self._nodes.items()}

    def join(self, node_addr: Address, group: Address) -> None:
        """Make ``node_addr`` a member of the multicast ``group`` (idempotent)."""
        _check_address("group", group)
        if not _is_multicast(group[0]):
            raise ValueError(f"{group!r} is not a multicast group (224.0.0.0/4)")
        if node_addr not in self._nodes:
            raise ValueError(f"no node at {node_addr!r}: add() it before joining groups")
        members = self._groups.setdefault(group, [])
        if node_addr not in members:
            members.append(node_addr)

    def leave(self, node_addr: Address, group: Address) -> None:
        """Stop ``node_addr`` receiving ``group`` (a no-op if it was not a member)."""
        members = self._groups.get(group, [])
        if node_addr in members:
            members.remove(node_addr)

    def members(self, group: Address) -> list[Address]:
        """The members of ``group``, in join order."""
        return list(self._groups.get(group, ()))

    def wake(self, addr: Address) -> None:
        """Re-read the node's ``next_deadline()``.

        Needed only when a node's engine is changed from inside the loop by something other than the
        node itself (a hook, another node).  Every ``run_*`` and ``step`` call re-reads all deadlines
        first, so changes made between those calls are seen anyway.
        """
        self._refresh(self._nodes[addr])

    def rng(self, name: str) -> random.Random:
        """A ``random.Random`` derived from the network's seed and ``name``, for the engines under
        test (``ResolverEngine(settings, net.rng("ctx-a"))``): one seed then fixes the whole run."""
        return random.Random(f"openum.testing/{self.seed!r}/node/{name}")

    # -- links and hooks ------------------------------------------------------------------------

    def link(self, dst: Address | None = None, src: Address | None = None) -> Link:
        """The link holding the paths ``src -> dst`` (None: any), created on first use.

        ``link()`` is the global link, ``link(dst=b)`` every path to ``b``, ``link(src=a)`` every path
        from ``a`` and ``link(b, src=a)`` the one pair.
        """
        for what, value in (("dst", dst), ("src", src)):
            if value is not None:
                _check_address(what, value)
        key = (src, dst)
        found = self._links.get(key)
        if found is None:
            found = self._links[key] = Link(src, dst)
        return found

    def set_link(
        self, model: LinkModel | None, *, dst: Address | None = None, src: Address | None = None
    ) -> None:
        """Set the :class:`LinkModel` of :meth:`link` ``(dst, src)``; None makes it inherit again (the
        global link then becomes perfect)."""
        found = self.link(dst, src)
        found.model = PERFECT if model is None and src is None and dst is None else model

    def on_packet(self, hook: Hook) -> Hook:
        """Call ``hook(packet)`` for every datagram on every path, at send time, in registration order.

        The hook may inspect and count, or return a changed packet (``dataclasses.replace``): another
        ``data``, another ``fate`` (``Fate.DROPPED`` drops it, ``Fate.DELIVERED`` overrides a loss) or
        other ``arrival_ns``.  The network trims ``arrival_ns`` to match the fate, or fills it with the
        first original arrival time (the send time when the links had dropped the packet).  This is
        PRACTICES.md's ``route_packet`` hook.  Usable as a decorator; returns ``hook``.
        """
        self._hooks.append(hook)
        return hook

    def remove_hook(self, hook: Hook) -> None:
        self._hooks.remove(hook)

    # -- sending --------------------------------------------------------------------------------

    def send(self, src: Address, data: bytes, dst: Address, *, loopback: bool | None = None) -> None:
        """Send ``data`` from ``src`` (which needs no node) to a unicast address or a group, now."""
        if len(data) > MAX_DATAGRAM:
            raise ValueError(f"datagram of {len(data)} bytes is larger than UDP allows ({MAX_DATAGRAM})")
        data = bytes(data)
        now = self.clock.now_ns()
        index = self._send_index
        self._send_index += 1
        counters = self._stats(src)
        counters.sent += 1
        counters.bytes_sent += len(data)
        if self.capture:
            self._sent.append(SentDatagram(now, src, dst, data))
        if _is_multicast(dst[0]):
            loop = self.loopback if loopback is None else loopback
            for member in list(self._groups.get(dst, ())):
                if member != src or loop:
                    self._route(now, src, member, data, dst, index)
        else:
            self._route(now, src, dst, data, None, index)

    def emit(self, addr: Address, result: Any) -> None:
        """Send what the node at ``addr`` produced outside the loop, e.g. ``engine.send(...)``'s result.

        The result goes through the node's adapter when it is an :class:`EngineNode`, else it must be
        an iterable of :class:`Out`.  The node's deadline is re-read afterwards.
        """
        entry = self._nodes[addr]
        outs = entry.node.adapt(result, self.now_ns()) if isinstance(entry.node, EngineNode) else result
        self._send_outs(entry, outs)
        self._refresh(entry)

    def _send_outs(self, entry: _Entry, outs: Iterable[Out] | None) -> None:
        if outs is None:
            return
        for out in outs:
            dst = out.destination if out.destination is not None else entry.default_group
            if dst is None:
                raise ValueError(
                    f"node {entry.addr!r} sent a datagram with destination None but has no default_group"
                )
            self.send(entry.addr, out.data, dst)

    def _route(
        self, now: int, src: Address, dst: Address, data: bytes, group: Address | None, index: int
    ) -> None:
        if dst in self._nodes:
            fate, arrivals = self._traverse(now, src, dst, data)
        else:
            fate, arrivals = Fate.UNREACHABLE, ()
        packet = Packet(now, src, dst, data, fate, group, arrivals, index)
        for hook in self._hooks:
            changed = hook(packet)
            if changed is not None and changed is not packet:
                packet = self._accept(packet, changed)
        if self.capture:
            self.packets.append(packet)
        if packet.fate is Fate.UNREACHABLE:
            return
        counters = self._stats(dst)
        if packet.fate is Fate.DROPPED:
            counters.dropped += 1
        elif packet.fate is Fate.DUPLICATED:
            counters.duplicated += 1
        for arrival in packet.arrival_ns:
            heapq.heappush(self._inflight, (arrival, self._seq, src, dst, packet.data))
            self._seq += 1

    def _accept(self, old: Packet, new: Packet) -> Packet:
        """Check a hook's packet and make its ``arrival_ns`` agree with its fate."""
        for name in ("time_ns", "src", "dst", "group", "send_index"):
            if getattr(new, name) != getattr(old, name):
                raise ValueError(f"a packet hook may change data, fate and arrival_ns, not {name}")
        if old.fate is Fate.UNREACHABLE:
            return replace(new, fate=Fate.UNREACHABLE, arrival_ns=())
        if any(t < old.time_ns for t in new.arrival_ns):
            raise ValueError(f"a packet cannot arrive before it was sent ({new.arrival_ns} < {old.time_ns})")
        wanted = COPIES[new.fate]
        arrivals = new.arrival_ns[:wanted]
        if len(arrivals) < wanted:
            fill = arrivals[0] if arrivals else (old.arrival_ns or (old.time_ns,))[0]
            arrivals += (fill,) * (wanted - len(arrivals))
        return new if arrivals == new.arrival_ns else replace(new, arrival_ns=arrivals)

    def _traverse(self, now: int, src: Address, dst: Address, data: bytes) -> tuple[Fate, tuple[int, ...]]:
        links = self._links
        model: LinkModel | None = None
        dropped = False
        for key in ((src, dst), (None, dst), (src, None), (None, None)):
            link = links.get(key)
            if link is None:
                continue
            index = link.count
            link.count += 1
            if not dropped and link._rules and link._drops(index, data):
                dropped = True
            if model is None:
                model = link.model
        if dropped:
            return Fate.DROPPED, ()
        assert model is not None  # the global link always has one
        if not model.random:
            return Fate.DELIVERED, (now + model.delay_ns,)
        rng = self._path_rng(src, dst)
        if model.burst_loss is not None:
            p_enter, p_stay = model.burst_loss
            bad = rng.random() < (p_stay if self._bad.get((src, dst), False) else p_enter)
            self._bad[(src, dst)] = bad
            if bad:
                return Fate.DROPPED, ()
        if model.loss and rng.random() < model.loss:
            return Fate.DROPPED, ()
        if model.duplicate and rng.random() < model.duplicate:
            return Fate.DUPLICATED, (now + self._delay(model, rng), now + self._delay(model, rng))
        return Fate.DELIVERED, (now + self._delay(model, rng),)

    @staticmethod
    def _delay(model: LinkModel, rng: random.Random) -> int:
        delay = model.delay_ns
        if model.jitter_ns:
            delay += rng.randint(0, model.jitter_ns)
        if model.reorder and rng.random() < model.reorder:
            delay += rng.randint(1, model.reorder_ns)
        return delay

    def _path_rng(self, src: Address, dst: Address) -> random.Random:
        # One generator per path: what happens on one path does not depend on traffic on the others.
        rng = self._rngs.get((src, dst))
        if rng is None:
            rng = self._rngs[(src, dst)] = random.Random(f"openum.testing/{self.seed!r}/path/{src}->{dst}")
        return rng

    # -- the loop -------------------------------------------------------------------------------

    def _refresh(self, entry: _Entry) -> None:
        if not entry.alive:
            return
        deadline = entry.node.next_deadline()
        if deadline is not None and (not isinstance(deadline, int) or isinstance(deadline, bool)):
            raise TypeError(f"{entry.node!r}.next_deadline() returned {deadline!r}, not an int or None")
        if deadline != entry.deadline:
            entry.deadline = deadline
            if deadline is not None:
                heapq.heappush(self._deadlines, (deadline, entry.index, entry))

    def _refresh_all(self) -> None:
        for entry in list(self._nodes.values()):
            self._refresh(entry)

    def _earliest_deadline(self) -> int | None:
        heap = self._deadlines
        while heap:
            deadline, _, entry = heap[0]
            if entry.alive and entry.deadline == deadline:
                return deadline
            heapq.heappop(heap)  # stale: the node moved its deadline or was removed
        return None

    def next_event_ns(self) -> int | None:
        """When the loop next has something to do (never before now); None: nothing at all."""
        times = [t for t in (self._earliest_deadline(),) if t is not None]
        if self._inflight:
            times.append(self._inflight[0][0])
        return max(min(times), self.clock.now_ns()) if times else None

    def _step(self, t: int) -> None:
        now = self.clock.now_ns()
        if t > now:
            self.clock.set(t)
            now = t
            self._steps_at_instant = 0
        else:
            self._steps_at_instant += 1
            if self._steps_at_instant > self.max_steps_per_instant:
                self._steps_at_instant = 0
                raise LivelockError(self._livelock_message(now))
        # Datagrams due now, in send order; ones sent during this step wait for the next step.
        limit = self._seq
        inflight = self._inflight
        while inflight and inflight[0][0] <= now and inflight[0][1] < limit:
            _, _, src, dst, data = heapq.heappop(inflight)
            self._deliver(now, src, dst, data)
        due: list[_Entry] = []
        heap = self._deadlines
        while heap and heap[0][0] <= now:
            deadline, _, entry = heapq.heappop(heap)
            if entry.alive and entry.deadline == deadline:
                entry.deadline = None  # consumed: the poll's refresh schedules the next one
                due.append(entry)
        for entry in due:
            if entry.alive:
                self._send_outs(entry, entry.node.poll(now))
                self._refresh(entry)

    def _deliver(self, now: int, src: Address, dst: Address, data: bytes) -> None:
        entry = self._nodes.get(dst)
        counters = self._stats(dst)
        if entry is None:
            counters.dropped += 1
            return
        counters.received += 1
        counters.bytes_received += len(data)
        self._send_outs(entry, entry.node.datagram_received(data, src, now))
        self._refresh(entry)

    def _livelock_message(self, now: int) -> str:
        stuck = [e.addr for e in self._nodes.values() if e.deadline is not None and e.deadline <= now]
        due = sum(1 for item in self._inflight if item[0] <= now)
        return (
            f"no progress after {self.max_steps_per_instant} steps at t={now} ns: nodes whose deadline "
            f"stays at or before now: {stuck}; datagrams due now: {due} (zero-delay traffic that never "
            "ends?)"
        )

    def step(self) -> bool:
        """Process the next instant (jumping the clock to it); False when nothing is scheduled."""
        self._refresh_all()
        t = self.next_event_ns()
        if t is None:
            return False
        self._step(t)
        return True

    def run_until(self, t_ns: int) -> None:
        """Process everything due up to and including ``t_ns``, then leave the clock at ``t_ns``."""
        if t_ns < self.clock.now_ns():
            raise ValueError(f"cannot run back to {t_ns} ns: the clock is at {self.clock.now_ns()} ns")
        self._steps_at_instant = 0
        self._refresh_all()
        while True:
            t = self.next_event_ns()
            if t is None or t > t_ns:
                break
            self._step(t)
        self.clock.set(t_ns)

    def run_for(self, ns: int) -> None:
        """:meth:`run_until` ``now + ns``."""
        self.run_until(self.clock.now_ns() + ns)

    def run_until_idle(self, max_ns: int) -> bool:
        """Run until nothing is in flight and no node has a deadline, for at most ``max_ns`` of
        simulated time.  True if the network went idle (the clock is then at the last event); False
        if time ran out (the clock is then at ``now + max_ns``)."""
        end = self.clock.now_ns() + max_ns
        self._steps_at_instant = 0
        self._refresh_all()
        while True:
            t = self.next_event_ns()
            if t is None:
                return True
            if t > end:
                self.clock.set(end)
                return False
            self._step(t)

    @property
    def in_flight(self) -> int:
        """Datagram copies sent but not yet delivered."""
        return len(self._inflight)

    # -- observation ----------------------------------------------------------------------------

    def _stats(self, addr: Address) -> Counters:
        counters = self._counters.get(addr)
        if counters is None:
            counters = self._counters[addr] = Counters()
        return counters

    @property
    def stats(self) -> dict[Address, NodeStats]:
        """A snapshot of every address's counters (nodes, and senders or receivers without one)."""
        return {addr: c.snapshot() for addr, c in self._counters.items()}

    @property
    def sent(self) -> list[SentDatagram]:
        """Every :meth:`send` call in order (when ``capture``)."""
        return list(self._sent)

    def write_pcap(
        self,
        path: str | os.PathLike[str],
        *,
        view: Literal["sent", "arrived"] = "sent",
        epoch_ns: int = PCAP_EPOCH_NS,
    ) -> Path:
        """Write the captured traffic as a classic pcap (Ethernet/IPv4/UDP) that tshark decodes.

        ``view="sent"``: one frame per :meth:`send` as the sender put it on the wire (a multicast
        datagram once, to its group), at send time.  ``view="arrived"``: one frame per copy scheduled
        to arrive (duplicates twice, drops never, hook changes applied), at arrival time, addressed to
        the group for multicast.  Simulated time 0 is written as ``epoch_ns``.
        """
        if not self.capture:
            raise RuntimeError("write_pcap needs SimNetwork(capture=True)")
        frames: list[tuple[int, bytes]]
        if view == "sent":
            frames = [(s.time_ns, udp_frame(s.data, s.src, s.dst, i + 1)) for i, s in enumerate(self._sent)]
        elif view == "arrived":
            copies = sorted((t, n, p) for n, p in enumerate(self.packets) for t in p.arrival_ns)
            frames = [
                (t, udp_frame(p.data, p.src, p.group or p.dst, i + 1)) for i, (t, _, p) in enumerate(copies)
            ]
        else:
            raise ValueError(f"view must be 'sent' or 'arrived', got {view!r}")
        return write_pcap(path, frames, epoch_ns=epoch_ns)
