"""The stream reader's disk spool (openum.spark._spool) on its own: no Spark needed.

Offsets are deterministic, batches read back byte for byte (also after reopening), commits prune whole
segments, a torn last record is cut off, a foreign or deleted spool is refused with a clear error, and
a full spool blocks (flow control) or fails the next batch, as configured.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from openum.spark._spool import (
    Spool,
    SpoolError,
    SpoolFullError,
    decode_records,
    encode_body,
    make_offset,
    stream_key,
)
from tests.helpers import wait_until


def body(i: int, topic: str = "t", source: str = "TCP:127.0.0.1:1:2[0]", props: bytes = b"") -> bytes:
    return encode_body(topic.encode(), source.encode(), i, 1_000_000_000 + i, i.to_bytes(8, "big"), props)


def fill(spool: Spool, n: int, first: int = 0, topic: str = "t") -> None:
    for i in range(first, first + n):
        assert spool.append(stream_key(topic, "TCP:127.0.0.1:1:2[0]"), body(i, topic))


def fill_to_limit(spool: Spool) -> int:
    """Append until the next record would pass maxSpoolBytes; returns how many were appended."""
    n = 0
    framed = len(body(0)) + 16
    while spool.stats()["bytes"] + framed <= spool.max_bytes:
        assert spool.append("k", body(n))
        n += 1
    return n


def counters(runs: list[tuple[int, int, bytes]]) -> list[int]:
    return [int.from_bytes(r.payload, "big") for _, _, blob in runs for r in decode_records(blob)]


def test_offsets_are_deterministic_json_with_sorted_keys(tmp_path: Path) -> None:
    with Spool(tmp_path / "s") as spool:
        start = spool.reset()
        fill(spool, 3, topic="b")
        fill(spool, 2, 3, topic="a")
        end = spool.latest(start)
    assert list(end) == sorted(end)
    assert list(end["streams"]) == sorted(end["streams"])
    assert end["messages"] == 5
    assert end["streams"] == {"a@TCP:127.0.0.1:1:2[0]": 2, "b@TCP:127.0.0.1:1:2[0]": 3}
    assert json.dumps(end) == json.dumps(json.loads(json.dumps(end)))  # stable through Spark's log
    assert make_offset("x", 1, {"b": 1, "a": 2}) == {
        "messages": 1,
        "spool": "x",
        "streams": {"a": 2, "b": 1},
        "v": 1,
    }


def test_batches_read_back_identically_after_reopen_and_commit_prunes(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "s", max_bytes=1 << 20, segment_bytes=64 << 10)
    start = spool.reset()
    fill(spool, 3000)
    mid = spool.latest(start, max_messages=1500)
    end = spool.latest(mid)
    first = spool.read(start, mid, per_part=600)
    assert [count for _, count, _ in first] == [600, 600, 300]
    assert counters(first) == list(range(1500))
    segments_before = len(list((tmp_path / "s").glob("*.seg")))
    assert segments_before > 2
    spool.close()

    again = Spool(tmp_path / "s", max_bytes=1 << 20, segment_bytes=64 << 10)  # a restart
    assert again.read(start, mid, per_part=600) == first
    assert counters(again.read(mid, end, per_part=5000)) == list(range(1500, 3000))
    assert again.commit(mid) >= 1  # the first segment holds fewer than 1500 records
    assert len(list((tmp_path / "s").glob("*.seg"))) < segments_before
    assert counters(again.read(mid, end, per_part=5000)) == list(range(1500, 3000))
    with pytest.raises(SpoolError, match="holds"):
        again.read(start, mid, per_part=600)  # committed and deleted
    fill(again, 10, 3000)
    assert again.latest(end)["messages"] == 3010
    again.close()


def test_a_torn_last_record_is_cut_off_on_reopen(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "s")
    start = spool.reset()
    fill(spool, 10)
    spool.close()
    segment = sorted((tmp_path / "s").glob("*.seg"))[-1]
    data = segment.read_bytes()
    segment.write_bytes(data[:-5])  # a crash in the middle of the last write
    with Spool(tmp_path / "s") as again:
        assert again.tail == 9
        assert [d.torn for d in again.damage] == [True]  # a crash mid-write, not damage: nothing lost
        assert again.stats()["lost_records"] == 0
        end = again.latest(start)
        assert counters(again.read(start, end, 100)) == list(range(9))


def test_a_foreign_or_lost_spool_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    with Spool(tmp_path / "a") as a:
        start = a.reset()
        fill(a, 5)
        end = a.latest(start)
    with Spool(tmp_path / "b") as b:
        b.reset()
        with pytest.raises(SpoolError, match="belongs to spool"):
            b.read(start, end, 10)
        with pytest.raises(SpoolError, match="spoolDir"):
            b.latest(end)


def test_a_second_user_of_the_spool_directory_is_refused(tmp_path: Path) -> None:
    with Spool(tmp_path / "s"), pytest.raises(SpoolError, match="in use by another process"):
        Spool(tmp_path / "s", lock_timeout=0.2)


def test_full_spool_with_fail_policy_fails_the_next_batch(tmp_path: Path) -> None:
    with Spool(tmp_path / "s", max_bytes=64 << 10, full_policy="fail") as spool:
        start = spool.reset()
        kept = sum(spool.append("k", body(i)) for i in range(2000))
        assert 0 < kept < 2000
        with pytest.raises(SpoolFullError, match="maxSpoolBytes"):
            spool.latest(start)


def test_full_spool_with_block_policy_waits_for_a_commit(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "s", max_bytes=64 << 10, segment_bytes=16 << 10)
    start = spool.reset()
    n = fill_to_limit(spool)
    done = threading.Event()

    def one_more() -> None:
        spool.append("k", body(n))
        done.set()

    threading.Thread(target=one_more, daemon=True).start()
    assert wait_until(lambda: spool.stats()["blocked"], 5), "append should block while the spool is full"
    assert not done.is_set()
    end = spool.latest(start)
    spool.commit(end)  # Spark processed everything: whole segments go, the append proceeds
    assert done.wait(5)
    assert spool.stats()["blocked_seconds"] > 0
    assert spool.tail == n + 1
    spool.close()


def test_close_wakes_a_blocked_append(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "s", max_bytes=64 << 10)
    spool.reset()
    fill_to_limit(spool)
    result: list[bool] = []
    thread = threading.Thread(target=lambda: result.append(spool.append("k", body(1))), daemon=True)
    thread.start()
    assert wait_until(lambda: spool.stats()["blocked"], 5)
    spool.close()
    thread.join(5)
    assert result == [False]


def test_records_keep_topic_source_sequence_time_properties_and_payload(tmp_path: Path) -> None:
    props = json.dumps({"venue": "NYSE", "qty": "100"}).encode()
    with Spool(tmp_path / "s") as spool:
        start = spool.reset()
        spool.append(
            "k", encode_body(b"md/NYSE/IBM", b"TCP:1.2.3.4:5:6[7]", 42, 123_456_789, b"\x00\x01", props)
        )
        end = spool.latest(start)
        (record,) = list(decode_records(spool.read(start, end, 10)[0][2]))
    assert record.topic == "md/NYSE/IBM"
    assert record.source == "TCP:1.2.3.4:5:6[7]"
    assert record.sequence_number == 42
    assert record.receive_ns == 123_456_789
    assert record.payload == b"\x00\x01"
    assert record.properties == {"venue": "NYSE", "qty": "100"}
