"""Pure codecs for UM's wire formats (ARCHITECTURE.md 4): no sockets, threads or clocks."""

from openum.wire._common import WireError

__all__ = ["WireError"]
