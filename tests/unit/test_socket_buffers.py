"""Socket buffer sizes of the LBT-RM/LBT-RU sockets: read back, forced when capped, a short one logged."""

from __future__ import annotations

import socket
import sys
from typing import Any

import pytest

from openum.transport._reliable import set_buffer

LINUX = sys.platform.startswith("linux")


class Log:
    def __init__(self) -> None:
        self.warnings: list[str] = []

    def warning(self, fmt: str, *args: Any) -> None:
        self.warnings.append(fmt % args)


class CappedSocket:
    """A socket whose kernel caps buffers at ``cap`` bytes and may refuse the FORCE options."""

    def __init__(self, cap: int, force_allowed: bool) -> None:
        self.cap = cap
        self.force_allowed = force_allowed
        self.size = 0
        self.calls: list[int] = []

    def setsockopt(self, level: int, option: int, value: int) -> None:
        self.calls.append(option)
        if option in (socket.SO_RCVBUF, socket.SO_SNDBUF):
            self.size = min(value, self.cap)
        elif self.force_allowed:
            self.size = value
        else:
            raise PermissionError(1, "Operation not permitted")

    def getsockopt(self, level: int, option: int) -> int:
        return self.size * 2 if LINUX else self.size  # Linux reports double


def test_zero_leaves_the_system_default() -> None:
    sock = CappedSocket(1 << 20, True)
    assert set_buffer(sock, socket.SO_RCVBUF, 0, Log(), "x") == 0  # type: ignore[arg-type]
    assert sock.calls == []


def test_a_size_within_the_cap_is_set_without_a_warning() -> None:
    log = Log()
    sock = CappedSocket(1 << 20, False)
    assert set_buffer(sock, socket.SO_RCVBUF, 65536, log, "x") == 65536  # type: ignore[arg-type]
    assert log.warnings == []


@pytest.mark.skipif(not LINUX, reason="Linux's SO_RCVBUFFORCE")
def test_a_capped_size_is_forced_when_permitted() -> None:
    log = Log()
    sock = CappedSocket(1 << 20, True)
    assert set_buffer(sock, socket.SO_RCVBUF, 8 << 20, log, "x") == 8 << 20  # type: ignore[arg-type]
    assert sock.calls == [socket.SO_RCVBUF, 33]  # SO_RCVBUFFORCE
    assert log.warnings == []


def test_a_capped_size_that_cannot_be_forced_is_logged_with_the_sysctl_to_raise() -> None:
    log = Log()
    sock = CappedSocket(1 << 20, False)
    assert set_buffer(sock, socket.SO_RCVBUF, 8 << 20, log, "LBT-RM group") == 1 << 20  # type: ignore[arg-type]
    assert len(log.warnings) == 1
    text = log.warnings[0]
    assert "LBT-RM group" in text and "1048576" in text and "8388608" in text
    assert "net.core.rmem_max" in text


def test_a_real_socket_reports_what_the_kernel_gave() -> None:
    log = Log()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        got = set_buffer(sock, socket.SO_SNDBUF, 256 * 1024, log, "x")
        # As much as asked, or (capped, not forced) less with a warning naming wmem_max.
        assert got == 256 * 1024 or (0 < got < 256 * 1024 and "wmem_max" in log.warnings[0])
