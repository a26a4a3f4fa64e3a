"""Which thread are we on? Guards for APIs that must not run inside a context-thread callback.

UM's context and XSP threads run callbacks that "must run very quickly and never block" and must not
create or delete most objects (seed 3.5).  openum marks the thread while it runs such callbacks and
refuses blocking calls from it with a clear error instead of deadlocking.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from openum._errors import InvalidStateError

__all__ = ["callback_scope", "forbid_in_callback", "in_context_callback"]

_local = threading.local()


def in_context_callback() -> bool:
    """True while this thread runs a callback on behalf of a context's event loop."""
    return getattr(_local, "depth", 0) > 0


@contextmanager
def callback_scope() -> Iterator[None]:
    _local.depth = getattr(_local, "depth", 0) + 1
    try:
        yield
    finally:
        _local.depth -= 1


def forbid_in_callback(api: str) -> None:
    """Raise :class:`InvalidStateError` when called from a context-thread callback."""
    if in_context_callback():
        raise InvalidStateError(
            f"{api} must not be called from a callback running on a context thread (it would block the "
            f"thread that delivers messages and timers, seed 3.5); deliver through an EventQueue and call "
            f"it from the dispatching thread, or use a non-blocking form"
        )
