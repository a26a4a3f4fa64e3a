"""Unicast topic resolution options that take effect (issue 22: live or refused).

``resolver_unicast_ignore_unknown_source`` (default 1): a context resolving through lbmrd drops TR
datagrams that do not come from a configured daemon, so a host that learns the context's port cannot
inject advertisements.  ``resolver_unicast_receiver_socket_buffer`` sizes the unicast socket.  A UDP
socket bound to the configured daemon address plays the lbmrd here; another one plays the stranger.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

import openum
from tests.helpers import wait_until
from tests.integration.pubsub import WAIT
from tests.integration.test_lbmrd_process import free_udp_port, tir

TOPIC = "unicast/forged"


@pytest.fixture
def daemon() -> Iterator[socket.socket]:
    """A socket at the address the contexts are told is their lbmrd.

    No receiver is created for the forged topic: the resolver cache keeps every source heard of
    (UM Concepts Guide, section 7.1), and a receiver would try to join the forged source and drop it.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    yield sock
    sock.close()


def _context(daemon: socket.socket, *extra: str) -> tuple[openum.Context, int]:
    port = free_udp_port()
    ctx = openum.Context(
        options=[
            f"context resolver_unicast_daemon 127.0.0.1:{daemon.getsockname()[1]}",
            f"context resolver_unicast_port {port}",
            *extra,
        ]
    )
    return ctx, port


def test_advertisements_from_an_unknown_source_are_dropped_by_default(daemon: socket.socket) -> None:
    forged = tir("127.0.0.1", 14371, TOPIC)
    ctx, port = _context(daemon)
    with ctx, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as stranger:
        stranger.sendto(forged, ("127.0.0.1", port))
        assert wait_until(lambda: ctx.statistics().tr_dgrams_dropped_unknown_source == 1, WAIT)
        assert ctx.resolver_cache(TOPIC) == []
        assert ctx.statistics().tirs_rcved == 0
        # The same datagram from the daemon's address is topic resolution.
        daemon.sendto(forged, ("127.0.0.1", port))
        assert wait_until(lambda: len(ctx.resolver_cache(TOPIC)) == 1, WAIT)
        assert ctx.statistics().tr_dgrams_dropped_unknown_source == 1


def test_with_the_option_off_anyone_may_advertise(daemon: socket.socket) -> None:
    ctx, port = _context(daemon, "context resolver_unicast_ignore_unknown_source 0")
    with ctx, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as stranger:
        stranger.sendto(tir("127.0.0.1", 14371, TOPIC), ("127.0.0.1", port))
        assert wait_until(lambda: len(ctx.resolver_cache(TOPIC)) == 1, WAIT)
        assert ctx.statistics().tr_dgrams_dropped_unknown_source == 0


@pytest.mark.parametrize("size", [32768, 98304])
def test_the_unicast_receive_buffer_is_sized_by_its_option(daemon: socket.socket, size: int) -> None:
    ctx, port = _context(daemon, f"context resolver_unicast_receiver_socket_buffer {size}")
    with ctx:
        link = ctx._resolver.link  # the option has no other visible effect than the socket's buffer
        assert link.local_address == ("127.0.0.1", port)
        assert link._tx is not None
        # Linux doubles the requested size for its bookkeeping (socket(7)).
        assert link._tx.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) == 2 * size


def test_a_daemon_behind_another_interface_is_refused(daemon: socket.socket) -> None:
    port = daemon.getsockname()[1]
    with pytest.raises(openum.ConfigError, match="another interface") as err:
        openum.Context(options=[f"context resolver_unicast_daemon 127.0.0.2->127.0.0.1:{port}"])
    assert err.value.option == "resolver_unicast_daemon"
    # The interface the socket is on, by address or by name, is what openum does.
    for iface in ("127.0.0.1", "lo"):
        with openum.Context(options=[f"context resolver_unicast_daemon {iface}->127.0.0.1:{port}"]) as ctx:
            assert ctx._resolver.link.local_address is not None
