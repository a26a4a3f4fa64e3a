"""Pipelines shipped with openum, each runnable with one command on ``local[*]`` and unchanged with
``spark-submit --master ...`` (docs/spark.md).

- :mod:`openum.spark.pipelines.market_data`: per-symbol OHLC, VWAP and message rates over event-time
  windows of the demo's market data (``md/<venue>/<symbol>``), to Parquet and to ``analytics/<symbol>``.
"""
