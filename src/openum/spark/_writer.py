"""The writers of the ``openum`` data source: ``df.write`` and ``df.writeStream`` ``.format("openum")``.

Each write task (on an executor) opens its own openum context, creates one source per topic it meets
(the new topics of a chunk of rows together, then waits for ``waitForReceivers``), sends its rows,
waits until slow receivers took what was sent (``drainTimeoutMs``), closes the sources and the context
and returns an :class:`OpenUMCommitMessage` with the messages sent per topic.  The driver's ``commit``
adds them up; for a streaming query whose checkpoint is a local directory it records the last committed
batch id (``<checkpoint>/openum-sink.json``), and Spark builds the stream writer again for every
micro-batch, so a batch Spark replays after a restart although the sink had committed it is skipped
instead of published twice.  A task that fails after sending and is retried sends its rows again:
that window is at-least-once (docs/spark.md).
"""

# PySpark names the methods a data source implements in camelCase (batchId).
# ruff: noqa: N803

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    ByteType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
)

import openum
from openum.spark._options import SchemaError, WriteOptions

try:  # PySpark >= 4.1
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as _StreamWriterBase
except ImportError:  # pragma: no cover - PySpark 4.0
    _StreamWriterBase = DataSourceStreamWriter  # type: ignore[misc,assignment]

__all__ = ["OpenUMBatchWriter", "OpenUMCommitMessage", "OpenUMStreamWriter", "layout"]

log = logging.getLogger("openum.spark")

BATCH_ID_PROPERTY = "streaming.sql.batchId"  # the task-local property MicroBatchExecution sets
SETTLE_SECONDS = 0.2  # after creating sources on sessions a receiver already had (see _Publisher)
SINK_STATE = "openum-sink.json"


@dataclass(frozen=True)
class _Layout:
    """Where the writer finds its columns in the input rows."""

    payload: int
    payload_is_text: bool
    topic: int | None
    properties: int | None
    default_topic: str | None


_PROPERTY_VALUES = (
    StringType,
    BooleanType,
    ByteType,
    ShortType,
    IntegerType,
    LongType,
    FloatType,
    DoubleType,
)


def layout(schema: StructType, opts: WriteOptions) -> _Layout:
    """Check the input columns on the driver, with errors that say what to do."""
    names = {f.name.lower(): (i, f) for i, f in enumerate(schema.fields)}
    have = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in schema.fields)
    if "payload" not in names:
        raise SchemaError(
            f"the openum data source publishes the column 'payload' (binary or string), and the rows have "
            f"none (columns: {have}); e.g. df.select(to_json(struct(...)).alias('payload'))"
        )
    pi, pf = names["payload"]
    if not isinstance(pf.dataType, BinaryType | StringType):
        raise SchemaError(
            f"the payload column must be binary or string, not {pf.dataType.simpleString()}; cast or encode "
            "it, e.g. col('payload').cast('binary'), col('payload').cast('string') or to_json(...)"
        )
    ti: int | None = None
    if "topic" in names:
        ti, tf = names["topic"]
        if not isinstance(tf.dataType, StringType):
            raise SchemaError(
                f"the topic column must be a string, not {tf.dataType.simpleString()}; e.g. "
                "concat(lit('analytics/'), col('symbol')).alias('topic')"
            )
    elif opts.topic is None:
        raise SchemaError(
            "the openum data source needs a topic: give the option 'topic' or a string column 'topic' "
            f"(columns: {have})"
        )
    qi: int | None = None
    if "properties" in names:
        qi, qf = names["properties"]
        t = qf.dataType
        if not (
            isinstance(t, MapType)
            and isinstance(t.keyType, StringType)
            and isinstance(t.valueType, _PROPERTY_VALUES)
        ):
            raise SchemaError(
                f"the properties column must be a map from string to string, boolean, integer or double, not "
                f"{t.simpleString()} (UM message properties, seed 10.11)"
            )
    return _Layout(pi, isinstance(pf.dataType, StringType), ti, qi, opts.topic)


@dataclass
class OpenUMCommitMessage(WriterCommitMessage):
    """What one write task did: messages sent per topic (empty when the batch was skipped)."""

    partition_id: int
    attempt: int
    batch_id: int | None
    counts: dict[str, int] = field(default_factory=dict)
    skipped: bool = False
    seconds: float = 0.0

    @property
    def messages(self) -> int:
        return sum(self.counts.values())


def _task_info() -> tuple[int, int, int | None]:
    from pyspark import TaskContext

    tc = TaskContext.get()
    if tc is None:
        return 0, 0, None
    text = tc.getLocalProperty(BATCH_ID_PROPERTY)
    return tc.partitionId(), tc.attemptNumber(), (int(text) if text not in (None, "") else None)


