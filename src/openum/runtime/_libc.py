"""The C library, for the few Linux calls Python's standard library does not wrap in 3.11
(``connect`` to an ``AF_UNSPEC`` address, ``timerfd_create``/``timerfd_settime``).

:data:`LIBC` is None where there is none to call (not Linux, or no shared C library).
"""

from __future__ import annotations

import ctypes
import os
import sys
from typing import Any, Final

__all__ = ["LIBC", "libc_error"]


def _load() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


LIBC: Final = _load()


def libc_error(what: str) -> OSError:
    """The ``OSError`` for the C library call ``what`` that just failed (its ``errno``)."""
    code = ctypes.get_errno()
    return OSError(code, f"{what}: {os.strerror(code)}")
