"""Conformance tests need tshark; without it they fail loudly (or skip when asked to explicitly)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conformance.tshark import Tshark, TsharkMissingError, tshark_path


@pytest.fixture(scope="session")
def tshark_bin() -> str:
    try:
        return tshark_path()
    except TsharkMissingError as exc:
        if os.environ.get("OPENUM_SKIP_TSHARK") == "1":
            pytest.skip(f"OPENUM_SKIP_TSHARK=1: {exc}")
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture
def tshark(tshark_bin: str) -> Tshark:
    return Tshark()


@pytest.fixture
def pcap_dir(tmp_path: Path) -> Path:
    return tmp_path
