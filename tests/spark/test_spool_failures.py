"""The Spark reader's spool when its disk fails it: a damaged segment, a lost index, a full disk.

- One flipped byte anywhere in a record loses only that record: reopening keeps the 99 others
  (resynchronising on the next valid frame, as Kafka's log recovery does) and names the lost position;
  a batch over it fails with a clear error, or with failOnDataLoss false goes on without it, counted.
- A deleted index.json is rebuilt from the segments: every record is kept, the checkpoint's offsets
  still fit; segments of different spools are refused, and nothing is ever deleted.
- A full disk (a real small tmpfs, and an injected short write): the record that did not fit is not
  spooled, the spool says it is full (stats and a clear error from the next offset), and every record
  of every offset handed out before is on disk, whole.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import random
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from openum.spark._spool import (
    Spool,
    SpoolDataLossError,
    SpoolDiskFullError,
    SpoolError,
    decode_records,
    encode_body,
    stream_key,
)
from openum.spark._spool_format import RECORD_HEADER, SEGMENT_HEADER
from tests.spark.conftest import mounted_tmpfs

SOURCE = "TCP:127.0.0.1:1:2[0]"
KEY = stream_key("t", SOURCE)


def body(i: int, size: int = 8) -> bytes:
    return encode_body(b"t", SOURCE.encode(), i, 1_000_000_000 + i, i.to_bytes(8, "big").ljust(size), b"")


FRAMED = RECORD_HEADER.size + len(body(0))


def counters(runs: list[tuple[int, int, bytes]]) -> list[int]:
    return [int.from_bytes(r.payload[:8], "big") for _, _, blob in runs for r in decode_records(blob)]


def spool_of(directory: Path, n: int, **kw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """A spool holding counters 0..n-1 with an offset covering them (as in a checkpoint); closed."""
    with Spool(directory, **kw) as spool:
        start = spool.reset()
        for i in range(n):
            assert spool.append(KEY, body(i))
        return start, spool.latest(start)


def record_at(i: int) -> int:
    """Byte offset of record i in a one-segment spool of equal-sized records."""
    return SEGMENT_HEADER.size + i * FRAMED


def flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x5A
    path.write_bytes(bytes(data))


# -- a damaged segment ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("where", "delta"),
    [("length", 2), ("crc", 5), ("position", 15), ("body header", 20), ("payload", FRAMED - 3)],
)
def test_one_flipped_byte_loses_only_that_record_and_names_it(tmp_path: Path, where: str, delta: int) -> None:
    start, end = spool_of(tmp_path / "s", 100)
    (segment,) = sorted((tmp_path / "s").glob("*.seg"))
    size = segment.stat().st_size
    flip(segment, record_at(42) + delta)

    with Spool(tmp_path / "s") as spool:
        assert spool.tail == 100  # positions after the damage are kept: the checkpoint's offsets still fit
        stats = spool.stats()
        assert stats["lost_records"] == 1, spool.damage
        assert stats["damaged_segments"] == 1
        (damage,) = spool.damage
        assert (damage.first, damage.last) == (42, 42)
        assert damage.start == record_at(42)
        assert "messages 42..42 lost" in damage.describe()
        with pytest.raises(SpoolDataLossError, match=rf"messages 42 \(1\) of the spool .* {segment.name}"):
            spool.read(start, end, 1000)  # the checkpointed batch: a clear error, not "not the spool"
        with pytest.raises(SpoolDataLossError, match="failOnDataLoss"):
            spool.read(start, end, 1000)
    assert segment.stat().st_size == size  # nothing was cut off or deleted

    with Spool(tmp_path / "s", fail_on_data_loss=False) as spool:
        runs = spool.read(start, end, 30)
        assert counters(runs) == [i for i in range(100) if i != 42]
        assert [count for _, count, _ in runs] == [30, 29, 30, 10]
        assert spool.stats()["skipped_records"] == 1
        spool.read(start, end, 30)  # planned again: not counted twice
        assert spool.stats()["skipped_records"] == 1
        assert spool.commit(end) == 0  # the last segment stays (appends go on after it)
        assert spool.append(KEY, body(100))
        later = spool.latest(end)
        assert counters(spool.read(end, later, 10)) == [100]


def test_a_flipped_byte_anywhere_in_the_records_loses_exactly_the_record_holding_it(tmp_path: Path) -> None:
    start, end = spool_of(tmp_path / "s", 100)
    (segment,) = sorted((tmp_path / "s").glob("*.seg"))
    pristine = segment.read_bytes()
    rng = random.Random(23)
    for offset in rng.sample(range(SEGMENT_HEADER.size, len(pristine)), 40):
        segment.write_bytes(pristine)
        flip(segment, offset)
        victim = (offset - SEGMENT_HEADER.size) // FRAMED
        with Spool(tmp_path / "s", fail_on_data_loss=False) as spool:
            assert [(d.first, d.last) for d in spool.damage] == [(victim, victim)], offset
            assert counters(spool.read(start, end, 1000)) == [i for i in range(100) if i != victim]


def test_damage_spanning_records_loses_exactly_those_and_keeps_the_rest(tmp_path: Path) -> None:
    start, end = spool_of(tmp_path / "s", 100)
    (segment,) = sorted((tmp_path / "s").glob("*.seg"))
    data = bytearray(segment.read_bytes())
    data[record_at(10) + 3 : record_at(13) + 7] = b"\xff" * (record_at(13) + 4 - record_at(10))
    segment.write_bytes(bytes(data))
    with Spool(tmp_path / "s", fail_on_data_loss=False) as spool:
        assert [(d.first, d.last) for d in spool.damage] == [(10, 13)]
        assert counters(spool.read(start, end, 1000)) == [*range(10), *range(14, 100)]
        assert spool.stats()["skipped_records"] == 4


def test_a_damaged_last_record_of_an_earlier_segment_is_counted_from_the_next_segment(
    tmp_path: Path,
) -> None:
    start, end = spool_of(tmp_path / "s", 3000, max_bytes=1 << 20, segment_bytes=64 << 10)
    first, second, *_ = sorted((tmp_path / "s").glob("*.seg"))
    last_in_first = int(second.stem) - 1
    flip(first, first.stat().st_size - FRAMED + 1)  # the length field of its last record
    with Spool(tmp_path / "s", max_bytes=1 << 20, segment_bytes=64 << 10, fail_on_data_loss=False) as spool:
        assert [(d.first, d.last) for d in spool.damage] == [(last_in_first, last_in_first)]
        assert counters(spool.read(start, end, 5000)) == [i for i in range(3000) if i != last_in_first]


def test_a_damaged_last_record_at_the_end_of_the_spool_is_lost_not_torn(tmp_path: Path) -> None:
    start, end = spool_of(tmp_path / "s", 100)
    (segment,) = sorted((tmp_path / "s").glob("*.seg"))
    flip(segment, record_at(99) + 30)
    with Spool(tmp_path / "s") as spool:
        assert [(d.first, d.last, d.torn) for d in spool.damage] == [(99, 99, False)]
        assert spool.tail == 100
        with pytest.raises(SpoolDataLossError, match=r"messages 99 \(1\)"):
            spool.read(start, end, 1000)


def test_a_damaged_segment_header_is_refused_and_left_alone(tmp_path: Path) -> None:
    spool_of(tmp_path / "s", 10)
    (segment,) = sorted((tmp_path / "s").glob("*.seg"))
    flip(segment, 2)
    before = segment.read_bytes()
    with pytest.raises(SpoolError, match=rf"{segment.name}.*header is damaged.*Move it out"):
        Spool(tmp_path / "s")
    assert segment.read_bytes() == before


# -- a lost index --------------------------------------------------------------------------------------
def test_a_deleted_index_is_rebuilt_from_the_segments_and_nothing_is_lost(tmp_path: Path) -> None:
    kw: dict[str, Any] = {"max_bytes": 1 << 20, "segment_bytes": 64 << 10}
    spool = Spool(tmp_path / "s", **kw)
    start = spool.reset()
    for i in range(3000):
        assert spool.append(KEY, body(i))
    mid = spool.latest(start, max_messages=1000)
    end = spool.latest(mid)
    assert spool.commit(mid) >= 1
    spool.close()
    segments = sorted((tmp_path / "s").glob("*.seg"))
    assert len(segments) >= 2
    (tmp_path / "s" / "index.json").unlink()

    with Spool(tmp_path / "s", **kw) as again:
        assert sorted((tmp_path / "s").glob("*.seg")) == segments  # nothing deleted
        assert again.index_rebuilt and again.stats()["index_rebuilt"]
        assert again.spool_id == start["spool"]  # the checkpoint's offsets still name this spool
        assert again.tail == 3000
        assert counters(again.read(mid, end, 5000)) == list(range(1000, 3000))
        index = json.loads((tmp_path / "s" / "index.json").read_text())
        assert index["spool"] == start["spool"]
    with Spool(tmp_path / "s", **kw) as third:  # the rebuilt index is a normal one
        assert not third.index_rebuilt
        assert counters(third.read(mid, end, 5000)) == list(range(1000, 3000))


def test_a_lost_index_with_segments_of_two_spools_is_refused_and_nothing_deleted(tmp_path: Path) -> None:
    kw: dict[str, Any] = {"max_bytes": 1 << 20, "segment_bytes": 64 << 10}
    spool_of(tmp_path / "a", 2000, **kw)
    spool_of(tmp_path / "b", 2000, **kw)
    second = sorted((tmp_path / "b").glob("*.seg"))[1]
    shutil.copy(second, tmp_path / "a" / second.name)  # same positions, another spool
    (tmp_path / "a" / "index.json").unlink()
    files = sorted(p.name for p in (tmp_path / "a").iterdir())
    with pytest.raises(SpoolError, match=r"index.json is missing .* 2 different spools .* deletes none"):
        Spool(tmp_path / "a", **kw)
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == files


def test_an_unreadable_index_is_refused_with_what_to_do(tmp_path: Path) -> None:
    spool_of(tmp_path / "s", 10)
    (tmp_path / "s" / "index.json").write_text("{not json")
    with pytest.raises(SpoolError, match=r"unreadable.*Delete that file \(not the segments\)"):
        Spool(tmp_path / "s")
    assert len(list((tmp_path / "s").glob("*.seg"))) == 1


# -- a full disk ---------------------------------------------------------------------------------------
@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 192 KiB tmpfs of its own, unmounted afterwards (needs root)."""
    with mounted_tmpfs(tmp_path, "192k") as mnt:
        yield mnt


