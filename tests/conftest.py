"""Fixtures shared by every test directory."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.pubsub import Processes, processes


@pytest.fixture
def procs() -> Iterator[Processes]:
    """``openum`` child processes, stopped and reaped when the test ends."""
    yield from processes()
