"""Errors raised by openum, each carrying a UM error number (seed 3.5.1, 2.11.2).

UM's C API returns ``LBM_FAILURE`` (-1) and leaves the reason in ``lbm_errnum()``; openum raises an
exception whose ``errnum`` is that number instead.  The numbers follow UM's ``lbm.h``.

Two families are kept apart (PRACTICES.md 5): *local misuse* (a bad option, an API called in the wrong
state or thread) and *remote garbage* (a malformed datagram: :class:`openum.wire.WireError`, which the
library counts and drops rather than letting it reach the application).

This module imports nothing from openum so that every layer may use it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

#: UM's error numbers (``lbm.h`` of UM 6.12, lines 143-167), for code that compares ``err.errnum``.
LBM_FAILURE = -1
LBM_EINVAL = 1
LBM_EWOULDBLOCK = 2
LBM_ENOMEM = 3
LBM_EOP = 4
LBM_EOS = 5
LBM_ETIMEDOUT = 6
LBM_EDAEMONCONN = 7
LBM_EUMENOREG = 8
LBM_EOPNOTSUPP = 9
LBM_EINPROGRESS = 10
LBM_ENO_QUEUE_REG = 11
LBM_ENO_STORE_REG = 12
LBM_EMSG_SELECTOR = 14

ERRNUM_NAMES: dict[int, str] = {
    LBM_EINVAL: "LBM_EINVAL",
    LBM_EWOULDBLOCK: "LBM_EWOULDBLOCK",
    LBM_ENOMEM: "LBM_ENOMEM",
    LBM_EOP: "LBM_EOP",
    LBM_EOS: "LBM_EOS",
    LBM_ETIMEDOUT: "LBM_ETIMEDOUT",
    LBM_EDAEMONCONN: "LBM_EDAEMONCONN",
    LBM_EUMENOREG: "LBM_EUMENOREG",
    LBM_EOPNOTSUPP: "LBM_EOPNOTSUPP",
    LBM_EINPROGRESS: "LBM_EINPROGRESS",
    LBM_ENO_QUEUE_REG: "LBM_ENO_QUEUE_REG",
    LBM_ENO_STORE_REG: "LBM_ENO_STORE_REG",
    LBM_EMSG_SELECTOR: "LBM_EMSG_SELECTOR",
}


#: an echoed value longer than this (characters) is shortened in messages, its size given instead.
ECHO_LIMIT = 80
#: a message longer than this (characters) keeps only its head (a last resort: values are shortened first).
MESSAGE_LIMIT = 2000
#: a run of non-blank characters longer than this in a message is an echoed value: it is shortened.
_LONG_RUN = re.compile(r"\S{201,}")


def shorten(text: str, limit: int = ECHO_LIMIT) -> str:
    """``text``, or its first ``limit`` characters then ``... (N bytes)``, N being its UTF-8 size."""
    if len(text) <= limit:
        return text
    size = len(text.encode("utf-8", "surrogatepass"))
    return f"{text[:limit]}... ({size} bytes)"


def shorten_repr(text: str, limit: int = ECHO_LIMIT) -> str:
    """``repr(text)``, or the repr of its first ``limit`` characters then ``... (N bytes)``."""
    if len(text) <= limit:
        return repr(text)
    size = len(text.encode("utf-8", "surrogatepass"))
    return f"{text[:limit]!r}... ({size} bytes)"


def _shorten_message(message: str, *echoed: Any) -> str:
    """``message`` with long echoes of the ``echoed`` values (and any other long run) shortened."""
    if len(message) <= ECHO_LIMIT:
        return message
    for value in echoed:
        if not isinstance(value, str) or len(value) <= ECHO_LIMIT:
            continue
        for text in dict.fromkeys((value, value.strip(), value.strip().lower())):
            if len(text) > ECHO_LIMIT:
                message = message.replace(repr(text), shorten_repr(text)).replace(text, shorten(text))
    message = _LONG_RUN.sub(lambda m: shorten(m.group()), message)
    return shorten(message, MESSAGE_LIMIT)


class OpenUMError(Exception):
    """Base class of every error openum raises on purpose.

    ``errnum`` is UM's error number (``lbm_errnum()``); ``str(err)`` is UM's ``lbm_errmsg()``.
    """

    errnum: int = LBM_EOP

    def __init__(self, message: str, *, errnum: int | None = None) -> None:
        super().__init__(message)
        if errnum is not None:
            self.errnum = errnum

    @property
    def errname(self) -> str:
        """The symbolic name of ``errnum`` (``LBM_EINVAL``, ...)."""
        return ERRNUM_NAMES.get(self.errnum, f"LBM_E{self.errnum}")


class WouldBlock(OpenUMError):  # noqa: N818 - UM's name (LBM_EWOULDBLOCK)
    """A non-blocking call could not proceed now (``LBM_EWOULDBLOCK``).

    For sends: a rate limiter or flow control refused the message; a ``WAKEUP`` source event follows
    when sending may resume (seed 2.11.2).
    """

    errnum = LBM_EWOULDBLOCK


class ConfigError(OpenUMError, ValueError):
    """A configuration option, scope or value was refused (``LBM_EINVAL``).

    Every field that is known is set: ``option``, ``scope``, ``value``, ``allowed`` (a human
    description of what is accepted), ``source`` (a file name, ``--option``, a dict...) and ``line``.
    The message never echoes a long value whole: a value over :data:`ECHO_LIMIT` characters is shown
    as its head and its size (``'9999...'... (20000000 bytes)``); ``value`` keeps it whole.
    ``errors`` holds every problem found when a whole file or mapping was checked at once; nothing of
    that file or mapping was applied.
    """

    errnum = LBM_EINVAL

    def __init__(
        self,
        message: str,
        *,
        option: str | None = None,
        scope: str | None = None,
        value: Any = None,
        allowed: str | None = None,
        source: str | None = None,
        line: int | None = None,
        suggestions: Sequence[str] = (),
        errors: Sequence[ConfigError] = (),
    ) -> None:
        self.reason = _shorten_message(message, value, option, scope)
        self.option = option
        self.scope = scope
        self.value = value
        self.allowed = allowed
        self.source = source
        self.line = line
        self.suggestions = tuple(suggestions)
        self.errors: tuple[ConfigError, ...] = tuple(errors) or (self,)
        super().__init__(self._render())

    def _render(self) -> str:
        if len(self.errors) > 1 or self.errors[0] is not self:
            return "\n".join(e.location_message() for e in self.errors)
        return self.location_message()

    def location_message(self) -> str:
        """``FILE:LINE: message`` (or just the message when it came from no file)."""
        if self.source is not None and self.line is not None:
            return f"{self.source}:{self.line}: {self.reason}"
        if self.source is not None:
            return f"{self.source}: {self.reason}"
        return self.reason

    @classmethod
    def collect(cls, errors: Sequence[ConfigError]) -> ConfigError:
        """One error standing for several; its fields are those of the first."""
        if len(errors) == 1:
            return errors[0]
        first = errors[0]
        return cls(
            first.reason,
            option=first.option,
            scope=first.scope,
            value=first.value,
            allowed=first.allowed,
            source=first.source,
            line=first.line,
            suggestions=first.suggestions,
            errors=errors,
        )


class InvalidStateError(OpenUMError):
    """An API was called on an object in a state or thread that forbids it (seed 3.0, 3.5).

    Examples: closing a context that still has open sources, creating a receiver on a closed context,
    calling a blocking API from a callback running on the context thread.
    """

    errnum = LBM_EOP


class ClosedError(InvalidStateError):
    """The object (context, source, receiver, event queue) has been closed."""


class TimedOutError(OpenUMError, TimeoutError):
    """An operation did not complete in the time allowed (``LBM_ETIMEDOUT``)."""

    errnum = LBM_ETIMEDOUT


class SystemCallError(OpenUMError):
    """An operating-system call failed (``LBM_EOS``); ``__cause__`` holds the ``OSError``."""

    errnum = LBM_EOS


class NoMemoryError(OpenUMError, MemoryError):
    """A resource limit was reached (``LBM_ENOMEM``): a buffer pool, a spool, a table size."""

    errnum = LBM_ENOMEM


class NotSupportedError(OpenUMError):
    """The operation is not supported by this object or transport (``LBM_EOPNOTSUPP``)."""

    errnum = LBM_EOPNOTSUPP


class DaemonConnectionError(OpenUMError):
    """A daemon (lbmrd, SRS, store) could not be reached or dropped the connection (``LBM_EDAEMONCONN``)."""

    errnum = LBM_EDAEMONCONN