def _rows(batches: Iterable[pa.RecordBatch], layout: _Layout) -> Iterator[tuple[str, bytes, Any]]:
    """``(topic, payload, properties)`` from Arrow record batches."""
    for batch in batches:
        payloads = batch.column(layout.payload).to_pylist()
        topics = batch.column(layout.topic).to_pylist() if layout.topic is not None else None
        props = batch.column(layout.properties).to_pylist() if layout.properties is not None else None
        for i, payload in enumerate(payloads):
            topic = topics[i] if topics is not None else None
            if topic is None:
                topic = layout.default_topic
                if topic is None:
                    raise SchemaError("a row has a null topic and the option 'topic' is not given")
            if payload is None:
                raise SchemaError(f"a row for topic {topic!r} has a null payload")
            data = payload.encode() if isinstance(payload, str) else payload
            yield topic, data, (dict(props[i]) if props is not None and props[i] else None)


def _rows_from_spark_rows(rows: Iterable[Any], layout: _Layout) -> Iterator[tuple[str, bytes, Any]]:
    for row in rows:  # pragma: no cover - PySpark 4.0 streaming writes (no Arrow stream writer)
        topic = row[layout.topic] if layout.topic is not None else None
        topic = topic if topic is not None else layout.default_topic
        payload = row[layout.payload]
        if topic is None or payload is None:
            raise SchemaError("a row has a null topic (and no option 'topic') or a null payload")
        props = row[layout.properties] if layout.properties is not None else None
        yield topic, (payload.encode() if isinstance(payload, str) else bytes(payload)), props or None


class _Publisher:
    """One task's openum context and its sources, one per topic."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts
        self.ctx = openum.Context(opts.um.build())
        self.sources: dict[str, openum.Source] = {}
        self.connects: dict[str, int] = {}
        self.counts: dict[str, int] = {}
        self._cond = threading.Condition()

    def _on_event(self, event: openum.SourceEvent, _info: Any, topic: str) -> None:
        if event is openum.SourceEvent.CONNECT:
            with self._cond:
                self.connects[topic] = self.connects.get(topic, 0) + 1
                self._cond.notify_all()

    def prepare(self, topics: Iterable[str]) -> None:
        """Create the sources of new topics together, then wait for receivers when asked to."""
        new = [t for t in dict.fromkeys(topics) if t not in self.sources]
        if not new:
            return
        sessions_before = {_session_of(s) for s in self.sources.values()}
        for topic in new:
            self.sources[topic] = self.ctx.create_source(topic, event_callback=self._on_event, clientd=topic)
            self.counts.setdefault(topic, 0)
        need = self.opts.wait_for_receivers
        if need <= 0:
            return
        deadline = time.monotonic() + self.opts.receiver_timeout_ms / 1000
        with self._cond:
            while waiting := [t for t in new if self.connects.get(t, 0) < need]:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        f"openum writer: no {need} receiver(s) joined topic(s) {', '.join(waiting[:5])}"
                        f"{', ...' if len(waiting) > 5 else ''} within {self.opts.receiver_timeout_ms} ms "
                        "(waitForReceivers); is a receiver running with the same topic resolution settings?"
                    )
                self._cond.wait(left)
        # A receiver connected to a transport session learns about a new topic on it from topic
        # resolution, which this side cannot observe: give it a moment (heuristic, docs/spark.md).
        if any(_session_of(self.sources[t]) in sessions_before for t in new) or len(new) > len(
            {_session_of(self.sources[t]) for t in new}
        ):
            time.sleep(SETTLE_SECONDS)

    def send(self, topic: str, data: bytes, props: Mapping[str, Any] | None) -> None:
        self.sources[topic].send(data, properties=props)
        self.counts[topic] += 1

    def finish(self) -> None:
        """Flush, wait until slow receivers took everything (drainTimeoutMs), close."""
        firsts: dict[str, openum.Source] = {}
        for src in self.sources.values():
            src.flush()
            firsts.setdefault(_session_of(src), src)
        deadline = time.monotonic() + self.opts.drain_timeout_ms / 1000
        while time.monotonic() < deadline and any(_buffered(s) for s in firsts.values()):
            time.sleep(0.005)  # the transport has no "drained" event to wait on
        self.close()

    def close(self) -> None:
        for src in self.sources.values():
            try:
                src.close()
            except openum.OpenUMError:
                log.exception("openum writer: closing a source failed")
        self.sources.clear()
        self.ctx.close()


def _buffered(source: openum.Source) -> int:
    """Bytes the source's transport session still keeps for slow receivers (0 if it does not say)."""
    return int(getattr(source.statistics(), "bytes_buffered", 0) or 0)


def _session_of(source: openum.Source) -> str:
    return source.source_string.rsplit("[", 1)[0]


