"""Which thread are we on? Guards for APIs that must not run inside a context-thread callback.

UM's context and XSP threads run callbacks that "must run very quickly and never block" and must not
create or delete most objects (seed 3.5).  openum marks the thread while it runs such callbacks and
refuses blocking calls from it with a clear error instead of deadlocking.
"""

from __future__ import annotations

import threading

from openum._errors import InvalidStateError

__all__ = ["callback_scope", "callback_state", "forbid_in_callback", "in_context_callback"]


class _State(threading.local):
    depth = 0


_local = _State()

#: This thread's callback state: ``callback_state.depth > 0`` while it runs a context callback.  Hot
#: paths (one check per delivered message) read it directly instead of calling
#: :func:`in_context_callback` or entering a nested :func:`callback_scope`.
callback_state = _local


def in_context_callback() -> bool:
    """True while this thread runs a callback on behalf of a context's event loop."""
    return _local.depth > 0


class _CallbackScope:
    """``with callback_scope():`` marks the thread as running a context callback (nested scopes are
    allowed).  The event loop enters the scope once for as long as a thread runs it (everything it runs is
    a context callback); event queues enter it around each event they dispatch."""

    __slots__ = ()

    def __enter__(self) -> None:
        _local.depth += 1

    def __exit__(self, *exc: object) -> None:
        _local.depth -= 1


_SCOPE = _CallbackScope()


def callback_scope() -> _CallbackScope:
    return _SCOPE


def forbid_in_callback(api: str) -> None:
    """Raise :class:`InvalidStateError` when called from a context-thread callback."""
    if in_context_callback():
        raise InvalidStateError(
            f"{api} must not be called from a callback running on a context thread (it would block the "
            f"thread that delivers messages and timers, seed 3.5); deliver through an EventQueue and call "
            f"it from the dispatching thread, or use a non-blocking form"
        )