def test_a_full_disk_loses_nothing_acknowledged_and_says_so(small_tmpfs: Path) -> None:
    spool = Spool(small_tmpfs / "s", max_bytes=1 << 30, segment_bytes=64 << 10)
    start = acked = spool.reset()
    spooled = 0
    while spool.append(KEY, body(spooled, 1000)):
        spooled += 1
        if spooled % 25 == 0:
            acked = spool.latest(start)  # an offset handed to Spark: it must stay on disk, whole
        assert spooled < 10_000, "the tmpfs never filled up"
    assert acked["messages"] > 0
    stats = spool.stats()
    assert stats["disk_full"]
    assert stats["disk_dropped"] == 1
    assert spool.tail == spooled
    assert not spool.append(KEY, body(spooled, 1000))  # still full: counted, not raised
    assert spool.stats()["disk_dropped"] == 2
    with pytest.raises(SpoolDiskFullError, match=rf"the spool {small_tmpfs / 's'} cannot store messages: "):
        spool.latest(acked)
    with pytest.raises(SpoolDiskFullError, match=rf"message {spooled} failed: .*(space|full).* 2 delivered"):
        spool.latest(acked)
    spool.close()

    with Spool(small_tmpfs / "s", max_bytes=1 << 30, segment_bytes=64 << 10) as again:
        assert not again.damage  # the failed write left no partial record behind
        assert again.tail == spooled  # every record append() accepted is on disk
        assert counters(again.read(start, acked, 1000)) == list(range(acked["messages"]))
        end = again.latest(acked)  # what was spooled after the last offset is there too
        assert counters(again.read(acked, end, 1000)) == list(range(acked["messages"], spooled))


