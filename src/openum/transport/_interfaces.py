"""Local network interfaces: which IPv4 address an interface option names (UM "Specifying Interfaces").

An interface spec may be an IPv4 address, a CIDR network (the first local interface inside it, e.g.
``10.0.0.0/8``), a device name (optionally quoted: ``"eth0"``) or a DNS host name, also with a prefix
(``host.example.com/24``).  UM reads 0.0.0.0 as "the first interface found"; openum keeps everything on
this machine (ARCHITECTURE.md 5), so 0.0.0.0 and an unset interface mean 127.0.0.1.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import struct
import sys
from collections.abc import Sequence

__all__ = ["DEFAULT_INTERFACE", "InterfaceError", "local_addresses", "parse_network", "resolve_interface"]

#: Where openum binds when nothing else is configured: this machine only.
DEFAULT_INTERFACE = "127.0.0.1"


def parse_network(text: str) -> tuple[ipaddress.IPv4Network, bool]:
    """``<network>``: an IPv4 address (a /32) or CIDR network; ``(network, host bits were set)``.

    The short form of the seed's example, ``192.168.1/24``, fills the missing octets with 0.  DNS names
    are not allowed (seed §16.1.9).
    """
    value = text.strip()
    allowed = "allowed: an IPv4 address or a CIDR network such as 10.1.0.0/16 or 192.168.1/24 (no DNS names)"
    addr, slash, prefix = value.partition("/")
    octets = addr.split(".")
    if not slash:
        if len(octets) != 4:
            raise ValueError(f"network {value!r} is not valid; {allowed}")
    elif not 1 <= len(octets) <= 4 or not re.fullmatch(r"[0-9]{1,2}", prefix) or int(prefix) > 32:
        raise ValueError(f"network {value!r} is not valid; {allowed}")
    if not all(
        re.fullmatch(r"[0-9]{1,3}", o) and int(o) <= 255 and (o == "0" or o[0] != "0") for o in octets
    ):
        raise ValueError(f"network {value!r} is not valid; {allowed}")
    full = ".".join(octets + ["0"] * (4 - len(octets)))
    net = ipaddress.IPv4Network(f"{full}/{prefix if slash else 32}", strict=False)
    return net, net.network_address != ipaddress.IPv4Address(full)


_SIOCGIFADDR = 0x8915  # Linux <linux/sockios.h>: an interface's primary IPv4 address


class InterfaceError(ValueError):
    """The interface spec names no local IPv4 interface."""


def _device_address(name: str) -> str | None:
    """The primary IPv4 address of device ``name`` (Linux), or None."""
    if not sys.platform.startswith("linux"):
        return None
    import fcntl

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            req = struct.pack("256s", name.encode()[:15])
            res = fcntl.ioctl(sock.fileno(), _SIOCGIFADDR, req)
        except OSError:
            return None
    return socket.inet_ntoa(res[20:24])


def local_addresses() -> list[tuple[str, str]]:
    """``(device, IPv4 address)`` of every local interface with one, in the kernel's order."""
    out: list[tuple[str, str]] = []
    try:
        names = [name for _, name in socket.if_nameindex()]
    except OSError:
        names = []
    for name in names:
        addr = _device_address(name)
        if addr is not None:
            out.append((name, addr))
    if not out:  # not Linux: what the host name resolves to, and loopback
        out.append(("lo", DEFAULT_INTERFACE))
        try:
            for addr in socket.gethostbyname_ex(socket.gethostname())[2]:
                out.append(("?", addr))
        except OSError:
            pass
    return out


def _first_in(network: ipaddress.IPv4Network, spec: str, addresses: Sequence[tuple[str, str]]) -> str:
    for _, addr in addresses:
        if ipaddress.IPv4Address(addr) in network:
            return addr
    found = ", ".join(f"{dev} {addr}" for dev, addr in addresses) or "none"
    raise InterfaceError(
        f"interface {spec!r}: no local interface is on {network} (local interfaces: {found})"
    )


def resolve_interface(spec: str | None, addresses: Sequence[tuple[str, str]] | None = None) -> str:
    """The IPv4 address to bind for ``spec``; :class:`InterfaceError` when it names nothing local.

    ``addresses`` replaces :func:`local_addresses` (tests).
    """
    if spec is None:
        return DEFAULT_INTERFACE
    value = spec.strip().strip('"')
    if value in ("", "0.0.0.0"):
        return DEFAULT_INTERFACE
    local = local_addresses() if addresses is None else addresses
    host, slash, prefix = value.partition("/")
    try:
        if slash:
            net, _ = parse_network(value)
            return _first_in(net, spec, local)
        return str(ipaddress.IPv4Address(value))
    except ValueError as exc:
        if isinstance(exc, InterfaceError):
            raise
    # a device name
    for dev, addr in local:
        if dev == value:
            return addr
    # a DNS host name, optionally with a prefix length
    try:
        resolved = socket.gethostbyname(host)
    except OSError:
        devices = ", ".join(dev for dev, _ in local) or "none"
        raise InterfaceError(
            f"interface {spec!r} is not an IPv4 address, CIDR network, local device ({devices}) "
            "or resolvable host name"
        ) from None
    if not slash:
        return resolved
    return _first_in(ipaddress.IPv4Network(f"{resolved}/{prefix}", strict=False), spec, local)
