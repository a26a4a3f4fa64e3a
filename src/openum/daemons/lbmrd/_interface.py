"""Which local IPv4 address lbmrd binds: ``-i``/``<interface>`` (seed §15.1, "Specifying Interfaces").

The spec may be an IPv4 address, a CIDR network (the first local interface inside it), a device name
(optionally quoted: ``"eth0"``) or a DNS host name, also with a prefix (``host.example.com/24``: the
first local interface on that host's network).  UM reads 0.0.0.0 as "the first interface found"
(not INADDR_ANY); openum keeps everything on this machine (ARCHITECTURE.md 5), so 0.0.0.0 and an
unset interface mean 127.0.0.1.
"""

from __future__ import annotations

import ipaddress
import socket
import struct
import sys
from collections.abc import Sequence

from openum.daemons.lbmrd._values import DEFAULT_INTERFACE, parse_network

__all__ = ["InterfaceError", "local_addresses", "resolve_interface"]

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
