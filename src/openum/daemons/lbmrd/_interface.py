"""Which local IPv4 address lbmrd binds: ``-i``/``<interface>`` (seed §15.1, "Specifying Interfaces").

The resolution rules live in :mod:`openum.transport._interfaces`, shared with the library's own sockets.
"""

from __future__ import annotations

from openum.transport._interfaces import InterfaceError, local_addresses, resolve_interface

__all__ = ["InterfaceError", "local_addresses", "resolve_interface"]
