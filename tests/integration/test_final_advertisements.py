"""Final advertisements (``source resolver_send_final_advertisements N``, UM Concepts Guide, section
2.11.1) between real contexts on 127.0.0.1: all N leave, whether the context stays open after the source
is deleted or closes right after it, in embedded mode, in sequential mode on the real clock and on the
caller's clock, and from ``openum send --linger 0``.  A failing socket does not hold ``close()`` up.

A context's resolver socket is closed when ``Context.close()`` returns, so what another context receives
afterwards left before that.
"""

from __future__ import annotations

import subprocess
import threading

import pytest

import openum
from openum.runtime import ManualClock
from tests.helpers import wait_until
from tests.integration.pubsub import WAIT, Ports, Processes, last_json
from tests.integration.test_lbmrd_process import free_udp_port

MS = 1_000_000
FINALS = 3


def _options(port: int, *extra: str) -> list[str]:
    return [f"context resolver_multicast_port {port}", *extra]


def _finals_rcved(ctx: openum.Context) -> int:
    return ctx.statistics().final_advertisements_rcved


def _source_options(port: int, mode: str) -> list[str]:
    opts = _options(port, f"source resolver_send_final_advertisements {FINALS}")
    return opts if mode == "embedded" else [*opts, "context operational_mode sequential"]


@pytest.mark.parametrize("mode", ["embedded", "sequential"])
def test_every_final_advertisement_leaves_before_the_context_closes(mode: str) -> None:
    port = free_udp_port()
    with openum.Context(options=_options(port)) as watcher:
        ctx = openum.Context(options=_source_options(port, mode))
        src = ctx.create_source("finals/closing")
        src.close()
        ctx.close()  # right after the source: the first final is due now, the others 100 and 200 ms later
        assert wait_until(lambda: _finals_rcved(watcher) >= FINALS, WAIT), watcher.statistics()
        assert _finals_rcved(watcher) == FINALS


def test_on_the_callers_clock_the_final_advertisements_left_go_at_once() -> None:
    port = free_udp_port()
    with openum.Context(options=_options(port)) as watcher:
        ctx = openum.Context(options=_source_options(port, "sequential"), clock=ManualClock(0))
        src = ctx.create_source("finals/manual")
        ctx.process_events_at(1 * MS)
        src.close()
        ctx.process_events_at(2 * MS)  # the first final goes; the next is due at 102 ms ...
        assert ctx.statistics().final_advertisements_sent == 1
        ctx.close()  # ... but that time never comes: close() sends the other two at once
        assert wait_until(lambda: _finals_rcved(watcher) >= FINALS, WAIT), watcher.statistics()
        assert _finals_rcved(watcher) == FINALS


def test_a_source_closed_in_an_open_context_sends_them_all_and_leaves_the_caches() -> None:
    port = free_udp_port()
    topic = "finals/open"
    with (
        openum.Context(options=_options(port)) as watcher,
        openum.Context(options=_source_options(port, "embedded")) as ctx,
    ):
        src = ctx.create_source(topic)
        assert wait_until(lambda: watcher.resolver_cache(topic) == [src.source_string], WAIT)
        src.close()
        assert wait_until(lambda: ctx.statistics().final_advertisements_sent == FINALS, WAIT)
        assert wait_until(lambda: _finals_rcved(watcher) == FINALS, WAIT), watcher.statistics()
        assert watcher.resolver_cache(topic) == []  # the leave record removed it from the cache


def test_a_refusing_socket_does_not_hold_close_up() -> None:
    # 127.255.255.255 is loopback's broadcast address: without SO_BROADCAST every datagram to it is
    # refused (EACCES), so nothing is sent at all.
    daemon = f"context resolver_unicast_daemon 127.255.255.255:{free_udp_port()}"
    ctx = openum.Context(options=[daemon, "source resolver_send_final_advertisements 1000"])
    src = ctx.create_source("finals/refused")
    assert wait_until(lambda: ctx.statistics().tr_dgrams_send_failed > 0, WAIT)
    src.close()
    closer = threading.Thread(target=ctx.close)
    closer.start()
    closer.join(WAIT)
    assert not closer.is_alive()
    assert ctx.closed


def test_openum_send_with_no_linger_sends_every_final_advertisement(procs: Processes) -> None:
    ports = Ports.allocate(2)
    with openum.Context(options=_options(ports.resolver)) as watcher:
        send = procs.openum(
            "send",
            "finals/cli",
            *ports.argv(f"source resolver_send_final_advertisements {FINALS}"),
            "--count",
            "1",
            "--linger",
            "0",
            "--delay",
            "0",
            "--json",
        )
        try:
            out, err = send.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            send.kill()
            raise
        assert send.returncode == 0, err
        assert last_json(out)["sent"] == 1
        assert wait_until(lambda: _finals_rcved(watcher) >= FINALS, WAIT), watcher.statistics()
        assert _finals_rcved(watcher) == FINALS
