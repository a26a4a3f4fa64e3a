"""Values of lbmrd's settings: defaults and the parsers the XML file and the command line share.

Each parser takes text and returns the value or raises :class:`ValueError` whose message names the
value (a long one shortened to its head and size) and what is allowed (seed chapters 15-16; spec 06
PART C.1, C.3).
"""

from __future__ import annotations

import ipaddress
import re
from typing import Final

from openum._errors import shorten_repr
from openum.transport._interfaces import parse_network

__all__ = [
    "DEFAULT_ACTIVITY_MS",
    "DEFAULT_INTERFACE",
    "DEFAULT_PORT",
    "DEFAULT_SOCKET_BUFFER",
    "DEFAULT_TTL_S",
    "INT_MAX",
    "parse_host",
    "parse_interface",
    "parse_limit",
    "parse_log",
    "parse_network",
    "parse_port",
    "parse_positive",
    "parse_rule_port",
]

#: seed §15.1 / §16.1.15: the UDP port clients name in ``resolver_unicast_daemon``.
DEFAULT_PORT: Final = 15380
#: seed §15.1: client time-to-live, seconds (``-t``).
DEFAULT_TTL_S: Final = 60
#: seed §15.1 / §16.1.17: period of the dead-client check, milliseconds (``-a``).
DEFAULT_ACTIVITY_MS: Final = 60000
#: seed §16.1.11-12: send and receive socket buffers, bytes.
DEFAULT_SOCKET_BUFFER: Final = 1048576
#: UM's default 0.0.0.0 means "the first interface found" (seed §15.1); openum keeps everything on
#: this machine (ARCHITECTURE.md 5), so the first interface is the loopback one.
DEFAULT_INTERFACE: Final = "127.0.0.1"

#: the largest value a C int socket option or counter setting takes.
INT_MAX: Final = 2**31 - 1

# ---- value parsers (shared with the command line); each raises ValueError naming what is allowed


def parse_positive(text: str, what: str, unit: str = "", maximum: int = INT_MAX) -> int:
    """A decimal integer from 1 to ``maximum``; surrounding whitespace is allowed (seed §16.1.11)."""
    value = text.strip()
    unit_text = f" ({unit})" if unit else ""
    if not re.fullmatch(r"[0-9]+", value):
        raise ValueError(
            f"{what} {shorten_repr(value)} is not an integer; "
            f"allowed: an integer from 1 to {maximum}{unit_text}"
        )
    number = int(value)
    if not 1 <= number <= maximum:
        raise ValueError(
            f"{what} {number} is out of range; allowed: an integer from 1 to {maximum}{unit_text}"
        )
    return number


def parse_limit(text: str, what: str) -> int:
    """A bound on a table: a decimal integer from 0 (no bound) to :data:`INT_MAX`."""
    value = text.strip()
    allowed = f"allowed: an integer from 0 (no limit) to {INT_MAX}"
    if not re.fullmatch(r"[0-9]+", value):
        raise ValueError(f"{what} {shorten_repr(value)} is not an integer; {allowed}")
    number = int(value)
    if number > INT_MAX:
        raise ValueError(f"{what} {number} is out of range; {allowed}")
    return number


def parse_port(text: str) -> int:
    """A UDP port for lbmrd: 1..65535 (seed §16.1.15)."""
    return parse_positive(text, "port", maximum=65535)


def parse_rule_port(text: str) -> int | None:
    """A ``<match>``/``<replace>`` port: ``*`` (None) or 0..65535 (the dummy file uses 0, §16.2)."""
    value = text.strip()
    if value == "*":
        return None
    if not re.fullmatch(r"[0-9]+", value) or int(value) > 65535:
        raise ValueError(
            f"port {shorten_repr(value)} is not valid; allowed: '*' or an integer from 0 to 65535"
        )
    return int(value)


def parse_host(text: str) -> str:
    """A dotted-decimal IPv4 host address (seed §16.1.5-6: "only in dotted-decimal")."""
    value = text.strip()
    if re.fullmatch(r"[0-9]{1,3}(\.[0-9]{1,3}){3}", value):
        try:
            return str(ipaddress.IPv4Address(value))
        except ipaddress.AddressValueError:
            pass
    raise ValueError(
        f"address {shorten_repr(value)} is not valid; "
        "allowed: a dotted-decimal IPv4 host address such as 10.1.1.50"
    )


def parse_interface(text: str) -> str:
    """An interface spec (seed §15.1 "Specifying Interfaces"): IP, CIDR, device name or host name.

    Only the form is checked here; what it names is looked up when the daemon binds.
    """
    value = text.strip()
    allowed = (
        "allowed: an IPv4 address, a CIDR network (10.0.0.0/8), a device name (eth0, or quoted) "
        "or a host name (host.example.com/24)"
    )
    bare = value.strip('"')
    if not bare or any(c.isspace() for c in bare):
        raise ValueError(f"interface {shorten_repr(value)} is not valid; {allowed}")
    _, slash, prefix = bare.partition("/")
    if slash and (not re.fullmatch(r"[0-9]{1,2}", prefix) or int(prefix) > 32):
        raise ValueError(f"interface {shorten_repr(value)} has a bad prefix length; {allowed}")
    return value


def parse_log(text: str) -> str:
    value = text.strip()
    if not value:
        raise ValueError("log file name is empty; allowed: a file name")
    return value
