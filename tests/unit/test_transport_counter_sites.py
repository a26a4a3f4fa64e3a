"""Where each counter of the transport sessions' own statistics moves (issue 22: live or absent).

The reliability engines' counters are driven by scenarios that make every one of them move
(``tests/sim/test_counters_move.py``).  The counters here count socket-level events (a full send buffer,
a slow TCP receiver, a stale session id, a corrupt TCP stream) that no deterministic test produces
cheaply, so each field is listed with the statement that moves it, and that statement must be in the
module named.  A field added to one of these snapshots fails this test until it is listed with what
moves it; a statement that goes away fails it too.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from types import ModuleType

import pytest

import openum
from openum.transport import _demux, _reliable, _source_session, tcp, tcp_receiver
from openum.transport._reliable import ReliableSourceStatistics
from openum.transport.tcp import TcpSourceStatistics
from openum.transport.tcp_receiver import TcpReceiverStatistics

#: What every source session counts (SourceSessionBase), TCP or LBT-RM/LBT-RU.
_SESSION: dict[str, tuple[ModuleType, str]] = {
    "msgs_sent": (_source_session, "self._msgs_sent += 1"),
    "bytes_sent": (_source_session, "self._bytes_sent += size"),
    "datagrams_sent": (_source_session, "self._datagrams_sent += 1"),
    "fragments_sent": (_source_session, 'self._stats["fragments_sent"] += count'),
    "tsnis_sent": (_source_session, 'self._stats["tsnis_sent"] += len(chunk)'),
    "blocked": (_source_session, 'self._stats["blocked"] += 1'),
}

SITES: dict[type, dict[str, tuple[ModuleType, str]]] = {
    TcpSourceStatistics: {
        **_SESSION,
        "num_clients": (tcp, "num_clients=len(self.clients)"),
        "bytes_buffered": (tcp, "bytes_buffered=self._buffered()"),
        "drops": (tcp, 'self._stats["drops"] += 1'),  # source_paced: a slow receiver misses a datagram
        "clients_rejected": (tcp, 'self._stats["clients_rejected"] += 1'),  # a stale session id
        "blocked_ns": (_source_session, "self._blocked_ns += self._now() - start"),
        "clients_pending": (tcp, "clients_pending=len(self.pending)"),
        # tests/integration/test_hostile_tcp.py moves each of these three
        "clients_unconfirmed": (tcp, 'self._stats["clients_unconfirmed"] += 1'),
        "clients_stalled": (tcp, 'self._stats["clients_stalled"] += 1'),
        "clients_malformed": (tcp, 'self._stats["clients_malformed"] += 1'),
    },
    ReliableSourceStatistics: {
        **_SESSION,
        "transport": (_reliable, "self.engine.statistics()"),  # its fields: tests/sim/test_counters_move.py
        "send_buffer_full": (_reliable, 'self._stats["send_buffer_full"] += 1'),  # sendto: EAGAIN
        "backlog": (_reliable, "backlog=len(self._backlog)"),
        "bytes_buffered": (_reliable, "bytes_buffered=sum(len(d) for d in self._backlog)"),
        "blocked_ns": (_source_session, "self._blocked_ns += self._now() - start"),
    },
    TcpReceiverStatistics: {
        "bytes_rcved": (tcp_receiver, "self._bytes_rcved += count"),
        "lbm_msgs_rcved": (_demux, "self.lbm_msgs_rcved += received"),
        "lbm_msgs_no_topic_rcved": (_demux, "self.lbm_msgs_no_topic_rcved += no_topic"),
        "tsnis_rcved": (_demux, "self.tsnis_rcved += 1"),
        "msgs_malformed": (_demux, "self.msgs_malformed += 1"),
    },
}


def source_text(module: ModuleType) -> str:
    """The module's Python source (also where a compiled extension of it is what was imported)."""
    path = Path(openum.__file__).parent.joinpath(*module.__name__.split(".")[1:]).with_suffix(".py")
    return path.read_text(encoding="utf-8")


@pytest.mark.parametrize("stats", list(SITES), ids=lambda cls: cls.__name__)
def test_every_counter_is_listed_with_the_statement_that_moves_it(stats: type) -> None:
    sites = SITES[stats]
    assert set(sites) == {f.name for f in fields(stats)}, "list each field here with what moves it"
    missing = [
        f"{name}: {module.__name__} has no {statement!r}"
        for name, (module, statement) in sites.items()
        if statement not in source_text(module)
    ]
    assert not missing, missing
