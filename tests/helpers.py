"""Small helpers shared by tests: waiting on conditions without sleeping blindly."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

DEFAULT_TIMEOUT = 10.0


def wait_until(
    predicate: Callable[[], bool], timeout: float = DEFAULT_TIMEOUT, interval: float = 0.002
) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` seconds pass; return its last value.

    For state that offers no event to wait on (a queue size, a counter); prefer ``Event.wait``.
    """
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return bool(predicate())
        pause.wait(interval)
