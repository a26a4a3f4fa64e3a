"""The ``openum`` PySpark data source: a streaming reader over a spooled receiver, and writers.

Where each piece runs (PySpark >= 4.0 Python Data Source API):

- :class:`OpenUMDataSource` is built from the options on the driver (``load()``, ``start()``,
  ``save()``); its option errors surface there.
- **Reading.** Spark runs the stream reader's planning methods (``initialOffset``, ``latestOffset``,
  ``partitions``, ``commit``, ``stop``) in one long-lived Python process beside the driver, for the
  life of the query.  On its first call the reader starts there an openum context with a receiver (or a
  wildcard receiver), whose callback appends every delivered message to the spool
  (:mod:`openum.spark._spool`).  ``latestOffset`` returns the spool position (and per-stream counts),
  ``partitions`` reads the records of a batch back from the spool *on the driver* and ships them inside
  the input partitions, so executors (``read``) never need the driver's disk: a re-planned batch after a
  failure or a restart is rebuilt from the spool, on any cluster manager.  ``commit`` prunes the spool.
  The reader objects Spark pickles to executors carry only options.
- **Writing** (:mod:`openum.spark._writer`): each task opens its own context, one source per topic,
  and returns a commit message with the counts per topic; the driver's ``commit`` adds them up and, for
  a streaming query, records the batch so a replay of a committed batch is not published twice.

Limits, honestly: the driver host must take part in topic resolution with the publishers (it runs the
receiver); a micro-batch travels from the driver to the executors inside its tasks (bound it with
``maxMessagesPerBatch``); messages published while no query runs are not received (no persistence
yet); a task that fails after sending and is retried sends its rows again (at-least-once in that case).
See docs/spark.md.
"""

# PySpark names the methods a data source implements in camelCase (streamReader, latestOffset, ...).
# ruff: noqa: N802

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import (
    BinaryType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

import openum
from openum.spark._options import (
    ReadOptions,
    SchemaError,
    check_names,
    parse_read_options,
    parse_write_options,
)
from openum.spark._spool import Spool, decode_records, encode_body, stream_key
from openum.spark._writer import OpenUMBatchWriter, OpenUMCommitMessage, OpenUMStreamWriter, layout

ReadAllAvailable: Any = None
ReadMaxRows: Any = None
try:  # PySpark >= 4.2: admission control (latestOffset(start, limit))
    from pyspark.sql.streaming import datasource as _streaming_datasource

    ReadAllAvailable = _streaming_datasource.ReadAllAvailable
    ReadMaxRows = _streaming_datasource.ReadMaxRows
except (ImportError, AttributeError):  # pragma: no cover - PySpark 4.0/4.1
    pass

__all__ = ["SCHEMA", "OpenUMCommitMessage", "OpenUMDataSource", "OpenUMStreamReader"]

log = logging.getLogger("openum.spark")

#: The rows of ``spark.readStream.format("openum")``.
SCHEMA = StructType(
    [
        StructField("topic", StringType()),
        StructField("source", StringType()),
        StructField("sequence_number", LongType()),
        StructField("receive_time", TimestampType()),
        StructField("payload", BinaryType()),
        StructField("properties", MapType(StringType(), StringType())),
    ]
)
SCHEMA_DDL = (
    "topic string, source string, sequence_number long, receive_time timestamp, payload binary, "
    "properties map<string,string>"
)
STATUS_INTERVAL = 1.0  # seconds between status.json updates


class OpenUMDataSource(DataSource):
    """``spark.readStream.format("openum")``, ``df.writeStream.format("openum")``, ``df.write...``."""

    @classmethod
    def name(cls) -> str:
        return "openum"

    def __init__(self, options: Any) -> None:
        super().__init__(options)
        check_names(dict(self.options), "any")

    def schema(self) -> StructType:
        # Spark asks for the schema when a read is set up (load()): check the reading options now.
        parse_read_options(dict(self.options))
        return SCHEMA

    def reader(self, schema: StructType) -> Any:
        raise SchemaError(
            "openum is a streaming source: use spark.readStream.format('openum') (a batch read would have "
            "nothing to read: messages published while no query runs are not kept)"
        )

    def streamReader(self, schema: StructType) -> OpenUMStreamReader:
        opts = parse_read_options(dict(self.options))
        if [f.name for f in schema.fields] != [f.name for f in SCHEMA.fields]:
            raise SchemaError(
                f"the openum data source has a fixed schema ({SCHEMA_DDL}); do not give it another one "
                f"(got {schema.simpleString()})"
            )
        return OpenUMStreamReader(opts, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> OpenUMStreamWriter:
        opts = parse_write_options(dict(self.options))
        return OpenUMStreamWriter(opts, layout(schema, opts))

    def writer(self, schema: StructType, overwrite: bool) -> OpenUMBatchWriter:
        opts = parse_write_options(dict(self.options))
        return OpenUMBatchWriter(opts, layout(schema, opts))


# == reading ===========================================================================================
class OpenUMPartition(InputPartition):
    """Part of a micro-batch: ``count`` framed spool records starting at spool position ``first``."""

    def __init__(self, first: int, count: int, blob: bytes) -> None:
        super().__init__(first)
        self.first = first
        self.count = count
        self.blob = blob

    def __repr__(self) -> str:
        return f"OpenUMPartition(first={self.first}, count={self.count}, bytes={len(self.blob)})"


class OpenUMStreamReader(DataSourceStreamReader):
    """The stream reader; the receiver and the spool live in :class:`_ReaderRuntime`, started lazily in
    the process where Spark calls the planning methods (never on executors)."""

    def __init__(self, opts: ReadOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self._rt: _ReaderRuntime | None = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {"opts": self.opts, "schema": self.schema}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.opts = state["opts"]
        self.schema = state["schema"]
        self._rt = None
        self._lock = threading.Lock()

    def _runtime(self, *, fresh: bool = False) -> _ReaderRuntime:
        with self._lock:
            if self._rt is None:
                self._rt = _ReaderRuntime(self.opts, fresh=fresh)
            return self._rt

    # -- planning (driver side) ----------------------------------------------------------------------
    def initialOffset(self) -> dict[str, Any]:
        # Only a query without a checkpoint asks for this, before anything else: start from now.
        return self._runtime(fresh=True).initial_offset()

    def getDefaultReadLimit(self) -> Any:
        if ReadMaxRows is None or ReadAllAvailable is None:  # pragma: no cover - PySpark < 4.2
            return None
        n = self.opts.max_messages_per_batch
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any] | None = None, limit: Any = None) -> dict[str, Any]:
        if limit is None:  # PySpark < 4.2 gives no limit: apply the option here
            max_rows = self.opts.max_messages_per_batch
        elif ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            max_rows = int(limit.max_rows)
        else:
            max_rows = None
        return self._runtime().latest_offset(start, max_rows)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        return self._runtime().partitions(start, end)

    def commit(self, end: dict[str, Any]) -> None:
        self._runtime().commit(end)

    def stop(self) -> None:
        with self._lock:
            rt, self._rt = self._rt, None
        if rt is not None:
            rt.close()

    # -- executors -----------------------------------------------------------------------------------
    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, OpenUMPartition), partition
        yield from _record_batches(partition.blob, self.schema)


