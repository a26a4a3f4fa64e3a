"""Market-data analytics: per-symbol OHLC, VWAP and message rates over event-time windows.

Subscribes to the demo's market data (``md/<venue>/<symbol>``, the 48-byte ticks of
:mod:`openum.demo.ticks`) with the ``openum`` data source, decodes the ticks with Spark SQL functions
(no Python UDF), and aggregates per symbol (all venues) over tumbling event-time windows with a
watermark: open/high/low/close of the trades, VWAP (sum of price x size over trades / sum of size),
volume, trades, messages and messages per second.  Each micro-batch's results go to Parquet (one
directory per batch, ``<output>/batch_id=N``, rewritten if Spark replays the batch) and are published as
JSON to ``analytics/<symbol>`` with the ``openum`` writer.

Run it with one command::

    python -m openum.spark.pipelines.market_data --duration 60
    spark-submit --master spark://host:7077 \\
        "$(python -c 'import openum.spark.pipelines.market_data as m; print(m.__file__)')" --duration 60

``--output-mode update`` (the default) publishes every window as it changes (the newest row of a
(symbol, window_start) is its latest value); ``append`` publishes each window once, final, after the
watermark passed its end.  See docs/spark.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from openum.demo.ticks import FLAG_TRADE, PRICE_SCALE, TICK_SIZE, TICK_VERSION

__all__ = [
    "Pipeline",
    "Tally",
    "analytics",
    "analytics_messages",
    "build_parser",
    "decode_ticks",
    "main",
    "start",
    "stop_between_batches",
    "um_options",
]

MARKER: Final = "@@demo "  # lines for the demo parent (openum demo --spark), not relayed
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NO_SPARK = 0, 1, 2, 3
EXPECT_GRACE = 15.0  # seconds without progress before giving up on the expected ticks
STOPPED = "stopped by the pipeline"
DESCRIPTION: Final = (
    "Market-data analytics on Spark: subscribes to md/<venue>/<symbol> ticks with the openum data source, "
    "computes per-symbol OHLC, VWAP and message rates over event-time windows with a watermark, writes "
    "Parquet and publishes the results as JSON to analytics/<symbol>."
)


# == the transformations (pure DataFrame functions) ===================================================
def _uint(payload: Any, offset: int, size: int) -> Any:
    """Big-endian unsigned field of ``size`` bytes at byte ``offset`` of a binary column, as a long."""
    from pyspark.sql import functions as sf

    return sf.conv(sf.hex(sf.substring(payload, offset + 1, size)), 16, 10).cast("long")


def decode_ticks(raw: Any) -> Any:
    """Rows of the openum source -> one row per tick (version 1 layout); other payloads are dropped.

    Columns: ``topic, venue, symbol, seq, time_ns, event_time, bid, ask, last (1/PRICE_SCALE units,
    long), size, trade``, and ``receive_time`` of the message.
    """
    from pyspark.sql import functions as sf

    p = sf.col("payload")
    parts = sf.split(sf.col("topic"), "/")
    ticks = raw.where(
        (sf.length(p) >= TICK_SIZE) & (_uint(p, 0, 1) == TICK_VERSION) & (sf.size(parts) == 3)
    ).select(
        sf.col("topic"),
        parts.getItem(1).alias("venue"),
        parts.getItem(2).alias("symbol"),
        _uint(p, 8, 8).alias("seq"),
        _uint(p, 16, 8).alias("time_ns"),
        _uint(p, 24, 8).alias("bid"),
        _uint(p, 32, 8).alias("ask"),
        _uint(p, 40, 8).alias("last"),
        _uint(p, 4, 4).alias("size"),
        ((_uint(p, 1, 1).bitwiseAND(FLAG_TRADE)) != 0).alias("trade"),
        sf.col("receive_time"),
    )
    return ticks.withColumn("event_time", sf.expr("timestamp_micros(time_ns div 1000)"))


def analytics(ticks: Any, window: str = "5 seconds", watermark: str = "2 seconds") -> Any:
    """Per (event-time window, symbol): open/high/low/close/VWAP of the trades (currency units), volume,
    trades, messages and msgs_per_sec.  Ties in time are broken by venue and topic sequence number."""
    from pyspark.sql import functions as sf

    seconds = _seconds(window)
    order = "named_struct('t', time_ns, 'v', venue, 's', seq)"
    scale = float(PRICE_SCALE)
    grouped = (
        ticks.withWatermark("event_time", watermark)
        .groupBy(sf.window("event_time", window).alias("window"), sf.col("symbol"))
        .agg(
            sf.count(sf.lit(1)).alias("messages"),
            sf.expr("count(1) FILTER (WHERE trade)").alias("trades"),
            sf.expr(f"min_by(last, {order}) FILTER (WHERE trade)").alias("open_raw"),
            sf.expr("max(last) FILTER (WHERE trade)").alias("high_raw"),
            sf.expr("min(last) FILTER (WHERE trade)").alias("low_raw"),
            sf.expr(f"max_by(last, {order}) FILTER (WHERE trade)").alias("close_raw"),
            sf.expr("sum(size) FILTER (WHERE trade)").alias("volume"),
            sf.expr("sum(last * size) FILTER (WHERE trade)").alias("notional_raw"),
        )
    )
    return grouped.select(
        sf.col("symbol"),
        sf.col("window.start").alias("window_start"),
        sf.col("window.end").alias("window_end"),
        (sf.col("open_raw") / scale).alias("open"),
        (sf.col("high_raw") / scale).alias("high"),
        (sf.col("low_raw") / scale).alias("low"),
        (sf.col("close_raw") / scale).alias("close"),
        (sf.col("notional_raw") / sf.col("volume") / scale).alias("vwap"),
        sf.coalesce(sf.col("volume"), sf.lit(0)).alias("volume"),
        sf.col("trades"),
        sf.col("messages"),
        (sf.col("messages") / sf.lit(seconds)).alias("msgs_per_sec"),
    )


def analytics_messages(results: Any, prefix: str = "analytics/") -> Any:
    """``topic`` = prefix + symbol, ``payload`` = the row as JSON (what the writer publishes)."""
    from pyspark.sql import functions as sf

    return results.select(
        sf.concat(sf.lit(prefix), sf.col("symbol")).alias("topic"),
        sf.to_json(sf.struct(*[sf.col(c) for c in results.columns])).alias("payload"),
    )


def _seconds(interval: str) -> float:
    number, _, unit = interval.strip().partition(" ")
    unit = unit.strip().lower().rstrip("s") or "second"
    factor = {"millisecond": 0.001, "second": 1, "minute": 60, "hour": 3600, "day": 86400}.get(unit)
    try:
        value = float(number)
    except ValueError:
        value = -1.0
    if factor is None or value <= 0:
        raise argparse.ArgumentTypeError(f"not an interval: {interval!r} (e.g. '5 seconds', '1 minute')")
    return value * factor


# == running it =======================================================================================
def um_options(configs: Sequence[str], options: Sequence[str], application: str | None) -> dict[str, str]:
    """``-c`` files, ``--option "scope name value"`` lines and ``--application`` as data source options."""
    out: dict[str, str] = {}
    if configs:
        out["config"] = ",".join(configs)
    for line in options:
        parts = line.split(None, 2)
        if len(parts) != 3:
            raise argparse.ArgumentTypeError(f"--option takes 'SCOPE OPTION VALUE', not {line!r}")
        out[f"option.{parts[0]}.{parts[1]}"] = parts[2]
    if application:
        out["application"] = application
    return out


def _interval(text: str) -> str:
    _seconds(text)
    return text


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m openum.spark.pipelines.market_data",
        description=DESCRIPTION,
        epilog="Exit status: 0 done; 1 the query failed (the error is printed); 2 bad usage or "
        "configuration; 3 Spark cannot run here (PySpark or Java missing; the reason is printed). "
        "See docs/spark.md.",
    )
    parser.add_argument(
        "--pattern", default="^md/", help="wildcard pattern of the tick topics (default '^md/')"
    )
    parser.add_argument(
        "--window", type=_interval, default="5 seconds", help="event-time window (default '5 seconds')"
    )
    parser.add_argument(
        "--watermark", type=_interval, default="2 seconds", help="allowed lateness (default '2 seconds')"
    )
    parser.add_argument(
        "--trigger", type=_interval, default="1 second", help="micro-batch interval (default '1 second')"
    )
    parser.add_argument(
        "--output-mode",
        choices=("update", "append"),
        default="update",
        help="update: publish windows as they change (default); append: each window once, after the "
        "watermark passed its end",
    )
    parser.add_argument(
        "--duration",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop after this long (default: until Ctrl-C)",
    )
    parser.add_argument(
        "--output",
        default="openum-analytics/parquet",
        help="Parquet directory or URI (default openum-analytics/parquet)",
    )
    parser.add_argument(
        "--checkpoint",
        default="openum-analytics/checkpoint",
        help="checkpoint location (default openum-analytics/checkpoint)",
    )
    parser.add_argument(
        "--spool-dir",
        default="openum-analytics/spool",
        help="the reader's spool on the driver (default openum-analytics/spool)",
    )
    parser.add_argument(
        "--publish-prefix",
        default="analytics/",
        help="topic prefix of the published results (default 'analytics/')",
    )
    parser.add_argument("--no-publish", action="store_true", help="only write Parquet")
    parser.add_argument(
        "--wait-receivers",
        type=int,
        default=0,
        metavar="N",
        help="publish only once N receivers joined each topic (default 0)",
    )
    parser.add_argument(
        "--max-messages-per-batch", type=int, default=None, metavar="N", help="cap on ticks per micro-batch"
    )
    parser.add_argument(
        "--master", default=None, help="Spark master (default local[*], or what spark-submit says)"
    )
    parser.add_argument("--spark-log-level", default="WARN", help="Spark's log level (default WARN)")
    parser.add_argument(
        "-c",
        "--config",
        action="append",
        default=[],
        metavar="FILE",
        help="UM configuration file; repeatable",
    )
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar='"SCOPE OPTION VALUE"',
        help="a UM option; repeatable",
    )
    parser.add_argument("--application", default=None, help="application name for XML configuration files")
    parser.add_argument(
        "--check",
        action="store_true",
        help="only check that Spark can run here (exit 0, or 3 with the reason)",
    )
    parser.add_argument("--query-name", default="openum_market_data", help="the streaming query's name")
    parser.add_argument("--control-stdin", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--expect-topics", type=int, default=0, help=argparse.SUPPRESS)
    return parser


def say(text: str) -> None:
    print(text, flush=True)


def _marker(kind: str, payload: Any = None, *, enabled: bool = True) -> None:
    if not enabled:
        return
    tail = "" if payload is None else " " + json.dumps(payload, sort_keys=True, separators=(",", ":"))
    print(f"{MARKER}{kind}{tail}", flush=True)


class _Control:
    """``expect N`` / ``stop`` lines from the demo parent on stdin (EOF is a stop)."""

    def __init__(self, enabled: bool) -> None:
        self.expect: int | None = None
        self.stop = threading.Event()
        if enabled:
            threading.Thread(target=self._read, name="pipeline-control", daemon=True).start()

    def _read(self) -> None:
        for line in sys.stdin:
            words = line.split()
            if words[:1] == ["stop"]:
                break
            if len(words) == 2 and words[0] == "expect" and words[1].isdigit():
                self.expect = int(words[1])
        self.stop.set()


class Tally:
    """What the foreachBatch sink did, per batch (written from Spark's thread, read by the main loop)."""

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.windows: dict[int, int] = {}
        self.published: dict[int, int] = {}

    def published_total(self) -> int:
        """Analytics messages published so far (rows the openum writer took)."""
        with self.lock:
            return sum(self.published.values())


def _sink(args: argparse.Namespace, writer_options: dict[str, str], tally: Tally) -> Any:
    def process(batch: Any, batch_id: int) -> None:
        try:
            _process(batch, batch_id)
        except Exception as exc:
            # Re-raised short: Spark matches a foreachBatch error's message against a regular expression
            # that overflows the JVM's stack on a long Py4J trace (StreamExecution.PROXY_ERROR).
            if tally.stopping.is_set():
                raise RuntimeError(f"{STOPPED}: micro-batch {batch_id} is replayed on restart") from None
            raise RuntimeError(f"micro-batch {batch_id} failed: {_short(exc)}") from None

    def _process(batch: Any, batch_id: int) -> None:
        batch = batch.persist()
        try:
            rows = batch.count()
            if rows:
                # One directory per batch, overwritten when Spark replays the batch: no duplicates.
                batch.coalesce(1).write.mode("overwrite").parquet(
                    f"{args.output.rstrip('/')}/batch_id={batch_id}"
                )
                if not args.no_publish:
                    messages = analytics_messages(batch, args.publish_prefix).coalesce(1)
                    messages.write.format("openum").options(**writer_options).mode("append").save()
            with tally.lock:
                tally.windows[batch_id] = rows
                tally.published[batch_id] = 0 if args.no_publish else rows
        finally:
            batch.unpersist()

    return process


def stop_between_batches(query: Any, timeout: float = 30.0) -> None:
    """Stop ``query`` once no micro-batch is running (up to ``timeout`` s), so no batch is cut short."""
    deadline = time.monotonic() + timeout
    while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline:
        time.sleep(0.02)
    query.stop()


def _status(spool_dir: str) -> dict[str, Any]:
    try:
        return dict(json.loads((Path(spool_dir) / "status.json").read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return {}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from openum.spark import SparkUnavailableError, check_spark, spark_session

    if args.check:
        try:
            say(f"Spark can run here: {check_spark()}")
        except (ImportError, SparkUnavailableError) as exc:
            say(str(exc))
            return EXIT_NO_SPARK
        return EXIT_OK
    try:
        um_options(args.config, args.option, args.application)  # bad usage: exit 2 before Spark starts
        _seconds(args.window)
    except argparse.ArgumentTypeError as exc:
        parser.error(str(exc))
    warnings.filterwarnings(
        "ignore", message="PySpark does not yet fully support pandas", category=FutureWarning
    )
    control = _Control(args.control_stdin)
    try:
        spark = spark_session("openum-market-data", master=args.master, log_level=args.spark_log_level)
    except (ImportError, SparkUnavailableError) as exc:
        say(f"error: {exc}")
        return EXIT_NO_SPARK
    try:
        return _run(spark, args, control)
    finally:
        spark.stop()


@dataclass
class Pipeline:
    """A started pipeline: its streaming query and what its sink did."""

    query: Any
    tally: Tally
    reader_options: dict[str, str]
    writer_options: dict[str, str]

    def stop(self) -> None:
        """Stop between micro-batches (an interrupted batch is replayed on restart)."""
        self.tally.stopping.set()
        stop_between_batches(self.query)


def start(spark: Any, args: argparse.Namespace) -> Pipeline:
    """Start the pipeline's query in ``spark`` (a session with the openum data source registered) with
    the options of :func:`build_parser`; errors in the options are raised here."""
    um = um_options(args.config, args.option, args.application)
    reader_options = {"pattern": args.pattern, "spoolDir": os.path.abspath(args.spool_dir), **um}
    if args.max_messages_per_batch:
        reader_options["maxMessagesPerBatch"] = str(args.max_messages_per_batch)
    writer_options = {"waitForReceivers": str(args.wait_receivers), **um}
    raw = spark.readStream.format("openum").options(**reader_options).load()
    results = analytics(decode_ticks(raw), args.window, args.watermark)
    tally = Tally()
    query = (
        results.writeStream.outputMode(args.output_mode)
        .foreachBatch(_sink(args, writer_options, tally))
        .option("checkpointLocation", args.checkpoint)
        .trigger(processingTime=args.trigger)
        .queryName(args.query_name)
        .start()
    )
    return Pipeline(query, tally, reader_options, writer_options)


def _import_openum_reader(batches: Any) -> Any:
    import openum.spark._source  # noqa: F401 - loaded once per Python worker, before the first batch

    yield from batches


def warm_up(spark: Any, window: str) -> None:
    """Run the pipeline's transformations once on one synthetic tick, and start Spark's Python workers
    with openum imported, so the first real micro-batch does not pay for it."""
    import datetime

    from openum.demo.ticks import Tick, encode_tick
    from openum.spark._source import SCHEMA

    now = datetime.datetime.now(datetime.UTC)
    tick = encode_tick(Tick(0, time.time_ns(), 100.0, 100.02, 100.01, 100, True))
    rows = [("md/WARM/UP", "warm-up", 0, now, tick, None)]
    analytics(decode_ticks(spark.createDataFrame(rows, SCHEMA)), window).collect()
    workers = spark.sparkContext.defaultParallelism
    spark.range(workers, numPartitions=workers).mapInArrow(_import_openum_reader, "id long").collect()


def _run(spark: Any, args: argparse.Namespace, control: _Control) -> int:
    began = time.monotonic()
    warm_up(spark, args.window)
    say(
        f"Spark {spark.version} is up ({spark.sparkContext.master}); warming up took "
        f"{time.monotonic() - began:.1f} s"
    )
    try:
        pipeline = start(spark, args)
    except Exception as exc:  # a bad option: Spark wraps our ConfigError
        say(f"error: {_short(exc)}")
        return EXIT_USAGE
    query, tally, reader_options = pipeline.query, pipeline.tally, pipeline.reader_options
    say(
        f"pipeline: {args.pattern!r} -> {args.window} windows (watermark {args.watermark}, "
        f"{args.output_mode} mode, "
        f"trigger {args.trigger}) -> Parquet {args.output}"
        + ("" if args.no_publish else f" and topics {args.publish_prefix}<symbol>")
    )
    began = time.monotonic()
    seen: set[int] = set()
    totals = {"ticks": 0, "batches": 0, "windows": 0, "published": 0}
    ready = False
    last_progress = time.monotonic()
    expect_at: float | None = None
    failed: str | None = None
    try:
        while query.isActive:
            time.sleep(0.25)
            for progress in list(query.recentProgress):
                bid = int(progress["batchId"])
                if bid in seen:
                    continue
                with tally.lock:
                    if bid not in tally.windows:
                        continue  # the sink has not finished this batch yet
                    windows, published = tally.windows[bid], tally.published[bid]
                seen.add(bid)
                n = int(progress.get("numInputRows", 0))
                totals["ticks"] += n
                totals["batches"] += 1
                totals["windows"] += windows
                totals["published"] += published
                if n or windows:
                    last_progress = time.monotonic()
                    took = float(progress.get("batchDuration", 0)) / 1000
                    say(
                        f"batch {bid}: {n:,} ticks in, {windows} window rows out"
                        + (f", published {published}" if published else "")
                        + f" ({took:.1f} s)"
                    )
            status = _status(reader_options["spoolDir"])
            if not ready and status and status.get("topics_begun", 0) >= max(1, args.expect_topics):
                ready = True
                say(
                    f"receiving: {status.get('topics_begun')} topics from {status.get('sources')} sources "
                    f"(spool {reader_options['spoolDir']})"
                )
                _marker("ready", {"topics": status.get("topics_begun")}, enabled=args.control_stdin)
            if args.duration is not None and time.monotonic() - began >= args.duration:
                break
            if control.stop.is_set():
                break
            if control.expect is not None:
                if expect_at is None:
                    expect_at = time.monotonic()
                quiet = time.monotonic() - max(last_progress, expect_at)
                if totals["ticks"] >= control.expect and quiet > 2 * _seconds(args.trigger):
                    break
                if quiet > EXPECT_GRACE and not query.status.get("isTriggerActive"):
                    say(
                        f"no new ticks for {EXPECT_GRACE:g} s; stopping with {totals['ticks']:,} of "
                        f"{control.expect:,}"
                    )
                    break
    except KeyboardInterrupt:
        say("interrupted")
    tally.stopping.set()
    error = query.exception()
    if error is None:
        stop_between_batches(query)
        error = query.exception()
    if error is not None and STOPPED not in str(error):
        failed = _short(error)
    status = _status(reader_options["spoolDir"])
    seconds = time.monotonic() - began
    if failed:
        say(f"error: the query failed: {failed}")
    say(
        f"done: {totals['ticks']:,} ticks in {totals['batches']} batches, {totals['windows']:,} window "
        "rows to "
        f"Parquet, {totals['published']:,} published, in {seconds:.1f} s"
    )
    _marker(
        "summary",
        {
            **totals,
            "seconds": round(seconds, 3),
            "received": status.get("received", 0),
            "failed": failed,
            "output": args.output,
        },
        enabled=args.control_stdin,
    )
    return EXIT_FAILED if failed else EXIT_OK


_MARKERS = (
    "ConfigError: ",
    "SchemaError: ",
    "SpoolError: ",
    "SpoolFullError: ",
    "SpoolDiskFullError: ",
    "SpoolDataLossError: ",
    "TimeoutError: ",
    "RuntimeError: ",
)


def _short(exc: BaseException) -> str:
    """The useful line of an exception Spark wrapped (our error's message, not the JVM trace)."""
    text = str(exc)
    for marker in _MARKERS:
        if marker in text:
            return marker + text.rsplit(marker, 1)[1].splitlines()[0]
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and "Py4JJavaError" not in ln]
    return lines[0][:500] if lines else type(exc).__name__


if __name__ == "__main__":
    sys.exit(main())
