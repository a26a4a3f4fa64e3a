"""lbmrd's effective settings: the command line over the XML ``<daemon>`` over the defaults.

The seed does not say which wins when a flag and its XML element disagree (spec 06 Part G.3); openum
follows the usual convention: **the command line wins**, then the configuration file, then the
defaults.  :func:`render_config` prints the result as an lbmrd XML file (``--dump-config``), each
``<daemon>`` setting annotated with where it came from; the output validates with ``-v``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final
from xml.sax.saxutils import escape, quoteattr

from openum._version import __version__
from openum.daemons.lbmrd._config import DAEMON_FIELDS, LbmrdConfig
from openum.daemons.lbmrd._forwarder import DEFAULT_MAX_CLIENTS, DEFAULT_MAX_CLIENTS_PER_HOST
from openum.daemons.lbmrd._values import (
    DEFAULT_ACTIVITY_MS,
    DEFAULT_INTERFACE,
    DEFAULT_PORT,
    DEFAULT_SOCKET_BUFFER,
    DEFAULT_TTL_S,
)

__all__ = ["COMMAND_LINE", "DEFAULT", "Settings", "effective_settings", "render_config"]

COMMAND_LINE: Final = "command line"
DEFAULT: Final = "default"

_DEFAULTS: Final[Mapping[str, object]] = {
    "activity": DEFAULT_ACTIVITY_MS,
    "interface": DEFAULT_INTERFACE,
    "port": DEFAULT_PORT,
    "ttl": DEFAULT_TTL_S,
    "log": None,
    "receiver_socket_buffer": DEFAULT_SOCKET_BUFFER,
    "send_socket_buffer": DEFAULT_SOCKET_BUFFER,
}
#: openum's own settings: flags only, because UM's lbmrd DTD has no element for them (a file with one
#: would not load in UM's lbmrd).
_FLAG_ONLY: Final[Mapping[str, tuple[object, str]]] = {
    "max_clients": (DEFAULT_MAX_CLIENTS, "clients at most"),
    "max_clients_per_host": (DEFAULT_MAX_CLIENTS_PER_HOST, "clients per host at most"),
}


@dataclass(frozen=True, slots=True)
class Settings:
    """What the daemon runs with.

    ``origins``: field -> ``"command line"``, ``FILE:LINE`` or ``"default"`` (fields not listed).
    """

    interface: str = DEFAULT_INTERFACE
    """Interface spec to bind (``-i``, ``<interface>``); resolved to an address at start-up."""
    port: int = DEFAULT_PORT
    """UDP port (``-p``, ``<port>``)."""
    ttl: int = DEFAULT_TTL_S
    """Client time-to-live, seconds (``-t``, ``<ttl>``)."""
    activity: int = DEFAULT_ACTIVITY_MS
    """Dead-client scan period, milliseconds (``-a``, ``<activity>``)."""
    log: str | None = None
    """Log file (``-L``, ``<log>``); None: standard error."""
    receiver_socket_buffer: int = DEFAULT_SOCKET_BUFFER
    """SO_RCVBUF, bytes (``-r``, ``<resolver_unicast_receiver_socket_buffer>``)."""
    send_socket_buffer: int = DEFAULT_SOCKET_BUFFER
    """SO_SNDBUF, bytes (``-s``, ``<resolver_unicast_send_socket_buffer>``)."""
    max_clients: int = DEFAULT_MAX_CLIENTS
    """Clients in the table at most, 0 = no limit (``--max-clients``; no XML element)."""
    max_clients_per_host: int = DEFAULT_MAX_CLIENTS_PER_HOST
    """Clients from one IP address at most, 0 = no limit (``--max-clients-per-host``; no XML element)."""
    origins: tuple[tuple[str, str], ...] = ()

    def origin(self, name: str) -> str:
        """Where setting ``name`` came from."""
        return dict(self.origins).get(name, DEFAULT)


def effective_settings(config: LbmrdConfig | None, overrides: Mapping[str, object | None]) -> Settings:
    """Merge: ``overrides`` (command line; None = not given) over ``config``'s ``<daemon>`` over defaults."""
    values: dict[str, object] = dict(_DEFAULTS)
    values.update({name: default for name, (default, _flag) in _FLAG_ONLY.items()})
    origins: dict[str, str] = {}
    if config is not None:
        lines = dict(config.daemon.lines)
        for name in _DEFAULTS:
            value = getattr(config.daemon, name)
            if value is not None:
                values[name] = value
                origins[name] = f"{config.source}:{lines[name]}" if name in lines else str(config.source)
    for name, value in overrides.items():
        if name not in _DEFAULTS and name not in _FLAG_ONLY:
            raise KeyError(f"unknown lbmrd setting {name!r}")
        if value is not None:
            values[name] = value
            origins[name] = COMMAND_LINE
    return Settings(**values, origins=tuple(origins.items()))  # type: ignore[arg-type]


