"""The openum daemons (ARCHITECTURE.md 6): each a package with its XML configuration parser and a thin main.

- :mod:`openum.daemons.lbmrd`: the unicast UDP topic resolution daemon (seed chapters 15-16, 8.1.9-8.1.11).

Daemons sit above the library (config, wire, protocol, runtime, transport, monitor and the API) and
below the command line: ``openum lbmrd`` in :mod:`openum.cli` only registers and calls them.
"""