def test_a_short_write_is_undone_and_marks_the_spool_full(tmp_path: Path) -> None:
    calls = {"n": 0}

    def short_after_20(fd: int, data: bytes) -> int:
        calls["n"] += 1
        return os.write(fd, data if calls["n"] <= 20 else data[: len(data) // 2])

    spool = Spool(tmp_path / "s", write=short_after_20)
    start = spool.reset()
    results = [spool.append(KEY, body(i)) for i in range(30)]
    assert results == [True] * 19 + [False] * 11  # call 1 wrote the segment header
    assert spool.stats()["disk_dropped"] == 11
    assert "short write" in spool.stats()["disk_error"]
    with pytest.raises(SpoolDiskFullError, match=r"short write: \d+ of \d+ bytes .* 11 delivered"):
        spool.latest(start)
    spool.close()
    with Spool(tmp_path / "s") as again:
        assert not again.damage
        assert counters(again.read(start, again.latest(start), 100)) == list(range(19))


def test_an_enospc_on_a_new_segment_leaves_no_file_and_marks_the_spool_full(tmp_path: Path) -> None:
    def enospc(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with Spool(tmp_path / "s", write=enospc) as spool:
        start = spool.reset()
        assert not spool.append(KEY, body(0))
        assert list((tmp_path / "s").glob("*.seg")) == []
        with pytest.raises(SpoolDiskFullError, match=r"No space left on device \[errno 28\]"):
            spool.latest(start)


def test_a_failed_fsync_hands_out_no_offset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Spool(tmp_path / "s") as spool:
        start = spool.reset()
        assert spool.append(KEY, body(0))

        def eio(fd: int) -> None:
            raise OSError(errno.EIO, os.strerror(errno.EIO))

        with monkeypatch.context() as m:
            m.setattr(os, "fsync", eio)
            with pytest.raises(SpoolDiskFullError, match="Input/output error"):
                spool.latest(start)
        with contextlib.suppress(SpoolDiskFullError):
            spool.latest(start)
        assert spool.stats()["disk_full"]
