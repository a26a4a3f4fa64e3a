"""Deterministic network simulation for openum's sans-I/O engines (PRACTICES.md 7).

Fakes over mocks: instead of mocking sockets, put the protocol engines under test on a simulated
UDP network with a fake clock, impair the links, and look at every packet.  Pure Python: no sockets,
no threads, no wall clock; the same seed gives the same run.  Modelled on trio's ``FakeNet``.

- :class:`FakeClock`: integer nanoseconds that move only when told to (an ``openum.runtime``
  ``ManualClock``).
- :class:`SimNetwork`: nodes at ``(ip, port)`` addresses, multicast groups (``join``/``leave``),
  :class:`LinkModel` impairments (loss, Gilbert-Elliott burst loss, duplication, reordering, delay,
  jitter) set globally, per destination, per source or per (source, destination) pair, explicit drop
  rules on a :class:`Link` (``drop(predicate)``, ``drop_sequence([...])``), a packet hook
  (``on_packet``) that sees every datagram and may drop or rewrite it, captures (``packets``,
  ``write_pcap``) and per-address ``stats``.
- The loop is event driven: ``run_until(t)``, ``run_for(ns)``, ``run_until_idle(max_ns)`` and
  ``step()`` jump the clock to the next instant something is due (a datagram arriving, a node's
  deadline), deliver the datagrams due then in send order, poll the nodes whose deadline passed in
  registration order, send what they return, and loop.

Nodes
-----
A node implements :class:`SimNode`: ``datagram_received(data, src, now_ns)`` and ``poll(now_ns)``
return the datagrams to send (objects with ``.data`` and ``.destination``, e.g. :class:`Datagram`;
destination None means the node's ``default_group``) and ``next_deadline()`` says when to poll next.
Subclass :class:`SimNode` and override what you need:

>>> from openum.testing import Datagram, LinkModel, SimNetwork, SimNode
>>> class Echo(SimNode):
...     def datagram_received(self, data, src, now_ns):
...         return [Datagram(b"echo:" + data, src)]
>>> class Pinger(SimNode):
...     def __init__(self, peer):
...         self.peer, self.replies, self.next_ns = peer, [], 0
...     def poll(self, now_ns):
...         self.next_ns = now_ns + 1_000_000  # ping every millisecond, five times
...         if now_ns >= 4_000_000:
...             self.next_ns = None
...         return [Datagram(b"ping %d" % (now_ns // 1_000_000), self.peer)]
...     def next_deadline(self):
...         return self.next_ns
...     def datagram_received(self, data, src, now_ns):
...         self.replies.append((now_ns, data))
...         return []
>>> net = SimNetwork(seed=1)
>>> net.set_link(LinkModel(delay_ns=100_000))            # 100 us each way
>>> _ = net.link(dst=("10.0.0.1", 7000)).drop_sequence([2])  # lose the third datagram to the pinger
>>> echo = net.add(Echo(), ("10.0.0.2", 7000))
>>> pinger = net.add(Pinger(("10.0.0.2", 7000)), ("10.0.0.1", 7000))
>>> net.run_for(10_000_000)
>>> [(t // 1000, d) for t, d in pinger.replies]
[(200, b'echo:ping 0'), (1200, b'echo:ping 1'), (3200, b'echo:ping 3'), (4200, b'echo:ping 4')]
>>> net.stats[("10.0.0.1", 7000)].dropped
1

Engines
-------
openum's engines return richer results: the resolver's ``datagram_received`` returns events, an
LBT-RM receiver may return ``(outgoing, delivered, events)``.  Pass ``adapter=`` to :meth:`SimNetwork.add`
(a callable turning one result into the datagrams to send), or nothing special at all: an
:class:`EngineNode` (what ``add(engine, addr, adapter=...)`` builds; build one yourself for the
default) sends every object with ``.data``/``.destination`` found in the result (lists and tuples
are searched) and keeps everything else in ``node.events`` as ``(now_ns, item)``::

    net = SimNetwork(seed=7)
    group = ("224.9.10.11", 12965)
    ctx_a = net.add(EngineNode(ResolverEngine(settings_a, net.rng("a"))), ("10.0.0.1", 14402),
                    default_group=group, groups=[group])
    rm_rcv = net.add(lbtrm_receiver, ("10.0.0.2", 14400), groups=[data_group],
                     adapter=lambda result: result[0])   # (outgoing, delivered, events)
    net.emit(("10.0.0.1", 14402), ctx_a.engine.add_source(1, spec, net.now_ns()))  # outside the loop

Engines whose methods are named differently plug in by subclassing :class:`EngineNode` and overriding
``datagram_received``/``poll``/``next_deadline`` (return ``self.adapt(result, now_ns)``).

See ``docs/testing.md`` for a complete walk-through.
"""

from openum.testing._clock import FakeClock
from openum.testing._link import Link, LinkModel
from openum.testing._network import Hook, SimNetwork
from openum.testing._node import (
    Adapter,
    Address,
    Datagram,
    Engine,
    EngineNode,
    Mailbox,
    Out,
    Received,
    SimNode,
)
from openum.testing._records import Fate, LivelockError, NodeStats, Packet, SentDatagram

__all__ = [
    "Adapter",
    "Address",
    "Datagram",
    "Engine",
    "EngineNode",
    "FakeClock",
    "Fate",
    "Hook",
    "Link",
    "LinkModel",
    "LivelockError",
    "Mailbox",
    "NodeStats",
    "Out",
    "Packet",
    "Received",
    "SentDatagram",
    "SimNetwork",
    "SimNode",
]
