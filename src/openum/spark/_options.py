"""Options of the ``openum`` Spark data source, parsed and checked without Spark (docs/spark.md).

Spark hands a data source its options as strings in a case-insensitive mapping (the keys usually
arrive lower-cased), so names are matched without regard to case and reported in their documented
spelling.  Three kinds of keys exist:

- the data source's own options (``topic``, ``pattern``, ``maxMessagesPerBatch``, ``spoolDir``, ...),
  different for reading and writing (:data:`READ_OPTIONS`, :data:`WRITE_OPTIONS`);
- ``config``: UM configuration files (flat or XML, comma-separated), read on the driver and shipped with
  the options, so executors need not see the same file system; ``application`` selects an XML
  ``<application>``;
- ``option.<scope>.<name>``: one UM option, exactly as ``openum --option "<scope> <name> <value>"``
  (e.g. ``option.context.resolver_multicast_port`` = ``12965``), checked against openum's option registry.

Every mistake is an :class:`openum.ConfigError` naming the option, what is allowed and, for a misspelt
name, the nearest known names.  This module imports no pyspark: unit tests and ``--help`` use it as is.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

from openum import Config, ConfigError
from openum.config import parse_option_line

__all__ = [
    "READ_OPTIONS",
    "SPARK_OPTIONS",
    "WRITE_OPTIONS",
    "ReadOptions",
    "SchemaError",
    "UMConfig",
    "WriteOptions",
    "check_names",
    "default_spool_root",
    "parse_read_options",
    "parse_size",
    "parse_write_options",
]

Role = Literal["read", "write", "any"]

#: The data source's own options when reading: documented name -> one-line description.
READ_OPTIONS: Final[dict[str, str]] = {
    "topic": "the topic to subscribe to (a receiver); give topic or pattern",
    "pattern": "a wildcard pattern (Python regular expression, e.g. '^md/'): a wildcard receiver",
    "config": "UM configuration files (flat or XML), comma-separated",
    "application": "the application name selecting an <application> of XML configuration files",
    "maxMessagesPerBatch": "at most this many messages per micro-batch (default: all that arrived)",
    "messagesPerPartition": "messages per Spark input partition of a micro-batch (default 5000)",
    "spoolDir": "directory of the on-disk spool (default: derived from topic/pattern and configuration)",
    "maxSpoolBytes": "spool size limit, bytes or with k/m/g (default 1g)",
    "spoolFullPolicy": "'block' (default: stop reading, TCP flow control) or 'fail' (fail the query)",
    "spoolFsync": "'batch' (default: fsync before an offset is handed to Spark), 'always' or 'none'",
    "failOnDataLoss": "'true' (default: a batch with messages lost to spool damage fails the query) or "
    "'false' (go on without them, counted)",
}

#: The data source's own options when writing.
WRITE_OPTIONS: Final[dict[str, str]] = {
    "topic": "the topic of rows without a topic column (or with a null topic)",
    "config": "UM configuration files (flat or XML), comma-separated",
    "application": "the application name selecting an <application> of XML configuration files",
    "transport": "the transport of the sources (UM option 'source transport'; default tcp)",
    "waitForReceivers": "before sending on a topic, wait until this many receivers joined (default 0; "
    "tcp and lbtru)",
    "receiverTimeoutMs": "how long to wait for them before the task fails (default 10000)",
    "drainTimeoutMs": "how long a task waits for slow receivers to take what was sent (default 10000)",
}

#: Keys Spark itself may put into a data source's options; accepted and ignored.
SPARK_OPTIONS: Final = frozenset({"checkpointlocation", "path", "queryname"})

UM_OPTION_PREFIX: Final = "option."
DEFAULT_MAX_SPOOL_BYTES: Final = 1 << 30
DEFAULT_MESSAGES_PER_PARTITION: Final = 5_000
DEFAULT_RECEIVER_TIMEOUT_MS: Final = 10_000
DEFAULT_DRAIN_TIMEOUT_MS: Final = 10_000
SPOOL_FULL_POLICIES: Final = ("block", "fail")
SPOOL_FSYNC_POLICIES: Final = ("batch", "always", "none")
BOOLEANS: Final = ("true", "false")
#: Transports whose sources get a CONNECT event when a receiver joins (what waitForReceivers counts).
CONNECTED_TRANSPORTS: Final = ("tcp", "lbtru")

# Options the writer applies before the user's (the user's settings win): a task's sources close at its
# end, and the next task must be able to listen on the same ports while old connections sit in TIME_WAIT.
WRITER_DEFAULT_LINES: Final = ("source transport_tcp_reuseaddr 1",)

_HINTS: Final = {
    ("read", "transport"): "the publishing sources choose the transport; a receiver joins whichever they use",
    ("write", "pattern"): "a writer publishes to topics: use 'topic' or a topic column",
    ("write", "maxmessagesperbatch"): "it is an option of reading (spark.readStream)",
    ("write", "spooldir"): "it is an option of reading (spark.readStream)",
    ("read", "waitforreceivers"): "it is an option of writing (df.write / df.writeStream)",
}
_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_SIZE_UNITS: Final = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


class SchemaError(ValueError):
    """The rows given to (or asked of) the openum data source do not have the columns it needs."""


def _known(role: Role) -> dict[str, str]:
    if role == "read":
        return dict(READ_OPTIONS)
    if role == "write":
        return dict(WRITE_OPTIONS)
    return {**READ_OPTIONS, **WRITE_OPTIONS}


def _role_text(role: Role) -> str:
    return {"read": " when reading", "write": " when writing", "any": ""}[role]


def check_names(options: Mapping[str, str], role: Role) -> None:
    """:class:`ConfigError` for the first key that is not an option of ``role`` (with suggestions)."""
    known = _known(role)
    by_lower = {name.lower(): name for name in known}
    for key in options:
        low = key.lower()
        if low in by_lower or low in SPARK_OPTIONS or low.startswith(UM_OPTION_PREFIX):
            continue
        close = difflib.get_close_matches(low, list(by_lower), n=3, cutoff=0.6)
        names = [by_lower[c] for c in close]
        hint = _HINTS.get((role, low))
        if hint:
            detail = f" ({hint})."
        elif names:
            detail = f"; did you mean {' or '.join(repr(n) for n in names)}?"
        else:
            detail = "."
        raise ConfigError(
            f"unknown option {key!r} of the openum data source{_role_text(role)}{detail} "
            f"Options: {', '.join(known)}, option.<scope>.<name> (any UM option, e.g. "
            "option.context.resolver_multicast_port)",
            option=key,
            value=options[key],
            allowed=", ".join(known),
            suggestions=names,
            source="Spark options",
        )


def _get(options: Mapping[str, str], name: str) -> str | None:
    """The value of option ``name`` (any spelling of the key), or None."""
    low = name.lower()
    for key, value in options.items():
        if key.lower() == low:
            return None if value is None else str(value)
    return None


def _int(options: Mapping[str, str], name: str, default: int | None, minimum: int) -> int | None:
    text = _get(options, name)
    if text is None or text.strip() == "":
        return default
    try:
        value = int(text.strip())
    except ValueError:
        raise ConfigError(
            f"option {name!r}: {text!r} is not a whole number",
            option=name,
            value=text,
            allowed=f"an integer >= {minimum}",
            source="Spark options",
        ) from None
    if value < minimum:
        raise ConfigError(
            f"option {name!r}: {value} is too small (at least {minimum})",
            option=name,
            value=text,
            allowed=f"an integer >= {minimum}",
            source="Spark options",
        )
    return value


def _choice(options: Mapping[str, str], name: str, choices: tuple[str, ...]) -> str:
    text = _get(options, name)
    if text is None or text.strip() == "":
        return choices[0]
    value = text.strip().lower()
    if value not in choices:
        raise ConfigError(
            f"option {name!r}: {text!r} is not one of {', '.join(choices)}",
            option=name,
            value=text,
            allowed=", ".join(choices),
            suggestions=difflib.get_close_matches(value, choices, n=1),
            source="Spark options",
        )
    return value


def parse_size(text: str, name: str = "size") -> int:
    """``"1048576"``, ``"64k"``, ``"512m"``, ``"1g"`` (powers of 1024) -> bytes."""
    match = _SIZE.match(text)
    if not match or int(match.group(1)) <= 0:
        raise ConfigError(
            f"option {name!r}: {text!r} is not a size",
            option=name,
            value=text,
            allowed="a positive number of bytes, optionally with k, m, g or t (e.g. 512m)",
            source="Spark options",
        )
    return int(match.group(1)) * _SIZE_UNITS[match.group(2).lower()]


# -- UM configuration ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class UMConfig:
    """The UM configuration of one reader or writer: file contents, application name, option lines.

    File contents travel with the options (a Spark executor may not see the driver's files);
    :meth:`build` turns them back into an :class:`openum.Config`.  Picklable.
    """

    files: tuple[tuple[str, str], ...] = ()  # (path as given, text)
    application: str | None = None
    lines: tuple[str, ...] = ()  # "scope option value", defaults first, then the user's

    def build(self) -> Config:
        """An :class:`openum.Config` with the process defaults, the files and the lines."""
        from openum.config import default_config

        config = default_config().copy()
        if self.application:
            config.application = self.application
        for path, text in self.files:
            file = Path(path)
            try:
                same = file.is_file() and file.read_text(encoding="utf-8") == text
            except OSError:
                same = False
            if same:
                config.load_file(file)
                continue
            fd, tmp = tempfile.mkstemp(prefix="openum-spark-", suffix=file.suffix or ".cfg")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    out.write(text)
                config.load_file(tmp)
            finally:
                os.unlink(tmp)
        if self.lines:
            config.set_options(self.lines, source="Spark options")
        return config

    def identity(self) -> list[object]:
        """What identifies this configuration (for the default spool directory)."""
        return [[p, hashlib.sha256(t.encode()).hexdigest()] for p, t in self.files] + [
            self.application,
            list(self.lines),
        ]


def _config_files(options: Mapping[str, str]) -> list[tuple[str, str]]:
    files: list[tuple[str, str]] = []
    config_text = _get(options, "config")
    for raw in (config_text or "").split(","):
        path = raw.strip()
        if not path:
            continue
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(
                f"option 'config': configuration file {path!r} not found (on the Spark driver, in "
                f"{os.getcwd()})",
                option="config",
                value=path,
                source="Spark options",
            ) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(
                f"option 'config': cannot read {path!r}: {exc}",
                option="config",
                value=path,
                source="Spark options",
            ) from None
        files.append((path, text))
    return files


def _um_lines(options: Mapping[str, str]) -> list[str]:
    """``option.<scope>.<name>`` keys as checked ``scope name value`` lines (sorted by key)."""
    lines: list[str] = []
    errors: list[ConfigError] = []
    for key in sorted(options, key=str.lower):
        if not key.lower().startswith(UM_OPTION_PREFIX):
            continue
        scope, dot, name = key[len(UM_OPTION_PREFIX) :].partition(".")
        value = options[key]
        origin = f"Spark option {key!r}"
        if not dot or not scope or not name:
            errors.append(
                ConfigError(
                    f"{origin}: expected option.<scope>.<name>, e.g. option.context.resolver_multicast_port",
                    option=key,
                    value=value,
                    allowed="option.<scope>.<name>",
                )
            )
            continue
        if value is None or str(value).strip() == "":
            errors.append(ConfigError(f"{origin}: no value given", option=name, scope=scope, value=value))
            continue
        try:
            lines.append(parse_option_line(f"{scope} {name} {value}", source=origin).line_text)
        except ConfigError as exc:
            errors.append(exc)
    if errors:
        raise ConfigError.collect(errors)
    return lines


def _um_config(options: Mapping[str, str], defaults: tuple[str, ...] = ()) -> UMConfig:
    application = _get(options, "application")
    config = UMConfig(tuple(_config_files(options)), application or None, (*defaults, *_um_lines(options)))
    config.build().check()  # file contents, XML rules and ranges: errors now, on the driver
    return config


# -- reading -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReadOptions:
    """Everything a stream reader needs (picklable; no pyspark)."""

    topic: str | None
    pattern: str | None
    um: UMConfig
    max_messages_per_batch: int | None = None
    messages_per_partition: int = DEFAULT_MESSAGES_PER_PARTITION
    spool_dir: str = ""
    max_spool_bytes: int = DEFAULT_MAX_SPOOL_BYTES
    spool_full_policy: str = "block"
    spool_fsync: str = "batch"
    fail_on_data_loss: bool = True
    spool_dir_given: bool = field(default=False, compare=False)

    @property
    def subscription(self) -> str:
        """``topic 'X'`` or ``pattern 'Y'``, for messages."""
        return f"topic {self.topic!r}" if self.topic is not None else f"pattern {self.pattern!r}"


def default_spool_root() -> Path:
    """``$OPENUM_SPARK_SPOOL`` or ``$XDG_CACHE_HOME/openum/spark-spool`` (``~/.cache/...``)."""
    env = os.environ.get("OPENUM_SPARK_SPOOL")
    if env:
        return Path(env)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "openum" / "spark-spool"


def spool_name(topic: str | None, pattern: str | None, um: UMConfig) -> str:
    """The default spool directory's name: the subscription, and a digest of it and the configuration."""
    identity = json.dumps(
        {"topic": topic, "pattern": pattern, "um": um.identity()}, sort_keys=True, separators=(",", ":")
    )
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", topic if topic is not None else pattern or "").strip("_.")
    return f"{(slug or 'subscription')[:40]}-{digest}"


def parse_read_options(options: Mapping[str, str]) -> ReadOptions:
    """Check and convert the options of ``spark.readStream.format("openum")``."""
    check_names(options, "read")
    topic = _get(options, "topic")
    pattern = _get(options, "pattern")
    if topic is not None and not topic.strip():
        topic = None
    if pattern is not None and not pattern.strip():
        pattern = None
    if (topic is None) == (pattern is None):
        raise ConfigError(
            "the openum data source needs exactly one of the options 'topic' (one topic) and 'pattern' "
            "(a wildcard pattern)"
            + (", not both" if topic is not None else "")
            + ", e.g. .option('topic', 'Orders') or .option('pattern', '^md/')",
            option="topic" if topic is None else "pattern",
            allowed="topic or pattern",
            source="Spark options",
        )
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ConfigError(
                f"option 'pattern': {pattern!r} is not a regular expression: {exc}",
                option="pattern",
                value=pattern,
                allowed="a Python regular expression, e.g. '^md/'",
                source="Spark options",
            ) from None
    um = _um_config(options)
    spool_dir = _get(options, "spoolDir")
    given = bool(spool_dir and spool_dir.strip())
    if not spool_dir or not given:
        spool_dir = str(default_spool_root() / spool_name(topic, pattern, um))
    size_text = _get(options, "maxSpoolBytes")
    return ReadOptions(
        topic=topic,
        pattern=pattern,
        um=um,
        max_messages_per_batch=_int(options, "maxMessagesPerBatch", None, 1),
        messages_per_partition=_int(options, "messagesPerPartition", DEFAULT_MESSAGES_PER_PARTITION, 1)
        or DEFAULT_MESSAGES_PER_PARTITION,
        spool_dir=os.path.abspath(os.path.expanduser(spool_dir.strip())),
        max_spool_bytes=parse_size(size_text, "maxSpoolBytes") if size_text else DEFAULT_MAX_SPOOL_BYTES,
        spool_full_policy=_choice(options, "spoolFullPolicy", SPOOL_FULL_POLICIES),
        spool_fsync=_choice(options, "spoolFsync", SPOOL_FSYNC_POLICIES),
        fail_on_data_loss=_choice(options, "failOnDataLoss", BOOLEANS) == "true",
        spool_dir_given=given,
    )


# -- writing -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class WriteOptions:
    """Everything a writer needs (picklable; no pyspark)."""

    topic: str | None
    um: UMConfig
    wait_for_receivers: int = 0
    receiver_timeout_ms: int = DEFAULT_RECEIVER_TIMEOUT_MS
    drain_timeout_ms: int = DEFAULT_DRAIN_TIMEOUT_MS
    checkpoint_location: str | None = None


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    """Check and convert the options of ``df.write`` / ``df.writeStream`` ``.format("openum")``."""
    check_names(options, "write")
    topic = _get(options, "topic")
    if topic is not None and not topic.strip():
        topic = None
    defaults = list(WRITER_DEFAULT_LINES)
    transport = _get(options, "transport")
    if transport is not None and transport.strip():
        try:
            setting = parse_option_line(
                f"source transport {transport.strip()}", source="Spark option 'transport'"
            )
        except ConfigError as exc:
            raise ConfigError(
                f"option 'transport': {exc.reason}",
                option="transport",
                value=transport,
                allowed=exc.allowed,
                suggestions=exc.suggestions,
                source="Spark options",
            ) from None
        defaults.append(setting.line_text)
    um = _um_config(options, tuple(defaults))
    wait = _int(options, "waitForReceivers", 0, 0) or 0
    effective = um.build().attributes("source").get("transport")
    if wait and effective not in CONNECTED_TRANSPORTS:
        raise ConfigError(
            f"option 'waitForReceivers': the sources' transport is {effective}, whose sources are not told "
            f"when a receiver joins; use it with {' or '.join(CONNECTED_TRANSPORTS)}, or set "
            "waitForReceivers 0",
            option="waitForReceivers",
            value=str(wait),
            allowed="0 with this transport",
            source="Spark options",
        )
    return WriteOptions(
        topic=topic,
        um=um,
        wait_for_receivers=wait,
        receiver_timeout_ms=_int(options, "receiverTimeoutMs", DEFAULT_RECEIVER_TIMEOUT_MS, 1)
        or DEFAULT_RECEIVER_TIMEOUT_MS,
        drain_timeout_ms=_int(options, "drainTimeoutMs", DEFAULT_DRAIN_TIMEOUT_MS, 0) or 0,
        checkpoint_location=_get(options, "checkpointLocation"),
    )
