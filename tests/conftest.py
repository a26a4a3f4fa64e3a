"""Fixtures shared by every test directory."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.pubsub import Contexts, Ports, Processes, processes


@pytest.fixture
def procs() -> Iterator[Processes]:
    """``openum`` child processes, stopped and reaped when the test ends."""
    yield from processes()


@pytest.fixture
def ports() -> Ports:
    """Resolver, transport and request ports of this test's own (``Ports.allocate``)."""
    return Ports.allocate()


@pytest.fixture
def contexts(ports: Ports) -> Iterator[Contexts]:
    """Contexts on this test's ports, closed (with everything in them) when it ends."""
    c = Contexts(ports)
    try:
        yield c
    finally:
        c.close()
