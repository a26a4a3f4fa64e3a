"""The main demo (``openum demo``, ``make run``): simulated market data across processes.

A publisher process creates one source per ``md/<venue>/<symbol>`` topic and sends simulated ticks
(:mod:`openum.demo.ticks`: a random walk per symbol, a fixed 48-byte binary layout with a version byte)
at a steady rate with intelligent batching; a subscriber process receives every topic through one
wildcard receiver on ``^md/`` with an event queue dispatched on its main thread, counts per topic and
venue, checks sequence numbers and prints a live rate line and a final summary.  A parent process
starts both, relays their output with ``[pub]``/``[sub]`` prefixes and judges the run.

``openum demo --spark`` (:func:`run_spark_demo`, what ``make run`` runs) puts the Spark market-data
pipeline (``openum.spark.pipelines.market_data``, started as a process) between the publisher and an
analytics subscriber (:func:`run_analytics_subscriber`).

Like the ``openum.cli`` layer, this package uses only openum's public API.  See ``docs/demo.md`` and
``docs/spark.md``.
"""

from __future__ import annotations

from typing import Final

from openum.demo._analytics import run_analytics_subscriber
from openum.demo._control import Settings
from openum.demo._publisher import run_publisher
from openum.demo._runner import run_demo
from openum.demo._spark import run_spark_demo
from openum.demo._subscriber import run_subscriber
from openum.demo.ticks import DEFAULT_VENUES, SYMBOLS, check_universe

__all__ = [
    "DEFAULT_VENUES",
    "DESCRIPTION",
    "EPILOG",
    "SYMBOLS",
    "Settings",
    "check_universe",
    "run_analytics_subscriber",
    "run_demo",
    "run_publisher",
    "run_spark_demo",
    "run_subscriber",
]

DESCRIPTION: Final = (
    "The main demo: a publisher of simulated market data (one topic per md/<venue>/<symbol>) and a "
    "subscriber with one wildcard receiver on '^md/', in two child processes on this machine (the "
    "embedded default: topic resolution over loopback multicast, the TCP transport). The subscriber "
    "prints a live line about every second and, at the end, a per-venue summary and the top 10 symbols "
    "by message count with their last price and VWAP."
)
EPILOG: Final = (
    "The children get this command's -c/--option/--application arguments. Exit status: 0 when the "
    "subscriber saw ticks on every topic with no sequence gap and every sent tick arrived; 1 otherwise "
    "(the reasons are printed); 2 bad usage or configuration; 130 interrupted. --json prints the final "
    "summary as one JSON object on stdout (the relayed output then goes to stderr). --spark adds the Spark "
    "pipeline and an analytics subscriber (what make run runs). See docs/demo.md and docs/spark.md."
)
