"""disconnect: a UDP socket connected to one peer receives from every sender again, on its own port."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from openum.transport._reliable import CAN_DISCONNECT, disconnect
from tests.helpers import wait_until

pytestmark = pytest.mark.skipif(not CAN_DISCONNECT, reason="connect(AF_UNSPEC) through libc: Linux only")

OTHER_HOST = "127.0.0.2"  # another address of the loopback interface: a sender on "another host"


def _udp(host: str, port: int = 0) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((host, port))
    return sock


def _free_port() -> int:
    with _udp("127.0.0.1") as probe:
        port: int = probe.getsockname()[1]
    return port


def _read_all(sock: socket.socket, expect_last: bytes) -> list[bytes]:
    """Every datagram queued on ``sock`` up to and including ``expect_last`` (sent last, so queued last)."""
    got: list[bytes] = []

    def until_last() -> bool:
        try:
            got.append(sock.recv(100))
        except BlockingIOError:
            return False
        return got[-1] == expect_last

    assert wait_until(until_last, 5), got
    return got


@pytest.fixture(params=["explicit port", "kernel-chosen port"])
def rx(request: pytest.FixtureRequest) -> Iterator[socket.socket]:
    sock = _udp("127.0.0.1", _free_port() if request.param == "explicit port" else 0)
    sock.setblocking(False)
    try:
        yield sock
    finally:
        sock.close()


def test_a_disconnected_socket_hears_other_hosts_again_on_its_own_address(rx: socket.socket) -> None:
    bound = rx.getsockname()
    with _udp("127.0.0.1") as peer, _udp(OTHER_HOST) as stranger:
        rx.connect(peer.getsockname())
        stranger.sendto(b"too early", bound)  # filtered by the kernel while connected
        peer.sendto(b"peer 1", bound)
        assert _read_all(rx, b"peer 1") == [b"peer 1"]

        disconnect(rx)
        with pytest.raises(OSError, match="not connected"):
            rx.getpeername()
        assert rx.getsockname() == bound  # the same address and port, even one the kernel chose
        stranger.sendto(b"stranger", bound)
        peer.sendto(b"peer 2", bound)
        assert _read_all(rx, b"peer 2") == [b"stranger", b"peer 2"]
