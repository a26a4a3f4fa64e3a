"""UDP topic resolution, sans-I/O: phase schedules, rate limits, the resolver cache and unicast
daemon choice (seed 7.1, 8.1, 8.2)."""

from openum.protocol.resolution._engine import (
    EngineStatistics,
    NoSourceNotification,
    Outgoing,
    ReceiverSpec,
    ResolverEngine,
    ResolverSettings,
    SourceDiscovered,
    SourceKey,
    SourceLeft,
    SourceSpec,
    WildcardSpec,
    compile_pattern,
    source_key,
)
from openum.protocol.resolution._ratelimit import TR_RATE_INTERVAL_NS, TrRateLimiter
from openum.protocol.resolution._schedule import Phase, PhaseParams, PhaseSchedule
from openum.protocol.resolution._unicast import DaemonAddress, UnicastDaemons

__all__ = [
    "TR_RATE_INTERVAL_NS",
    "DaemonAddress",
    "EngineStatistics",
    "NoSourceNotification",
    "Outgoing",
    "Phase",
    "PhaseParams",
    "PhaseSchedule",
    "ReceiverSpec",
    "ResolverEngine",
    "ResolverSettings",
    "SourceDiscovered",
    "SourceKey",
    "SourceLeft",
    "SourceSpec",
    "TrRateLimiter",
    "UnicastDaemons",
    "WildcardSpec",
    "compile_pattern",
    "source_key",
]
