"""The event loop's deadline descriptor: a Linux ``timerfd`` armed at the next timer's deadline.

Why not epoll's timeout: the kernel arms a high-resolution timer for every timed wait and removes it
when the wait ends early, and whenever that timer is due before the next scheduler tick, arming and
removing it reprogram the CPU's timer hardware.  In a virtual machine that is a write to the
TSC-deadline register, which traps to the hypervisor.  A loop waits once per message it answers, so
for the last tick period before each of its timers (4 ms at HZ=250, and a context always has timers:
topic resolution, session messages) every wait paid for it: on this project's VM round trips ran
2-2.5 times slower for those milliseconds, openum's longest runs of slow round trips
(docs/performance.md, pass 13).  Armed on a timerfd, the deadline is programmed once, when it
changes, and the loop waits without a timeout.

``deadline_fd()`` returns None where there is no timerfd (not Linux, or no C library to call: ``os``
wraps timerfd from Python 3.13 only); the loop then waits with a timeout as before.
"""

from __future__ import annotations

import ctypes
import os
import time

from openum.runtime._libc import LIBC, libc_error

__all__ = ["DeadlineFd", "deadline_fd"]

_NS_PER_S = 1_000_000_000
_CLOCK_MONOTONIC = 1  # <time.h>
_TFD_TIMER_ABSTIME = 1  # <sys/timerfd.h>; TFD_NONBLOCK and TFD_CLOEXEC are O_NONBLOCK and O_CLOEXEC


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


class DeadlineFd:
    """A non-blocking timerfd on ``CLOCK_MONOTONIC`` (the clock of ``time.monotonic_ns``), one-shot.

    :attr:`armed_ns` is the deadline it is armed for (0: none).  It becomes readable at that deadline;
    :meth:`clear` reads it and forgets the deadline."""

    def __init__(self) -> None:
        fd = int(LIBC.timerfd_create(_CLOCK_MONOTONIC, os.O_NONBLOCK | os.O_CLOEXEC))
        if fd < 0:
            raise libc_error("timerfd_create")
        self.fd = fd
        self.armed_ns = 0
        self._spec = _Itimerspec()
        self._spec_ref = ctypes.byref(self._spec)

    def arm(self, deadline_ns: int) -> None:
        """Become readable at ``deadline_ns`` (``time.monotonic_ns`` time; replaces any earlier arming)."""
        deadline_ns = max(1, deadline_ns)  # a zero expiry would disarm it
        value = self._spec.it_value
        value.tv_sec, value.tv_nsec = divmod(deadline_ns, _NS_PER_S)
        if LIBC.timerfd_settime(self.fd, _TFD_TIMER_ABSTIME, self._spec_ref, None) != 0:
            raise libc_error("timerfd_settime")
        self.armed_ns = deadline_ns

    def clear(self) -> None:
        """The descriptor fired: read its expiry count so it is no longer readable."""
        self.armed_ns = 0
        try:
            os.read(self.fd, 8)
        except BlockingIOError:
            pass  # re-armed since it fired, or read already

    def close(self) -> None:
        os.close(self.fd)


def _declare() -> bool:
    """Give the C library's timerfd functions their prototypes; False where there are none."""
    if LIBC is None or time.get_clock_info("monotonic").implementation != "clock_gettime(CLOCK_MONOTONIC)":
        return False
    try:
        create, settime = LIBC.timerfd_create, LIBC.timerfd_settime
    except AttributeError:  # a C library without timerfd
        return False
    create.argtypes, create.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    settime.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(_Itimerspec), ctypes.c_void_p]
    settime.restype = ctypes.c_int
    return True


_HAVE_TIMERFD = _declare()


def deadline_fd() -> DeadlineFd | None:
    """A :class:`DeadlineFd`, or None where the platform has no timerfd."""
    if not _HAVE_TIMERFD:
        return None
    try:
        return DeadlineFd()
    except OSError:  # the kernel refuses (e.g. out of descriptors): wait with timeouts instead
        return None
