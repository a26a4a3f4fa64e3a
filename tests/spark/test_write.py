"""Writing to openum from a real local Spark: a streaming write and a batch write each arrive exactly
once at a receiver in the test process (checked like ``openum recv --verify``: every counter once, and
every source's topic sequence numbers 0, 1, 2, ... without a gap); and the errors a user can act on.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

import openum
from tests.integration.pubsub import Got, Ports, Recorder
from tests.spark.conftest import PANDAS_WARNING, um_options

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.filterwarnings(PANDAS_WARNING)]

WAIT = 90.0


def verify(got: list[Got], n: int) -> dict[str, list[int]]:
    """``openum recv --verify``: counters 0..n-1 exactly once; per source, sequence numbers without a
    gap from 0.  Returns the counters per source."""
    counts = Counter(g.counter for g in got)
    assert sorted(counts) == list(range(n)), f"missing: {sorted(set(range(n)) - set(counts))[:10]}"
    assert all(c == 1 for c in counts.values()), f"duplicates: {[k for k, c in counts.items() if c > 1][:10]}"
    per_source: dict[str, list[int]] = defaultdict(list)
    sqns: dict[str, list[int]] = defaultdict(list)
    for g in got:
        per_source[g.source].append(g.counter)
        sqns[g.source].append(g.sqn)
    for source, numbers in sqns.items():
        assert numbers == list(range(len(numbers))), f"{source}: sequence numbers {numbers[:10]}..."
    return dict(per_source)


def test_batch_write_arrives_exactly_once_with_properties(spark: Any, ports: Ports) -> None:
    from pyspark.sql import functions as sf

    n = 2000
    recorder = Recorder()
    df = spark.range(0, n, numPartitions=2).select(
        sf.unhex(sf.lpad(sf.hex(sf.col("id")), 16, "0")).alias("payload"),
        sf.when(sf.col("id") % 100 == 0, sf.create_map(sf.lit("n"), sf.col("id").cast("string"))).alias(
            "properties"
        ),
    )
    with openum.Context(options=ports.options()) as ctx:
        ctx.create_receiver("spark/batch", recorder)
        (
            df.write.format("openum")
            .option("topic", "spark/batch")
            .option("waitForReceivers", "1")
            .options(**um_options(ports))
            .mode("append")
            .save()
        )
        assert recorder.wait_count(n, timeout=WAIT), f"{recorder.count()} of {n} arrived"
    got = recorder.of(openum.MsgType.DATA)
    per_source = verify(got, n)
    assert len(per_source) == 2  # one source per topic per task
    for g in got:
        assert g.properties == ({"n": str(g.counter)} if g.counter % 100 == 0 else None)


def test_batch_write_with_a_topic_column_over_lbtru(spark: Any, ports: Ports) -> None:
    from pyspark.sql import functions as sf

    n = 600
    recorders = {t: Recorder() for t in ("spark/ru/a", "spark/ru/b")}
    df = spark.range(0, n, numPartitions=1).select(
        sf.when(sf.col("id") % 2 == 0, sf.lit("spark/ru/a")).otherwise(sf.lit("spark/ru/b")).alias("topic"),
        sf.concat(sf.unhex(sf.lpad(sf.hex(sf.col("id")), 16, "0")), sf.lit(b"!")).alias("payload"),
    )
    with openum.Context(options=ports.options()) as ctx:
        for topic, rec in recorders.items():
            ctx.create_receiver(topic, rec)
        (
            df.write.format("openum")
            .option("transport", "lbtru")
            .option("waitForReceivers", "1")
            .options(**um_options(ports))
            .mode("append")
            .save()
        )
        for rec in recorders.values():
            assert rec.wait_count(n // 2, timeout=WAIT), f"{rec.count()} of {n // 2} arrived"
    got_a, got_b = (rec.of(openum.MsgType.DATA) for rec in recorders.values())
    assert sorted(g.counter for g in got_a) == list(range(0, n, 2))
    assert sorted(g.counter for g in got_b) == list(range(1, n, 2))
    assert all(g.source.startswith("LBT-RU:") and g.data.endswith(b"!") for g in got_a + got_b)


def test_streaming_write_arrives_exactly_once_and_commits_carry_counts(
    spark: Any, ports: Ports, workdir: Path
) -> None:
    from pyspark.sql import functions as sf

    n, files = 1500, 3
    source_dir, checkpoint = workdir / "in", workdir / "checkpoint"
    spark.range(0, n, numPartitions=files).write.parquet(str(source_dir))
    stream = (
        spark.readStream.schema("id long")
        .option("maxFilesPerTrigger", 1)
        .parquet(str(source_dir))
        .select(sf.unhex(sf.lpad(sf.hex(sf.col("id")), 16, "0")).alias("payload"))
    )
    recorder = Recorder()
    with openum.Context(options=ports.options()) as ctx:
        ctx.create_receiver("spark/stream", recorder)
        query = (
            stream.writeStream.format("openum")
            .option("topic", "spark/stream")
            .option("waitForReceivers", "1")
            .options(**um_options(ports))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(WAIT), "the streaming write did not finish"
        assert query.exception() is None
        assert recorder.wait_count(n, timeout=WAIT), f"{recorder.count()} of {n} arrived"
    per_source = verify(recorder.of(openum.MsgType.DATA), n)
    assert len(per_source) == files  # one batch per file, one task per batch: a source each
    state = json.loads((checkpoint / "openum-sink.json").read_text(encoding="utf-8"))
    assert state["published"] == {"spark/stream": n}  # the sum of the commit messages' counts
    assert state["last_batch"] == files - 1


def test_a_replayed_streaming_batch_that_was_committed_is_not_published_again(
    spark: Any, ports: Ports, workdir: Path
) -> None:
    from pyspark.sql import functions as sf

    checkpoint = workdir / "checkpoint"
    source_dir = workdir / "in"
    spark.range(0, 10, numPartitions=1).write.parquet(str(source_dir))

    def run(expect: int) -> Recorder:
        recorder = Recorder()
        with openum.Context(options=ports.options()) as ctx:
            ctx.create_receiver("spark/replay", recorder)
            query = (
                spark.readStream.schema("id long")
                .parquet(str(source_dir))
                .select(sf.col("id").cast("string").alias("payload"))
                .writeStream.format("openum")
                .option("topic", "spark/replay")
                .option("waitForReceivers", "1")
                .options(**um_options(ports))
                .option("checkpointLocation", str(checkpoint))
                .trigger(availableNow=True)
                .start()
            )
            assert query.awaitTermination(WAIT)
            assert query.exception() is None
            # The tasks drained their sources before the query ended; a moment for the receiver.
            recorder.wait_count(10, timeout=WAIT if expect else 2)
        return recorder

    assert run(10).count() == 10
    # Spark crashed after the sink committed batch 0 but before its own commit log said so: on
    # restart Spark runs batch 0 again; the sink's record of committed batches keeps it from
    # being published twice.
    for name in ("0", ".0.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    assert run(0).count() == 0
    state = json.loads((checkpoint / "openum-sink.json").read_text(encoding="utf-8"))
    assert state["skipped_batches"] == 1  # Spark did run batch 0 again; the sink skipped it
    assert state["published"] == {"spark/replay": 10}


# -- errors a user can act on -------------------------------------------------------------------------
def error_text(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def payload_column() -> Any:
    from pyspark.sql import functions as sf

    return sf.lit(b"x").alias("payload")


def test_unknown_option_names_are_refused_with_a_suggestion(spark: Any) -> None:
    from pyspark.errors import AnalysisException

    with pytest.raises(AnalysisException, match="PYTHON_DATA_SOURCE_ERROR") as err:
        spark.readStream.format("openum").option("topic", "t").option("maxMessagesPerBatc", "5").load()
    text = error_text(err.value)
    assert "ConfigError" in text
    assert "unknown option 'maxmessagesperbatc'" in text
    assert "did you mean 'maxMessagesPerBatch'" in text
    writer = spark.range(1).select(payload_column()).write.format("openum").option("topic", "t")
    with pytest.raises(AnalysisException, match="did you mean 'waitForReceivers'"):
        writer.option("waitForReceiver", "1").mode("append").save()
    reader = spark.readStream.format("openum").option("topic", "t")
    with pytest.raises(AnalysisException, match="did you mean resolver_multicast_port"):
        reader.option("option.context.resolver_multicast_prot", "1").load()


def test_reading_without_topic_or_pattern_says_what_to_give(spark: Any) -> None:
    from pyspark.errors import AnalysisException

    with pytest.raises(AnalysisException) as err:
        spark.readStream.format("openum").load()
    assert "needs exactly one of the options 'topic' (one topic) and 'pattern'" in error_text(err.value)


def test_a_payload_column_of_the_wrong_type_is_refused(spark: Any) -> None:
    from pyspark.errors import AnalysisException

    numbers = spark.range(3).withColumnRenamed("id", "payload")
    with pytest.raises(AnalysisException) as err:
        numbers.write.format("openum").option("topic", "t").mode("append").save()
    text = error_text(err.value)
    assert "SchemaError" in text
    assert "the payload column must be binary or string, not bigint" in text
    payloads = spark.range(3).select(payload_column())
    with pytest.raises(AnalysisException) as err:
        payloads.write.format("openum").mode("append").save()
    assert "needs a topic: give the option 'topic' or a string column 'topic'" in error_text(err.value)
    multicast = payloads.write.format("openum").option("topic", "t").option("transport", "lbtrm")
    with pytest.raises(AnalysisException) as err:
        multicast.option("waitForReceivers", "1").mode("append").save()
    assert "waitForReceivers" in error_text(err.value)
    assert "lbtrm, whose sources are not told when a receiver joins" in error_text(err.value)
