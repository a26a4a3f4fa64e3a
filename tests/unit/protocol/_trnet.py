"""A tiny deterministic network for resolver engines: every datagram reaches every other engine
(multicast) or the addressed daemon, instantly, at the time it was sent."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from openum.protocol.resolution import (
    Outgoing,
    PhaseParams,
    ReceiverSpec,
    ResolverEngine,
    ResolverSettings,
    SourceSpec,
    WildcardSpec,
)
from openum.wire.lbmr import PATTERN_PCRE, TcpTransport, decode_packet

MS = 1_000_000

ADV = PhaseParams.from_ms(10, 500, 5000, 1000, 60_000)
QRY = PhaseParams.from_ms(20, 200, 5000, 1000, 60_000)
WC = PhaseParams.from_ms(50, 1000, 60_000, 0, 0)


def engine(n: int, **settings: object) -> ResolverEngine:
    return ResolverEngine(ResolverSettings(context_instance=bytes([n]) * 8, **settings), random.Random(n))  # type: ignore[arg-type]


def source(
    topic: str, port: int = 14371, index: int = 1, phases: PhaseParams = ADV, **kw: object
) -> SourceSpec:
    return SourceSpec(topic, TcpTransport("127.0.0.1", port, 0x1234), index, phases, **kw)  # type: ignore[arg-type]


def receiver(topic: str, phases: PhaseParams = QRY, **kw: object) -> ReceiverSpec:
    return ReceiverSpec(topic, phases, **kw)  # type: ignore[arg-type]


def wildcard(pattern: str, phases: PhaseParams = WC) -> WildcardSpec:
    return WildcardSpec(pattern, PATTERN_PCRE, phases)


@dataclass
class Sent:
    time_ms: float
    engine: int
    kind: str  # "tir:<topic>", "tqr:<topic>", "wtqr:<pattern>", "keepalive", "final:<topic>", "request"
    destination: tuple[str, int] | None


@dataclass
class Net:
    engines: list[ResolverEngine]
    now: int = 0
    log: list[Sent] = field(default_factory=list)
    events: list[tuple[int, object]] = field(default_factory=list)
    deliver: bool = True

    def _record(self, index: int, out: Outgoing) -> None:
        packet = decode_packet(out.data)
        body = packet.body
        name = type(body).__name__
        kinds: list[str] = []
        if hasattr(body, "queries"):
            for q in body.queries:  # type: ignore[attr-defined]
                kinds.append(f"tqr:{q.topic}" if hasattr(q, "topic") else f"wtqr:{q.pattern}")
            for i in body.infos:  # type: ignore[attr-defined]
                kinds.append(f"tir:{i.topic}")
        elif name == "ResolverKeepalive":
            kinds.append("keepalive")
        elif name == "TopicManagement":
            kinds += [f"final:{r.topic}" for r in body.records]  # type: ignore[attr-defined]
        elif name == "TopicResolutionRequest":
            kinds.append("request")
        for kind in kinds:
            self.log.append(Sent(self.now / MS, index, kind, out.destination))

    def step(self, now: int) -> None:
        self.now = now
        for index, eng in enumerate(self.engines):
            outgoing = eng.poll(now)
            self.events += [(index, ev) for ev in eng.take_events()]  # sources the cache forgot
            for out in outgoing:
                self._record(index, out)
                if not self.deliver:
                    continue
                for other_index, other in enumerate(self.engines):
                    if other is not eng:
                        for ev in other.datagram_received(out.data, ("127.0.0.1", 14402 + index), now):
                            self.events.append((other_index, ev))

    def run_until(self, end_ms: float) -> None:
        end = int(end_ms * MS)
        while True:
            deadlines = [d for d in (e.next_deadline() for e in self.engines) if d is not None]
            if not deadlines:
                return
            t = max(min(deadlines), self.now)
            if t > end:
                self.now = end
                return
            self.step(t)

    def times(self, kind: str, engine_index: int | None = None) -> list[float]:
        return [
            s.time_ms
            for s in self.log
            if s.kind == kind and (engine_index is None or s.engine == engine_index)
        ]
