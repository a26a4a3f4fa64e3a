"""Streaming reads with a real local Spark: every published message exactly once, across a failed
micro-batch and across stopping and restarting the query from its checkpoint in the middle of the stream.

The test process publishes counters 0..N-1 on one topic from its own context while the query runs;
the query's foreachBatch sink keeps each batch's rows by batch id (a replayed batch replaces its
earlier attempt, as an idempotent sink does), so exactly-once shows as: every counter in exactly one
batch, and a replayed batch identical to its first attempt.
"""

from __future__ import annotations

import json
import threading
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

import openum
from openum.spark.pipelines.market_data import stop_between_batches
from tests.helpers import wait_until
from tests.integration.pubsub import Ports, SourceEvents
from tests.spark.conftest import PANDAS_WARNING, um_options

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.filterwarnings(PANDAS_WARNING)]

WAIT = 90.0  # a loaded 2-core CI machine runs a micro-batch in seconds; this is only a deadline
INJECTED = "injected failure in batch"


class BatchSink:
    """A foreachBatch function keeping each batch's rows by batch id; can fail one batch once."""

    def __init__(self, fail_on_nonempty: int | None = None) -> None:
        self.lock = threading.Lock()
        self.batches: dict[int, list[tuple[Any, ...]]] = {}
        self.attempts: dict[int, list[list[tuple[Any, ...]]]] = defaultdict(list)
        self.fail_on_nonempty = fail_on_nonempty
        self.nonempty = 0
        self.failed_batch: int | None = None

    def __call__(self, df: Any, batch_id: int) -> None:
        try:
            rows = [
                (r.topic, r.source, r.sequence_number, bytes(r.payload), r.properties, r.receive_time)
                for r in df.collect()
            ]
        except Exception as exc:  # short: Spark's stream thread chokes on long Py4J messages
            raise RuntimeError(f"collect failed in batch {batch_id}: {str(exc)[:200]}") from None
        with self.lock:
            self.batches[batch_id] = rows
            self.attempts[batch_id].append(rows)
            if rows:
                self.nonempty += 1
            fail = self.fail_on_nonempty is not None and self.nonempty == self.fail_on_nonempty and rows
            if fail:
                self.fail_on_nonempty = None
                self.failed_batch = batch_id
        if fail:
            raise RuntimeError(f"{INJECTED} {batch_id}")

    def counters(self) -> Counter[int]:
        with self.lock:
            return Counter(
                int.from_bytes(row[3][:8], "big") for rows in self.batches.values() for row in rows
            )

    def distinct(self) -> int:
        return len(self.counters())


def start_query(spark: Any, ports: Ports, workdir: Path, sink: BatchSink) -> Any:
    reader = (
        spark.readStream.format("openum")
        .option("topic", "spark/read")
        .option("maxMessagesPerBatch", "120")
        .option("spoolDir", str(workdir / "spool"))
        .options(**um_options(ports))
        .load()
    )
    return (
        reader.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(workdir / "checkpoint"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )


def joined(events: SourceEvents, n: int, query: Any) -> None:
    """Wait for the n-th CONNECT of the reader's receiver; fail at once with the query's error if it died."""
    wait_until(lambda: events.count(openum.SourceEvent.CONNECT) >= n or not query.isActive, WAIT)
    assert query.isActive or events.count(openum.SourceEvent.CONNECT) >= n, (
        f"the query died: {query.exception()}"
    )
    assert events.count(openum.SourceEvent.CONNECT) >= n, "the stream reader's receiver never joined"


def reader_status(workdir: Path) -> dict[str, Any]:
    path = workdir / "spool" / "status.json"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        return {"unreadable": str(exc)}
    try:
        return dict(json.loads(text))
    except ValueError:
        return {"unparseable": text}


def publish(src: openum.Source, first: int, count: int) -> None:
    for i in range(first, first + count):
        props = {"i": i, "even": i % 2 == 0} if i % 10 == 0 else None
        src.send(i.to_bytes(8, "big") + b"-payload", properties=props)
    src.flush()


def test_every_message_exactly_once_across_a_failed_batch_and_a_restart_mid_stream(
    spark: Any, ports: Ports, workdir: Path
) -> None:
    events = SourceEvents()
    with openum.Context(options=ports.options()) as ctx:
        src = ctx.create_source("spark/read", event_callback=events)
        first_sink = BatchSink(fail_on_nonempty=2)
        query = start_query(spark, ports, workdir, first_sink)
        try:
            # 1. The reader's receiver joins; 300 messages; the second non-empty batch fails.
            joined(events, 1, query)
            publish(src, 0, 300)
            assert wait_until(lambda: not query.isActive, WAIT), "the injected failure did not stop the query"
            assert INJECTED in str(query.exception())
        finally:
            if query.isActive:
                query.stop()
        failed = first_sink.failed_batch
        assert failed is not None

        # 2. Restart from the checkpoint: the failed batch is planned again from the spool; 300 more;
        #    then stop in the middle of the stream (the spool still holds uncommitted messages).
        sink = BatchSink()
        with sink.lock:
            sink.batches.update(first_sink.batches)
        query = start_query(spark, ports, workdir, sink)
        try:
            joined(events, 2, query)
            publish(src, 300, 300)
            assert wait_until(lambda: sink.distinct() >= 400, WAIT), f"only {sink.distinct()} of 600 arrived"
        finally:
            stop_between_batches(query)
        assert sink.attempts[failed] and sink.attempts[failed][0] == first_sink.attempts[failed][0], (
            "the replayed batch differs from its first attempt"
        )
        # The second run's receiver got all of its 300 messages (its status file, written on close).
        assert wait_until(lambda: reader_status(workdir).get("received") == 300, WAIT), reader_status(workdir)
        spool = reader_status(workdir)["spool"]
        assert spool["committed"] < spool["tail"] == 600, spool  # stopped with uncommitted messages spooled

        # 3. Restart again: what was spooled but not yet processed comes first; 200 more.
        query = start_query(spark, ports, workdir, sink)
        try:
            joined(events, 3, query)
            publish(src, 600, 200)
            assert wait_until(lambda: sink.distinct() >= 800, WAIT), f"only {sink.distinct()} of 800 arrived"
        finally:
            stop_between_batches(query)
        assert query.exception() is None

    counts = sink.counters()
    assert sorted(counts) == list(range(800))
    duplicates = {c: n for c, n in counts.items() if n != 1}
    assert not duplicates, f"messages seen more than once: {sorted(duplicates)[:10]}"
    rows = [row for rows in sink.batches.values() for row in rows]
    sources = {row[1] for row in rows}
    assert len(sources) == 1
    for topic, _source, sqn, payload, props, received in rows:
        counter = int.from_bytes(payload[:8], "big")
        assert topic == "spark/read"
        assert sqn == counter  # one source sending 0, 1, 2, ...: its topic sequence numbers
        assert payload[8:] == b"-payload"
        assert received is not None
        if counter % 10 == 0:
            assert props == {"i": str(counter), "even": "true" if counter % 2 == 0 else "false"}
        else:
            assert props is None
