"""lbmrd: the unicast UDP topic resolution daemon (seed 8.1.9-8.1.11, chapters 15-16; spec 06 PART C).

Contexts that cannot use multicast send their topic resolution datagrams (TIRs, TQRs, keepalives) to
lbmrd, named by ``context resolver_unicast_daemon ADDR:PORT``; lbmrd keeps a table of its clients and
forwards every TIR and TQR to all the others, rewriting TIR addresses for NAT between network domains.
It keeps no topic state.

- :class:`Forwarder`: the sans-I/O core (client table, keepalives, dead-client scan, NAT rewriting,
  :class:`ForwarderStatistics`), driven with ``now_ns``;
- :func:`parse_config_file` / :func:`parse_config_text`: the XML configuration (DTD of seed §16.3,
  :data:`DTD`), errors as ``FILE:LINE: message``;
- :func:`effective_settings`: the command line over the file over the defaults;
- :func:`main` / :func:`run` / :func:`serve`: the process (``openum lbmrd``).
"""

from openum.daemons.lbmrd._config import (
    DTD,
    DaemonSettings,
    Domain,
    Endpoint,
    LbmrdConfig,
    Rule,
    Transform,
    parse_config_file,
    parse_config_text,
)
from openum.daemons.lbmrd._forwarder import Address, Client, Forwarder, ForwarderStatistics
from openum.daemons.lbmrd._interface import InterfaceError, resolve_interface
from openum.daemons.lbmrd._main import DESCRIPTION, EPILOG, add_arguments, main, run, serve
from openum.daemons.lbmrd._settings import Settings, effective_settings, render_config
from openum.daemons.lbmrd._values import (
    DEFAULT_ACTIVITY_MS,
    DEFAULT_INTERFACE,
    DEFAULT_PORT,
    DEFAULT_SOCKET_BUFFER,
    DEFAULT_TTL_S,
)

__all__ = [
    "DEFAULT_ACTIVITY_MS",
    "DEFAULT_INTERFACE",
    "DEFAULT_PORT",
    "DEFAULT_SOCKET_BUFFER",
    "DEFAULT_TTL_S",
    "DESCRIPTION",
    "DTD",
    "EPILOG",
    "Address",
    "Client",
    "DaemonSettings",
    "Domain",
    "Endpoint",
    "Forwarder",
    "ForwarderStatistics",
    "InterfaceError",
    "LbmrdConfig",
    "Rule",
    "Settings",
    "Transform",
    "add_arguments",
    "effective_settings",
    "main",
    "parse_config_file",
    "parse_config_text",
    "render_config",
    "resolve_interface",
    "run",
    "serve",
]
