"""The stream reader (no JVM: its planning methods called as Spark calls them) when the spool's disk
fills up, with a real receiver fed by a real source over TCP on 127.0.0.1 and the spool on a small
tmpfs: the next ``latestOffset`` fails with an error naming the spool directory and the cause (that is
the query's error), ``status.json`` says ``disk_full`` with the count of messages not spooled, and the
offsets handed out before cover only what is on disk.  Also: ``failOnDataLoss`` is an option of
reading that takes effect.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import openum
from openum import ConfigError
from openum.spark._options import parse_read_options
from openum.spark._spool import Spool, SpoolDiskFullError, decode_records
from tests.helpers import wait_until
from tests.integration.pubsub import Ports, SourceEvents
from tests.spark.conftest import mounted_tmpfs, um_options

pytest.importorskip("pyspark", reason="the stream reader is a PySpark data source: needs pyspark")
pytest.importorskip("pyarrow", reason="the stream reader needs pyarrow")

WAIT = 30.0  # a deadline only


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 256 KiB tmpfs of its own, unmounted afterwards (needs root)."""
    with mounted_tmpfs(tmp_path, "256k") as mnt:
        yield mnt


def status(spool_dir: Path) -> dict[str, Any]:
    try:
        return dict(json.loads((spool_dir / "status.json").read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return {}


def test_a_full_disk_fails_the_query_with_the_spool_directory_and_the_cause(small_tmpfs: Path) -> None:
    from openum.spark._source import SCHEMA, OpenUMStreamReader

    ports = Ports.allocate()
    spool_dir = small_tmpfs / "spool"
    opts = parse_read_options(
        {"topic": "spark/full", "spoolDir": str(spool_dir), "maxSpoolBytes": "1g", **um_options(ports)}
    )
    reader = OpenUMStreamReader(opts, SCHEMA)
    events = SourceEvents()
    sent = 0
    try:
        start = reader.initialOffset()  # starts the receiver, as Spark's first call does
        with openum.Context(options=ports.options()) as ctx:
            src = ctx.create_source("spark/full", event_callback=events)
            assert events.wait(openum.SourceEvent.CONNECT, 1, WAIT), "the reader's receiver never joined"
            acked = start
            for _ in range(400):  # 400 KB into a 256 KiB file system
                src.send(sent.to_bytes(8, "big").ljust(1000, b"x"))
                sent += 1
                if sent == 50:
                    src.flush()
                    assert wait_until(lambda: reader._runtime().received == 50, WAIT)
                    acked = reader.latestOffset(start, None)  # an offset Spark would log
            src.flush()

            def accounted() -> bool:  # every message sent is either spooled or counted as not spooled
                spool = status(spool_dir).get("spool", {})
                return bool(spool.get("disk_full")) and spool["tail"] + spool["disk_dropped"] == sent

            assert wait_until(accounted, WAIT), status(spool_dir)
        with pytest.raises(SpoolDiskFullError) as failure:
            reader.latestOffset(acked, None)  # the query fails here, with this message
        text = str(failure.value)
        assert str(spool_dir) in text
        assert "No space left on device" in text or "short write" in text
        assert "restart the query from its checkpoint" in text
        spool_stats = status(spool_dir)["spool"]
        assert spool_stats["disk_full"] and spool_stats["disk_dropped"] > 0
        assert spool_stats["tail"] == reader._runtime().received < sent
        assert acked["messages"] == 50
    finally:
        reader.stop()
    # Everything acknowledged (the offset handed out) is on disk and reads back whole.
    with Spool(spool_dir) as spool:
        assert not spool.damage
        ((_, _, blob),) = spool.read(start, acked, 1000)
        assert [int.from_bytes(r.payload[:8], "big") for r in decode_records(blob)] == list(range(50))


def test_fail_on_data_loss_is_an_option_of_reading() -> None:
    assert parse_read_options({"topic": "t"}).fail_on_data_loss is True
    assert parse_read_options({"topic": "t", "failondataloss": "false"}).fail_on_data_loss is False
    with pytest.raises(ConfigError, match="'failOnDataLoss': 'maybe' is not one of true, false"):
        parse_read_options({"topic": "t", "failOnDataLoss": "maybe"})