def _publish(
    opts: WriteOptions, rows: Iterator[tuple[str, bytes, Any]], chunk: int = 10_000
) -> dict[str, int]:
    """Send every row; sources are created per chunk of rows so a chunk's new topics join together."""
    pub = _Publisher(opts)
    try:
        buffer: list[tuple[str, bytes, Any]] = []
        for row in rows:
            buffer.append(row)
            if len(buffer) >= chunk:
                _send_chunk(pub, buffer)
                buffer = []
        if buffer:
            _send_chunk(pub, buffer)
        pub.finish()
    except BaseException:
        pub.close()
        raise
    return dict(pub.counts)


def _send_chunk(pub: _Publisher, chunk: list[tuple[str, bytes, Any]]) -> None:
    pub.prepare(t for t, _, _ in chunk)
    for topic, data, props in chunk:
        pub.send(topic, data, props)


class OpenUMBatchWriter(DataSourceArrowWriter):
    """``df.write.format("openum")``: each task publishes its rows."""

    def __init__(self, opts: WriteOptions, layout: _Layout) -> None:
        self.opts = opts
        self.layout = layout

    def write(self, iterator: Iterator[pa.RecordBatch]) -> OpenUMCommitMessage:
        partition, attempt, batch_id = _task_info()
        began = time.monotonic()
        counts = _publish(self.opts, _rows(iterator, self.layout))
        return OpenUMCommitMessage(partition, attempt, batch_id, counts, False, time.monotonic() - began)

    def commit(self, messages: list[OpenUMCommitMessage | None]) -> None:  # type: ignore[override]
        total = sum(m.messages for m in messages if m is not None)
        log.info("openum writer: published %d message(s) from %d task(s)", total, len(messages))

    def abort(self, messages: list[OpenUMCommitMessage | None]) -> None:  # type: ignore[override]
        sent = sum(m.messages for m in messages if m is not None)
        log.warning("openum writer: write aborted after %d message(s) were published (not revocable)", sent)


def _state_path(opts: WriteOptions) -> Path | None:
    """``<checkpoint>/openum-sink.json`` when the checkpoint location is a local directory."""
    loc = opts.checkpoint_location
    if not loc:
        return None
    if loc.startswith("file:"):
        loc = loc[len("file:") :]
        while loc.startswith("//"):
            loc = loc[1:]
    elif "://" in loc:
        return None
    return Path(loc) / SINK_STATE


def _read_state(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        return dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return {}


class OpenUMStreamWriter(_StreamWriterBase):
    """``df.writeStream.format("openum")``: each task publishes its rows; the driver's commit records
    the batch so a replay of an already committed batch is skipped."""

    def __init__(self, opts: WriteOptions, layout: _Layout) -> None:
        self.opts = opts
        self.layout = layout
        # Spark builds the writer on the driver for each micro-batch: this is the sink's state then.
        state = _read_state(_state_path(opts))
        last = state.get("last_batch")
        self.last_committed: int | None = int(last) if last is not None else None

    def write(self, iterator: Iterator[Any]) -> OpenUMCommitMessage:
        partition, attempt, batch_id = _task_info()
        if batch_id is not None and self.last_committed is not None and batch_id <= self.last_committed:
            log.info("openum writer: batch %d was committed before; not publishing it again", batch_id)
            return OpenUMCommitMessage(partition, attempt, batch_id, {}, True, 0.0)
        began = time.monotonic()
        if _StreamWriterBase is DataSourceStreamWriter:  # pragma: no cover - PySpark 4.0
            rows = _rows_from_spark_rows(iterator, self.layout)
        else:
            rows = _rows(iterator, self.layout)
        counts = _publish(self.opts, rows)
        return OpenUMCommitMessage(partition, attempt, batch_id, counts, False, time.monotonic() - began)

    def commit(self, messages: list[OpenUMCommitMessage | None], batchId: int) -> None:  # type: ignore[override]
        done = [m for m in messages if m is not None]
        total = sum(m.messages for m in done)
        path = _state_path(self.opts)
        if path is not None and path.parent.is_dir():
            state = _read_state(path)
            per_topic: dict[str, int] = dict(state.get("published", {}))
            for m in done:
                for topic, n in m.counts.items():
                    per_topic[topic] = per_topic.get(topic, 0) + n
            new = {
                "last_batch": batchId,
                "last_batch_messages": total,
                "published": dict(sorted(per_topic.items())),
                "skipped_batches": int(state.get("skipped_batches", 0))
                + (1 if done and all(m.skipped for m in done) else 0),
            }
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(new, sort_keys=True), encoding="utf-8")
            os.replace(tmp, path)
        log.info("openum writer: batch %d published %d message(s)", batchId, total)

    def abort(self, messages: list[OpenUMCommitMessage | None], batchId: int) -> None:  # type: ignore[override]
        sent = sum(m.messages for m in messages if m is not None)
        log.warning("openum writer: batch %d aborted after %d message(s) were published", batchId, sent)
