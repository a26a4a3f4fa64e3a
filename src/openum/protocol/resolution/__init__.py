"""UDP topic resolution, sans-I/O: phase schedules, rate limits, the resolver cache and unicast
daemon choice, and remote wildcard patterns matched with bounded cost (seed 7.1, 8.1, 8.2)."""

from openum.protocol.resolution._engine import (
    WILDCARD_TQR_WORK_LIMIT,
    EngineStatistics,
    NoSourceNotification,
    Outgoing,
    ReceiverSpec,
    ResolverEngine,
    ResolverSettings,
    SourceDiscovered,
    SourceForgotten,
    SourceKey,
    SourceLeft,
    SourceSpec,
    WildcardSpec,
    compile_pattern,
    source_key,
)
from openum.protocol.resolution._pattern import (
    MAX_PATTERN_LENGTH,
    MAX_PROGRAM_SIZE,
    MatchBudget,
    PatternRefusedError,
    SafePattern,
    WorkLimitExceededError,
    compile_remote_pattern,
)
from openum.protocol.resolution._ratelimit import TR_RATE_INTERVAL_NS, TrRateLimiter
from openum.protocol.resolution._schedule import Phase, PhaseParams, PhaseSchedule
from openum.protocol.resolution._unicast import DaemonAddress, UnicastDaemons

__all__ = [
    "MAX_PATTERN_LENGTH",
    "MAX_PROGRAM_SIZE",
    "TR_RATE_INTERVAL_NS",
    "WILDCARD_TQR_WORK_LIMIT",
    "DaemonAddress",
    "EngineStatistics",
    "MatchBudget",
    "NoSourceNotification",
    "Outgoing",
    "PatternRefusedError",
    "Phase",
    "PhaseParams",
    "PhaseSchedule",
    "ReceiverSpec",
    "ResolverEngine",
    "ResolverSettings",
    "SafePattern",
    "SourceDiscovered",
    "SourceForgotten",
    "SourceKey",
    "SourceLeft",
    "SourceSpec",
    "TrRateLimiter",
    "UnicastDaemons",
    "WildcardSpec",
    "WorkLimitExceededError",
    "compile_pattern",
    "compile_remote_pattern",
    "source_key",
]