_ELEMENT_OF: Final = {fieldname: element for element, fieldname in DAEMON_FIELDS.items()}


def render_config(settings: Settings, config: LbmrdConfig | None) -> str:
    """``settings`` and ``config``'s domains and transformations as an lbmrd XML file."""
    where = (
        f"the command line, then {config.source}, then the defaults"
        if config
        else ("the command line, then the defaults")
    )
    lines = [
        '<?xml version="1.0" encoding="UTF-8" ?>',
        f"<!-- openum lbmrd {__version__}: effective configuration from {_comment(where)} -->",
        '<lbmrd version="1.0">',
        "  <daemon>",
    ]
    for name in _DEFAULTS:
        element = _ELEMENT_OF[name]
        value = getattr(settings, name)
        origin = settings.origin(name)
        if value is None:
            lines.append(f"    <!-- <{element}> not set: the log goes to standard error -->")
            continue
        note = origin
        if name == "interface" and origin == DEFAULT:
            note = "default: openum keeps everything on this machine (UM's 0.0.0.0 = first interface)"
        unit = {"ttl": "seconds", "activity": "milliseconds"}.get(name, "")
        if name.endswith("socket_buffer"):
            unit = "bytes"
        note = f"{unit}; {note}" if unit else note
        lines.append(f"    <{element}>{escape(str(value))}</{element}> <!-- {_comment(note)} -->")
    for name, (_default, what) in _FLAG_ONLY.items():
        value = getattr(settings, name)
        shown = f"{value}" if value else "0 (no limit)"
        flag = name.replace("_", "-")
        note = f"{what}: {shown} ({settings.origin(name)}; the {flag} flag only: UM's lbmrd has no element)"
        lines.append(f"    <!-- {_comment(note)} -->")
    lines.append("  </daemon>")
    domains = config.domains if config else ()
    transforms = config.transforms if config else ()
    lines.append("  <domains>")
    if not domains:
        lines.append("    <!-- no NAT: the dummy domain of seed 16.2 -->")
        lines += ['    <domain name="dummy">', "      <network>0.0.0.0/32</network>", "    </domain>"]
    for d in domains:
        lines.append(f"    <domain name={quoteattr(d.name)}>")
        lines += [f"      <network>{net}</network>" for net in d.networks]
        lines.append("    </domain>")
    lines += ["  </domains>", "  <transformations>"]
    if not transforms:
        first = domains[0].name if domains else "dummy"
        lines += [
            f"    <transform source={quoteattr(first)} destination={quoteattr(first)}>",
            "      <rule>",
            '        <match address="0.0.0.0" port="0"/>',
            '        <replace address="0.0.0.0" port="0"/>',
            "      </rule>",
            "    </transform>",
        ]
    for t in transforms:
        lines.append(f"    <transform source={quoteattr(t.source)} destination={quoteattr(t.destination)}>")
        for r in t.rules:
            lines += [
                "      <rule>",
                f"        <match address={quoteattr(r.match.address)} "
                f"port={quoteattr(_port(r.match.port))}/>",
                f"        <replace address={quoteattr(r.replace.address)} "
                f"port={quoteattr(_port(r.replace.port))}/>",
                "      </rule>",
            ]
        lines.append("    </transform>")
    lines += ["  </transformations>", "</lbmrd>", ""]
    return "\n".join(lines)


def _port(port: int | None) -> str:
    return "*" if port is None else str(port)


def _comment(text: str) -> str:
    # "--" may not appear inside an XML comment
    return text.replace("--", "- -")
