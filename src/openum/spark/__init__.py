"""openum for Apache Spark: the ``openum`` data source (PySpark >= 4.0) and shipped pipelines.

ARCHITECTURE.md 7; docs/spark.md.  The top layer: it uses openum's public API and the configuration
registry; nothing below it imports pyspark (a unit test checks), and importing this package does not
import pyspark either, so ``--help`` and the checks below work without it::

    from openum.spark import register, spark_session

    spark = spark_session("my-app")            # local[*] unless spark-submit chose a master; registers
    # or, with a session of your own:  register(spark)
    ticks = (spark.readStream.format("openum").option("pattern", "^md/")
             .option("option.context.resolver_multicast_port", "12965").load())

Errors a user can act on: :func:`check_pyspark` raises :class:`ImportError` naming
``pip install 'openum[spark]'``; :func:`find_java` raises :class:`SparkUnavailableError` naming
``JAVA_HOME`` and ``apt-get install openjdk-17-jre-headless``; bad options raise
:class:`openum.ConfigError`; rows without a usable payload column raise :class:`SchemaError`.

The stream reader runs its receiver in the long-lived Python process Spark starts beside the driver
for the query (see :mod:`openum.spark._source` for where every method runs, the spool and the limits).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from openum.spark._options import SchemaError

__all__ = [
    "INSTALL_HINT",
    "JAVA_HINT",
    "MIN_JAVA",
    "MIN_PYSPARK",
    "SchemaError",
    "SparkUnavailableError",
    "check_pyspark",
    "check_spark",
    "find_java",
    "register",
    "spark_session",
]

MIN_PYSPARK: Final = (4, 0)
MIN_JAVA: Final = 17
INSTALL_HINT: Final = (
    "pip install 'openum[spark]'  (in this project: make test, or .venv/bin/pip install -e '.[spark]')"
)
JAVA_HINT: Final = (
    "Spark needs Java 17 or newer: set JAVA_HOME to a Java 17+ installation, or install one, e.g. "
    "apt-get install openjdk-17-jre-headless"
)
_JAVA_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')


class SparkUnavailableError(RuntimeError):
    """Spark cannot start here (no Java, or a Java that is too old); the message says what to do."""


def check_pyspark() -> str:
    """The PySpark version; :class:`ImportError` with the install command when it is missing or old."""
    try:
        import pyspark
    except ImportError as exc:
        raise ImportError(
            f"openum.spark needs PySpark >= 4.0, which is not installed: {INSTALL_HINT}"
        ) from exc
    version = str(getattr(pyspark, "__version__", "0"))
    numbers = tuple(int(p) for p in re.findall(r"\d+", version)[:2])
    if numbers < MIN_PYSPARK:
        raise ImportError(
            f"openum.spark needs PySpark >= 4.0 (its Python Data Source API), this is {version}: "
            f"{INSTALL_HINT}"
        )
    return version


def find_java() -> str:
    """The ``java`` Spark will start (``$JAVA_HOME/bin/java``, else ``java`` on ``PATH``), checked to be
    Java 17 or newer; :class:`SparkUnavailableError` otherwise."""
    home = os.environ.get("JAVA_HOME")
    if home:
        java = str(Path(home) / "bin" / "java")
        if not os.access(java, os.X_OK):
            raise SparkUnavailableError(f"JAVA_HOME is {home}, but {java} is not an executable. {JAVA_HINT}")
    else:
        found = shutil.which("java")
        if found is None:
            raise SparkUnavailableError(
                f"no Java found (JAVA_HOME is not set and there is no java on PATH). {JAVA_HINT}"
            )
        java = found
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SparkUnavailableError(f"{java} -version failed ({exc}). {JAVA_HINT}") from None
    match = _JAVA_VERSION.search(out.stderr + out.stdout)
    if match:
        major = int(match.group(1))
        if major == 1 and match.group(2):  # "1.8.0_392" is Java 8
            major = int(match.group(2))
        if major < MIN_JAVA:
            raise SparkUnavailableError(f"{java} is Java {major}. {JAVA_HINT}")
    return java


def check_spark() -> str:
    """Everything :func:`spark_session` needs is here; returns a one-line description of it."""
    version = check_pyspark()
    java = find_java()
    return f"PySpark {version}, Java {java}"


def register(spark: Any) -> None:
    """Make ``format("openum")`` known to ``spark`` (a SparkSession)."""
    check_pyspark()
    from openum.spark._source import OpenUMDataSource

    spark.dataSource.register(OpenUMDataSource)


_LOG4J = """\
rootLogger.level = {level}
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{HH:mm:ss}} %p %c{{1}}: %m%n
logger.utils.name = org.apache.spark.util.Utils
logger.utils.level = error
logger.hadoop.name = org.apache.hadoop.util.NativeCodeLoader
logger.hadoop.level = error
logger.tasksize.name = org.apache.spark.scheduler.TaskSetManager
logger.tasksize.level = error
logger.dag.name = org.apache.spark.scheduler.DAGScheduler
logger.dag.level = error
"""


def _log4j_file(level: str) -> Path:
    """Spark's logging configuration for ``level``: one file per user and level, rewritten if changed."""
    text = _LOG4J.format(level=level.lower())
    path = Path(tempfile.gettempdir()) / f"openum-spark-log4j2-{os.getuid()}-{level.lower()}.properties"
    try:
        if path.read_text(encoding="utf-8") == text:
            return path
    except OSError:
        pass
    fd, tmp = tempfile.mkstemp(prefix="openum-spark-log4j2-", suffix=".tmp", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(tmp, path)
    return path


def spark_session(
    app_name: str = "openum",
    *,
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    log_level: str = "WARN",
) -> Any:
    """A SparkSession with the ``openum`` data source registered.

    ``master``: when None, ``local[*]`` unless the script was started by ``spark-submit`` (which
    chose the master).  Outside ``spark-submit``, Spark's Python workers use this interpreter (so they
    import the same openum) unless ``PYSPARK_PYTHON`` says otherwise.  ``log_level`` sets Spark's own
    logging (``WARN``, ``ERROR``, ...) from the start.  :class:`ImportError` / :class:`SparkUnavailableError`
    with what to do when PySpark or Java is missing.
    """
    check_spark()
    from pyspark.sql import SparkSession

    submitted = "PYSPARK_GATEWAY_PORT" in os.environ  # the JVM is already up: spark-submit started us
    if not submitted:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    elif not submitted:
        builder = builder.master("local[*]")
    settings = {
        "spark.ui.showConsoleProgress": "false",
        # Few, small micro-batches: one shuffle partition per core (Spark's default of 200 makes every
        # stateful micro-batch run 200 tasks).
        "spark.sql.shuffle.partitions": str(max(2, min(8, os.cpu_count() or 2))),
        "spark.sql.streaming.stopGracefullyOnShutdown": "true",
    }
    if not submitted:
        path = _log4j_file(log_level)
        settings["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile=file:{path}"
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    register(spark)
    return spark
