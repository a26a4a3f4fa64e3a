"""The market-data analytics pipeline (openum.spark.pipelines.market_data) on a real local Spark.

Known ticks go in over openum (two venues of one symbol, one venue of another, a topic the pattern does
not match); the pipeline's Parquet output and the analytics it publishes to ``analytics/<symbol>`` must
hold the OHLC, volume, counts and VWAP computed here independently from the same ticks.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import openum
from openum.demo.ticks import PRICE_SCALE, Tick, encode_tick
from openum.spark.pipelines.market_data import build_parser, start
from tests.helpers import wait_until
from tests.integration.pubsub import Ports, Recorder, SourceEvents
from tests.spark.conftest import PANDAS_WARNING

WAIT = 90.0
WINDOW_NS = 10 * 1_000_000_000
BASE_NS = 1_700_000_000 * 1_000_000_000  # a multiple of the 10 s window


def make_ticks(seed: int = 7) -> list[tuple[str, Tick]]:
    """Ticks in event-time order (so none is late for the watermark): ~40 % trades."""
    rng = random.Random(seed)
    topics = ["md/NYSE/AAPL", "md/ARCA/AAPL", "md/NYSE/MSFT"]
    seq = dict.fromkeys(topics, 0)
    out: list[tuple[str, Tick]] = []
    t = BASE_NS + 1_000_000
    for _ in range(300):
        topic = rng.choice(topics)
        t += rng.randrange(20_000_000, 60_000_000)  # 20-60 ms apart: spans two windows
        mid = (1_502_000 if topic.endswith("AAPL") else 4_101_000) + rng.randrange(-500, 500) * 100
        trade = rng.random() < 0.4
        size = rng.choice((100, 200, 300, 500, 1000)) if trade else 0
        tick = Tick(
            seq[topic],
            t,
            (mid - 100) / PRICE_SCALE,
            (mid + 100) / PRICE_SCALE,
            mid / PRICE_SCALE,
            size,
            trade,
        )
        seq[topic] += 1
        out.append((topic, tick))
    return out


def expected(ticks: list[tuple[str, Tick]]) -> dict[tuple[str, int], dict[str, Any]]:
    """Per (symbol, window start ns): the analytics, computed independently of Spark."""
    groups: dict[tuple[str, int], list[Tick]] = defaultdict(list)
    for topic, tick in ticks:
        groups[(topic.split("/")[2], tick.time_ns // WINDOW_NS * WINDOW_NS)].append(tick)
    out = {}
    for key, group in groups.items():
        trades = [t for t in group if t.trade]
        units = [(round(t.last * PRICE_SCALE), t.size, t.time_ns) for t in trades]
        volume = sum(size for _, size, _ in units)
        out[key] = {
            "messages": len(group),
            "trades": len(trades),
            "volume": volume,
            "vwap": sum(p * s for p, s, _ in units) / volume / PRICE_SCALE if volume else None,
            "open": min(units, key=lambda u: u[2])[0] / PRICE_SCALE if units else None,
            "close": max(units, key=lambda u: u[2])[0] / PRICE_SCALE if units else None,
            "high": max(p for p, _, _ in units) / PRICE_SCALE if units else None,
            "low": min(p for p, _, _ in units) / PRICE_SCALE if units else None,
        }
    return out


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.filterwarnings(PANDAS_WARNING)
def test_pipeline_vwap_and_ohlc_match_an_independent_computation(
    spark: Any, ports: Ports, workdir: Path
) -> None:
    from pyspark.sql import Window
    from pyspark.sql import functions as sf

    ticks = make_ticks()
    want = expected(ticks)
    assert len(want) == 4  # two symbols x two windows
    argv = [
        "--window", "10 seconds", "--watermark", "1 second", "--trigger", "500 milliseconds",
        "--output", str(workdir / "parquet"), "--checkpoint", str(workdir / "checkpoint"),
        "--spool-dir", str(workdir / "spool"), "--wait-receivers", "1", "--query-name", "test_market_data",
    ]  # fmt: skip
    for line in ports.options():
        argv += ["--option", line]
    pipeline = start(spark, build_parser().parse_args(argv))
    analytics = Recorder()
    topics = sorted({t for t, _ in ticks})
    events = {t: SourceEvents() for t in topics}

    def joined() -> bool:
        return all(e.count(openum.SourceEvent.CONNECT) for e in events.values())

    try:
        with openum.Context(options=ports.options()) as ctx:
            ctx.create_wildcard_receiver("^analytics/", analytics)
            sources = {t: ctx.create_source(t, event_callback=events[t]) for t in topics}
            sources["other/NYSE/AAPL"] = ctx.create_source("other/NYSE/AAPL")
            assert wait_until(lambda: joined() or not pipeline.query.isActive, WAIT), (
                "the receiver never joined"
            )
            assert pipeline.query.isActive, pipeline.query.exception()
            for topic, tick in ticks:
                sources[topic].send(encode_tick(tick))
            sources["other/NYSE/AAPL"].send(encode_tick(ticks[0][1]))  # not '^md/': not counted
            for src in sources.values():
                src.flush()

            def processed() -> int:
                return sum(int(p["numInputRows"]) for p in pipeline.query.recentProgress)

            assert wait_until(lambda: processed() >= len(ticks), WAIT), (
                f"{processed()} of {len(ticks)} ticks processed"
            )
            # The batch that took the last ticks has also written Parquet and published.
            last = max(int(p["batchId"]) for p in pipeline.query.recentProgress if p["numInputRows"])
            assert wait_until(lambda: last in pipeline.tally.windows, WAIT)
            assert wait_until(lambda: analytics.count() >= pipeline.tally.published_total(), WAIT)
    finally:
        pipeline.stop()
    assert processed() == len(ticks)

    rows = spark.read.parquet(str(workdir / "parquet"))
    newest = Window.partitionBy("symbol", "window_start").orderBy(sf.col("batch_id").desc())
    final = (
        rows.withColumn("rank", sf.row_number().over(newest))
        .where("rank = 1")
        .withColumn("start_s", sf.unix_timestamp("window_start"))
        .collect()
    )
    got = {(r.symbol, int(r.start_s) * 1_000_000_000): r for r in final}
    assert set(got) == set(want)
    for key, w in want.items():
        r = got[key]
        assert r.vwap == pytest.approx(w["vwap"], rel=1e-12), key
        assert (r.open, r.high, r.low, r.close) == pytest.approx(
            (w["open"], w["high"], w["low"], w["close"])
        ), key
        assert (r.volume, r.trades, r.messages) == (w["volume"], w["trades"], w["messages"]), key
        assert r.msgs_per_sec == pytest.approx(w["messages"] / 10)

    published: dict[tuple[str, str], dict[str, Any]] = {}
    for g in analytics.of(openum.MsgType.DATA):
        row = json.loads(g.data)
        assert g.topic == f"analytics/{row['symbol']}"
        published[(row["symbol"], row["window_start"])] = row  # the newest value of each window wins
    assert len(published) == len(want)
    by_symbol = defaultdict(list)
    for (symbol, _), row in sorted(published.items()):
        by_symbol[symbol].append(row["vwap"])
    for symbol, vwaps in by_symbol.items():
        expected_vwaps = [w["vwap"] for (s, _), w in sorted(want.items()) if s == symbol]
        assert vwaps == pytest.approx(expected_vwaps, rel=1e-12)


def test_pipeline_command_line_help_and_check_run_without_spark_session() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "openum.spark.pipelines.market_data", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0
    assert "OHLC, VWAP" in done.stdout
    assert "--window" in done.stdout
    assert "spark-submit" not in done.stderr
