"""Spark tests: one real local SparkSession (``local[2]``) shared by every test module here.

The session is created once (it takes several seconds) and handed to each module through the
module-scoped ``spark`` fixture.  Tests that need it are marked ``spark``; they are skipped, with the
reason printed (``-ra``), only when PySpark or Java is genuinely missing.  Every test gets its own
resolver and transport ports (``ports``), passed to the data source as ``option.<scope>.<name>``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.pubsub import Ports

PANDAS_WARNING = "ignore:PySpark does not yet fully support pandas:FutureWarning"


def spark_unavailable() -> str | None:
    """Why Spark cannot run here, or None."""
    try:
        from openum.spark import SparkUnavailableError, check_spark
    except ImportError as exc:  # pragma: no cover - openum.spark imports without pyspark
        return str(exc)
    try:
        check_spark()
    except (ImportError, SparkUnavailableError) as exc:
        return str(exc)
    return None


@pytest.fixture(scope="session")
def _spark_session() -> Iterator[Any]:
    reason = spark_unavailable()
    if reason is not None:
        pytest.skip(f"Spark cannot run here: {reason}")
    from openum.spark import spark_session

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning)
        spark = spark_session(
            "openum-tests",
            master="local[2]",
            log_level="ERROR",
            conf={"spark.sql.shuffle.partitions": "2", "spark.sql.streaming.numRecentProgressUpdates": "200"},
        )
    yield spark
    spark.stop()


@pytest.fixture(scope="module")
def spark(_spark_session: Any) -> Any:
    """The shared SparkSession (local[2]) with the openum data source registered."""
    return _spark_session


@pytest.fixture
def ports() -> Ports:
    return Ports.allocate()


def um_options(ports: Ports) -> dict[str, str]:
    """A test's ports as data source options ``option.<scope>.<name>``."""
    out: dict[str, str] = {}
    for line in ports.options():
        scope, name, value = line.split(None, 2)
        out[f"option.{scope}.{name}"] = value
    return out


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    shutil.rmtree(tmp_path, ignore_errors=True)


@contextlib.contextmanager
def mounted_tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (e.g. ``"192k"``) mounted at ``where/tmpfs``, unmounted afterwards: a disk
    that fills up.  Skips the test when not root or when mounting fails."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs (a disk that fills up) needs root")
    mnt = where / "tmpfs"
    mnt.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)],
        check=False,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)
