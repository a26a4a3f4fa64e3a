"""Transports: bind protocol state machines to sockets (ARCHITECTURE.md 2)."""