def _props_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    inner = getattr(value, "value", value)  # TypedValue
    if isinstance(inner, bool):
        return "true" if inner else "false"
    return str(inner)


def _record_batches(
    blob: bytes, schema: StructType, rows_per_batch: int = 10_000
) -> Iterator[pa.RecordBatch]:
    """Arrow record batches of a partition's records, in the exact Arrow schema Spark expects."""
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    cols: list[list[Any]] = [[], [], [], [], [], []]
    for rec in decode_records(blob):
        cols[0].append(rec.topic)
        cols[1].append(rec.source)
        cols[2].append(rec.sequence_number)
        cols[3].append(rec.receive_ns // 1000)
        cols[4].append(rec.payload)
        cols[5].append(None if rec.properties is None else list(rec.properties.items()))
        if len(cols[0]) >= rows_per_batch:
            yield _batch(cols, arrow_schema)
            cols = [[], [], [], [], [], []]
    if cols[0]:
        yield _batch(cols, arrow_schema)


def _batch(cols: list[list[Any]], schema: pa.Schema) -> pa.RecordBatch:
    arrays = [pa.array(values, type=f.type) for values, f in zip(cols, schema, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


class _ReaderRuntime:
    """The receiving side of a stream reader: spool, context, receiver, status file (driver side)."""

    def __init__(self, opts: ReadOptions, *, fresh: bool) -> None:
        self.opts = opts
        self.spool = Spool(
            opts.spool_dir,
            max_bytes=opts.max_spool_bytes,
            full_policy=opts.spool_full_policy,
            fsync=opts.spool_fsync,
            fail_on_data_loss=opts.fail_on_data_loss,
        )
        self.fresh = fresh
        self._initial: dict[str, Any] | None = self.spool.reset() if fresh else None
        self._last_end: dict[str, Any] = dict(self.spool.committed)
        self._names: dict[tuple[str, str], tuple[bytes, bytes, str]] = {}
        self.received = 0
        self.bos: set[str] = set()
        self.topics: set[str] = set()
        self.sources: set[str] = set()
        self.ended: set[str] = set()
        self.loss = 0
        self._stop = threading.Event()
        self._status_lock = threading.Lock()
        self._status_thread: threading.Thread | None = None
        self.ctx: openum.Context | None = None
        self.receiver: Any = None
        try:
            self.ctx = openum.Context(opts.um.build())
            if opts.topic is not None:
                self.receiver = self.ctx.create_receiver(opts.topic, self._on_message)
            else:
                assert opts.pattern is not None
                self.receiver = self.ctx.create_wildcard_receiver(opts.pattern, self._on_message)
        except BaseException:
            self.close()
            raise
        log.info("openum reader: %s, spool %s", opts.subscription, opts.spool_dir)
        self._status_thread = threading.Thread(
            target=self._status_loop, name="openum-spark-status", daemon=True
        )
        self._status_thread.start()

    # -- the receiving context thread ----------------------------------------------------------------
    def _on_message(self, msg: openum.Message) -> None:
        kind = msg.type
        if kind is openum.MsgType.DATA:
            names = self._names.get((msg.topic, msg.source))
            if names is None:
                names = (msg.topic.encode(), msg.source.encode(), stream_key(msg.topic, msg.source))
                self._names[(msg.topic, msg.source)] = names
                self.topics.add(msg.topic)
                self.sources.add(msg.source)
            props = msg.properties
            ptext = (
                json.dumps({str(k): _props_text(v) for k, v in props.items()}, sort_keys=True).encode()
                if props
                else b""
            )
            body = encode_body(
                names[0], names[1], msg.sequence_number, time.time_ns(), bytes(msg.data), ptext
            )
            if self.spool.append(names[2], body):
                self.received += 1
        elif kind is openum.MsgType.BOS:
            self.bos.add(msg.topic)
            self.sources.add(msg.source)
        elif kind is openum.MsgType.EOS:
            self.ended.add(msg.source)
        elif kind in (openum.MsgType.UNRECOVERABLE_LOSS, openum.MsgType.UNRECOVERABLE_LOSS_BURST):
            self.loss += 1
            log.warning("openum reader: unrecoverable loss on %s from %s", msg.topic, msg.source)

    # -- Spark's calls ---------------------------------------------------------------------------------
    def initial_offset(self) -> dict[str, Any]:
        if self._initial is None:
            # A checkpointed query was started earlier in this process and now asks for an initial
            # offset: it has no checkpoint after all; start from what is spooled now.
            self._initial = dict(self.spool.committed)
        return dict(self._initial)

    def latest_offset(self, start: dict[str, Any] | None, max_rows: int | None) -> dict[str, Any]:
        if start is None:  # PySpark < 4.2 does not say where the batch starts
            start = self._last_end
        end = self.spool.latest(start, max_rows)
        self._last_end = end
        return end

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        runs = self.spool.read(start, end, self.opts.messages_per_partition)
        if int(end["messages"]) > int(self._last_end.get("messages", 0)):
            self._last_end = dict(end)
        return [OpenUMPartition(first, count, blob) for first, count, blob in runs]

    def commit(self, end: dict[str, Any]) -> None:
        self.spool.commit(end)
        self._write_status()  # a fresh status at every batch boundary

    # -- status ----------------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "subscription": self.opts.subscription,
            "received": self.received,
            "topics": len(self.topics),
            "topics_begun": len(self.bos),
            "sources": len(self.sources),
            "sources_ended": len(self.ended),
            "unrecoverable_loss": self.loss,
            "spool": self.spool.stats(),
            "updated": time.time(),
        }

    def _write_status(self) -> None:
        # One writer at a time (the status thread and close()), each through its own temporary file:
        # two writers sharing one temporary file can leave a torn, unparseable status.json behind.
        path = Path(self.opts.spool_dir) / "status.json"
        with self._status_lock:
            tmp = path.with_name(f".status.{os.getpid()}.{threading.get_ident()}.tmp")
            text = json.dumps(self.status(), sort_keys=True)
            try:
                tmp.write_text(text, encoding="utf-8")
                os.replace(tmp, path)
            except OSError:
                tmp.unlink(missing_ok=True)
                # A full disk (the very thing the status must show): rewrite the file in place, which
                # reuses its blocks; not atomic, so a reader may rarely see it torn and read it again.
                with contextlib.suppress(OSError), open(path, "r+", encoding="utf-8") as out:
                    out.write(text)
                    out.truncate()

    def _status_loop(self) -> None:
        # At once, then every STATUS_INTERVAL: Spark may end the reader's process right after asking it
        # to stop, before close() writes the last status, so the file never waits for the first interval.
        self._write_status()
        while not self._stop.wait(STATUS_INTERVAL):
            self._write_status()

    def close(self) -> None:
        self._stop.set()
        if self._status_thread is not None and self._status_thread is not threading.current_thread():
            self._status_thread.join(timeout=5.0)
        self.spool.close()  # wakes a receive callback blocked on a full spool
        if self.receiver is not None:
            try:
                self.receiver.close()
            except openum.OpenUMError:
                log.exception("openum reader: closing the receiver failed")
        if self.ctx is not None:
            self.ctx.close()
        self._write_status()
