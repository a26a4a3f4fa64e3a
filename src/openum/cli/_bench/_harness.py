"""The ``openum bench`` harness: runs openum and its peers side by side (PERFORMANCE.md "Method").

Every measurement runs in fresh processes with fresh ports (a free block of 32 consecutive ports on
127.0.0.1, used for openum's resolver, TCP, LBT-RU, LBT-RM and request ports and for the peers'
endpoints), so the bench never collides with other openum processes.  Systems alternate within each
repeat (A B C A B C ...) and the report gives medians.  See docs/performance.md.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import importlib.metadata
import importlib.util
import json
import os
import platform
import queue
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

__all__ = ["PEERS", "TRANSPORTS", "Bench", "System"]

#: Every openum transport the bench knows; it measures the ones ``AVAILABLE_TRANSPORTS`` has.
TRANSPORTS = ("tcp", "lbtru", "lbtrm", "lbtipc", "lbtsmx")
UDP_TRANSPORTS = ("lbtru", "lbtrm")
DISPLAY = {"tcp": "TCP", "lbtru": "LBT-RU", "lbtrm": "LBT-RM", "lbtipc": "LBT-IPC", "lbtsmx": "LBT-SMX"}
NETWORK_TRANSPORTS = ("tcp", "lbtru", "lbtrm")
#: PERFORMANCE.md's memory target: a receiver's RSS flat from 1 M to this many messages.
MEMORY_TARGET_COUNT = 10_000_000
#: peer name -> (module to import, pip package, its systems' transports)
PEERS = {
    "pyzmq": ("zmq", "pyzmq", ("tcp", "ipc")),
    "zenoh": ("zenoh", "eclipse-zenoh", ("tcp",)),
}
REFERENCE = ("pyzmq", "tcp")
IPC_REFERENCE = ("pyzmq", "ipc")
_PORT_LOW, _PORT_HIGH = 20000, 32000  # below Linux's ephemeral range (32768-60999)
_BLOCK = 32

# The multicast group of openum pong's LBT-RM source (ping keeps the pool's first, 224.10.10.10).
PONG_GROUP = "224.10.10.11"


@dataclass(frozen=True)
class System:
    """One measured system: openum on one transport, or a peer over one kind of endpoint."""

    name: str  # openum, pyzmq, zenoh
    transport: str

    @property
    def label(self) -> str:
        return f"{self.name} {self.transport}"

    @property
    def is_openum(self) -> bool:
        return self.name == "openum"


# -- ports -------------------------------------------------------------------------------------------


def _free(port: int) -> bool:
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        with socket.socket(socket.AF_INET, kind) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


@dataclass(frozen=True)
class Ports:
    """A block of consecutive ports, free for TCP and UDP on 127.0.0.1 when allocated."""

    base: int

    @classmethod
    def allocate(cls, rng: random.Random) -> Ports:
        for _ in range(500):
            base = rng.randrange(_PORT_LOW, _PORT_HIGH - _BLOCK)
            if all(_free(p) for p in range(base, base + _BLOCK)):
                return cls(base)
        raise RuntimeError(f"no {_BLOCK} consecutive free ports in {_PORT_LOW}-{_PORT_HIGH}")

    def openum_options(self) -> list[str]:
        b = self.base
        return [
            f"context resolver_multicast_port {b}",
            f"context transport_tcp_port_low {b + 1}",
            f"context transport_tcp_port_high {b + 10}",
            f"context transport_lbtru_port_low {b + 15}",
            f"context transport_lbtru_port_high {b + 19}",
            f"receiver transport_lbtru_port_low {b + 20}",
            f"receiver transport_lbtru_port_high {b + 24}",
            f"context transport_lbtrm_source_port_low {b + 25}",
            f"context transport_lbtrm_source_port_high {b + 28}",
            f"source transport_lbtrm_destination_port {b + 29}",
        ]

    @property
    def peer_a(self) -> int:
        return self.base + 30

    @property
    def peer_b(self) -> int:
        return self.base + 31


#: Applied before the user's -c files and --option lines (which can override them): the UDP
#: transports' default rate limits (10 Mbit/s, UM's defaults) would cap throughput far below what is
#: measured here, and so would 1 Gbit/s for messages of 1 KB and more (the size sweep).  Loopback
#: carries 10 Gbit/s; the receivers keep up (every sweep cell is checked for loss).
BENCH_OPTIONS = (
    "context transport_lbtrm_data_rate_limit 10000000000",
    "context transport_lbtru_data_rate_limit 10000000000",
    # Throughput is measured without loss: an LBT-IPC source waits for its receiver (as LBT-SMX does)
    # instead of overwriting what it has not read (UM's default source_paced).
    "source transport_lbtipc_behavior receiver_paced",
)


# -- processes -----------------------------------------------------------------------------------------


@contextlib.contextmanager
def _affinity(cpus: set[int] | None) -> Iterator[None]:
    """Children spawned inside inherit ``cpus`` (the calling thread's mask; restored afterwards)."""
    if not cpus or not hasattr(os, "sched_setaffinity"):
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


class Proc:
    """A child process whose stdout lines are read by a thread (so waits can time out)."""

    def __init__(self, argv: list[str], cpus: set[int] | None = None, stdin: bool = True) -> None:
        self.argv = argv
        self._err: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stderr_tail()
        with _affinity(cpus):
            self.popen = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=self._err,
                text=True,
                bufsize=1,
            )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def next_line(self, deadline: float) -> str | None:
        """The next stdout line; None at end of output or when ``deadline`` (monotonic) passes."""
        try:
            line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return None
        if line is not None:
            self.seen.append(line)
        return line

    def expect(self, word: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            line = self.next_line(deadline)
            if line is None:
                return False
            if line.strip() == word:
                return True

    def result(self, timeout: float) -> dict[str, Any] | None:
        """The ``RESULT {json}`` line (bench workers) or, at exit, the last JSON line (openum CLI)."""
        deadline = time.monotonic() + timeout
        while True:
            line = self.next_line(deadline)
            if line is None:
                break
            if line.startswith("RESULT "):
                out: dict[str, Any] = json.loads(line[7:])
                return out
        for line in reversed(self.seen):
            if line.startswith("{"):
                with contextlib.suppress(ValueError):
                    parsed: dict[str, Any] = json.loads(line)
                    return parsed
        return None

    def tell(self, word: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            assert self.popen.stdin is not None
            self.popen.stdin.write(word + "\n")
            self.popen.stdin.flush()

    def finish(self, timeout: float = 10.0, sig: int | None = None) -> int | None:
        """Close stdin (or send ``sig``) and wait; terminate, then kill, a child that does not exit."""
        if sig is not None and self.popen.poll() is None:
            self.popen.send_signal(sig)
        if self.popen.stdin is not None:
            with contextlib.suppress(OSError, ValueError):
                self.popen.stdin.close()
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.terminate()
            try:
                return self.popen.wait(5)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                return self.popen.wait(5)

    def stderr_tail(self, limit: int = 1500) -> str:
        self._err.seek(0)
        text = self._err.read().decode("utf-8", "replace")
        self._err.close()
        return text[-limit:]


# -- settings, records -----------------------------------------------------------------------------------


@dataclass
class Settings:
    transports: list[str]
    peers: list[str]
    count: int = 1_000_000
    size: int = 64
    repeat: int = 3
    latency_repeat: int = 5
    pings: int = 10_000
    warmup: int = 1000
    busy: bool = False
    latency_cpus: str = "same"
    sizes: list[int] = field(default_factory=lambda: [16, 64, 256, 1024, 4096, 16384, 65536])
    sweep_count: int = 200_000
    sweep_bytes: int = 128 * 1024 * 1024
    sweep_repeat: int = 1
    rate: bool = True
    rate_duration: float = 5.0
    rate_steps: int = 8
    rate_start: float = 100_000.0
    memory: bool = True
    memory_count: int = MEMORY_TARGET_COUNT
    memory_points: list[int] = field(default_factory=lambda: [1_000_000])
    memory_transports: list[str] = field(default_factory=list)
    memory_rate: float | None = None
    benchmarks: list[str] = field(
        default_factory=lambda: ["throughput", "latency", "rate", "sweep", "memory"]
    )
    idle_timeout: float = 10.0
    config_files: list[str] = field(default_factory=list)
    options: list[str] = field(default_factory=list)
    seed: int | None = None


@dataclass
class Run:
    kind: str  # throughput, latency, rate, sweep, memory
    system: System
    size: int
    repeat: int
    ok: bool
    result: dict[str, Any] = field(default_factory=dict)
    publisher: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    wall_seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "system": self.system.name,
            "transport": self.system.transport,
            "size": self.size,
            "repeat": self.repeat,
            "ok": self.ok,
            "wall_seconds": round(self.wall_seconds, 3),
            "result": self.result,
        }
        if self.publisher:
            out["publisher"] = self.publisher
        if self.error:
            out["error"] = self.error
        out.update(self.extra)
        return out


# -- the bench -----------------------------------------------------------------------------------------


class Bench:
    def __init__(
        self, settings: Settings, available: tuple[str, ...], progress: Callable[[str], None]
    ) -> None:
        self.s = settings
        self.rng = random.Random(settings.seed)
        self.progress = progress
        self.available = available
        self.runs: list[Run] = []
        self.notes: list[str] = []
        self.missing_peers: dict[str, str] = {}
        self.not_available: list[str] = []
        self.openum: list[System] = []
        self.peers: list[System] = []
        for t in settings.transports:
            if t in available:
                self.openum.append(System("openum", t))
            else:
                self.not_available.append(t)
        for peer in settings.peers:
            module, package, kinds = PEERS[peer]
            if importlib.util.find_spec(module) is None:
                self.missing_peers[peer] = f"peer {peer} not installed: pip install {package}"
                continue
            self.peers.extend(System(peer, k) for k in kinds)
        if (
            any(t in ("lbtipc", "lbtsmx") for t in settings.transports)
            and importlib.util.find_spec("pyaeron") is None
        ):
            # Aeron IPC, the shared-memory peer PERFORMANCE.md quotes: only where pip can install it.
            self.missing_peers["aeron"] = (
                "peer aeron (Aeron IPC) not available: the pyaeron package is not installed "
                "(pip install pyaeron finds no distribution for this Python)"
            )
        self.systems = self.openum + self.peers
        self.tmp = tempfile.mkdtemp(prefix="openum-bench-")
        self._ipc = 0
        self.started = time.monotonic()
        self.rate_results: dict[str, dict[str, Any]] = {}

    # -- helpers ---------------------------------------------------------------------------------
    def _worker(self, spec: dict[str, Any]) -> list[str]:
        return [sys.executable, "-m", "openum.cli._bench._worker", json.dumps(spec)]

    def _openum_options(self, ports: Ports) -> list[str]:
        return [*ports.openum_options(), *BENCH_OPTIONS]

    def _ipc_endpoint(self) -> str:
        self._ipc += 1
        return f"ipc://{self.tmp}/{self._ipc}.sock"

    def _endpoints(self, system: System, ports: Ports) -> dict[str, Any]:
        if system.name == "pyzmq":
            if system.transport == "ipc":
                return {
                    "endpoint": self._ipc_endpoint(),
                    "endpoint_ping": self._ipc_endpoint(),
                    "endpoint_pong": self._ipc_endpoint(),
                }
            return {
                "endpoint": f"tcp://127.0.0.1:{ports.peer_a}",
                "endpoint_ping": f"tcp://127.0.0.1:{ports.peer_a}",
                "endpoint_pong": f"tcp://127.0.0.1:{ports.peer_b}",
            }
        if system.name == "zenoh":
            return {"port": ports.peer_a}
        return {}

    def _say(self, text: str) -> None:
        elapsed = time.monotonic() - self.started
        self.progress(f"[{elapsed:6.1f} s] {text}")

    # -- one throughput run ------------------------------------------------------------------------
    def throughput(
        self,
        kind: str,
        system: System,
        size: int,
        count: int,
        repeat: int,
        *,
        rate: float = 0.0,
        rss_points: list[int] | None = None,
        idle_timeout: float | None = None,
        loss_expected: bool = False,
    ) -> Run:
        """One publisher -> subscriber run of ``count`` messages of ``size`` bytes.

        The check: every counter arrived, in order, once.  With ``loss_expected`` (a UDP transport
        sending unthrottled: no flow control, so a sender faster than its receiver loses what falls
        out of the transmission window) announced loss passes and is reported as ``lost``; loss without
        an UNRECOVERABLE_LOSS event, reordering and duplicates still fail.
        """
        ports = Ports.allocate(self.rng)
        spec: dict[str, Any] = {
            "system": system.name,
            "count": count,
            "size": size,
            "rate": rate,
            "idle_timeout": idle_timeout or self.s.idle_timeout,
            **self._endpoints(system, ports),
        }
        if system.is_openum:
            spec.update(
                topic=f"openum/bench/{ports.base}",
                transport=system.transport,
                options=[*self._openum_options(ports), *self.s.options],
                config_files=self.s.config_files,
            )
        if rss_points:
            spec["rss_points"] = rss_points
        run = Run(kind, system, size, repeat, ok=False)
        if rate:
            run.extra["rate"] = rate
        start = time.monotonic()
        sub = Proc(self._worker({**spec, "role": "sub"}))
        pub: Proc | None = None
        try:
            if not sub.expect("READY", 30):
                run.error = "subscriber did not start"
                return run
            pub = Proc(self._worker({**spec, "role": "pub"}))
            if not sub.expect("SYNCED", 30):
                run.error = "subscriber never received the publisher's hellos within 30 s"
                return run
            pub.tell("GO")
            hard = 60 + count / 5000 + (count / rate if rate else 0)
            result = sub.result(hard)
            pub.tell("STOP")
            publisher = pub.result(10) or {}
            run.publisher = publisher
            if result is None:
                run.error = f"no result from the subscriber within {hard:.0f} s"
                return run
            run.result = result
            losses = result.get("unrecoverable_loss", 0) + result.get("unrecoverable_loss_burst", 0)
            all_sent = publisher.get("sent") == count
            run.ok = bool(result.get("complete")) and not losses and all_sent
            missing = result.get("missing", 0)
            if missing:
                run.extra["lost"] = round(missing / count, 6)
            described = (
                f"received {result.get('received')} of {count} (gaps {result.get('gaps')}, missing "
                f"{missing}, behind {result.get('behind')}, unrecoverable loss events {losses})"
            )
            if not run.ok and loss_expected and all_sent and result.get("received"):
                silent = result.get("gaps", 0) > 0 and not losses
                if not silent and not result.get("behind"):
                    run.ok = True
                    run.extra["loss_expected"] = True
                    run.extra["note"] = "unthrottled UDP: " + described
                    return run
                if silent:
                    described += "; gaps without any UNRECOVERABLE_LOSS event (silent loss)"
            if not run.ok:
                run.error = described
            return run
        finally:
            if pub is not None:
                pub.finish()
                if not run.ok and not run.error.startswith("received"):
                    run.error += " | publisher: " + pub.stderr_tail()
                else:
                    pub.stderr_tail()
            sub.finish()
            tail = sub.stderr_tail()
            if not run.ok and not run.error.startswith("received"):
                run.error += " | subscriber: " + tail
            run.wall_seconds = time.monotonic() - start
            self.runs.append(run)

    # -- one latency run -------------------------------------------------------------------------
    def latency(self, system: System, repeat: int, busy: bool) -> Run:
        ports = Ports.allocate(self.rng)
        ncpu = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        ping_cpus: set[int] | None = None
        pong_cpus: set[int] | None = None
        if busy and ncpu >= 2:
            ping_cpus, pong_cpus = {cpus[0]}, {cpus[1]}
        elif self.s.latency_cpus == "same" and cpus:
            ping_cpus = pong_cpus = {cpus[0]}
        run = Run("latency", system, self.s.size, repeat, ok=False)
        run.extra["busy"] = busy
        run.extra["cpus"] = {
            "ping": sorted(ping_cpus) if ping_cpus else "any",
            "pong": sorted(pong_cpus) if pong_cpus else "any",
        }
        timeout = 60 + (self.s.pings + self.s.warmup) / 1000
        start = time.monotonic()
        if system.is_openum:
            opts: list[str] = []
            for line in [*self._openum_options(ports), *self.s.options]:
                opts += ["--option", line]
            for path in self.s.config_files:
                opts += ["-c", path]
            topics = [f"openum/ping/{ports.base}", f"openum/pong/{ports.base}"]
            base = [sys.executable, "-m", "openum"]
            flags = ["--transport", system.transport, *(["--busy"] if busy else [])]
            pong_opts = list(opts)
            if system.transport == "lbtrm":
                # Ping's and pong's sources on different multicast groups, as two applications would be
                # configured: on one group, each process's receiving socket also gets its own datagrams
                # (multicast loopback), a second wake-up per message that measures the setup, not openum.
                pong_opts[:0] = ["--option", f"source transport_lbtrm_multicast_address {PONG_GROUP}"]
            pong = Proc([*base, "pong", *topics, "--json", *flags, *pong_opts], pong_cpus, stdin=False)
            ping_argv = [
                *base,
                "ping",
                *topics,
                "--json",
                "--count",
                str(self.s.pings),
                "--warmup",
                str(self.s.warmup),
                "--size",
                str(self.s.size),
                *flags,
                *opts,
            ]
            ready = True
        else:
            spec = {
                "system": system.name,
                "count": self.s.pings,
                "warmup": self.s.warmup,
                "size": self.s.size,
                "busy": busy,
                **self._endpoints(system, ports),
            }
            pong = Proc(self._worker({**spec, "role": "pong"}), pong_cpus, stdin=False)
            ready = pong.expect("READY", 30)
            ping_argv = self._worker({**spec, "role": "ping"})
        ping: Proc | None = None
        try:
            if not ready:
                run.error = "pong did not start"
                return run
            ping = Proc(ping_argv, ping_cpus, stdin=False)
            result = ping.result(timeout)
            if result is None:
                run.error = "no result from ping"
                return run
            run.result = result
            run.ok = result.get("count") == self.s.pings and bool(result.get("rtt_us"))
            if not run.ok:
                run.error = f"{result.get('count')} of {self.s.pings} round trips"
            return run
        finally:
            if ping is not None:
                ping.finish(timeout)
                tail = ping.stderr_tail()
                if not run.ok:
                    run.error += " | ping: " + tail
            pong.finish(10, sig=signal.SIGTERM)
            pong_result = pong.result(1)
            if pong_result:
                run.publisher = pong_result
            pong_tail = pong.stderr_tail()
            if not run.ok:
                run.error += " | pong: " + pong_tail
            run.wall_seconds = time.monotonic() - start
            self.runs.append(run)

    # -- the benchmarks --------------------------------------------------------------------------
    def run(self) -> None:
        s = self.s
        try:
            if "rate" in s.benchmarks:
                for system in self.openum:
                    if system.transport in UDP_TRANSPORTS:
                        self.max_rate(system)
            if "throughput" in s.benchmarks:
                for k in range(s.repeat):
                    for system in self.systems:
                        rate = self.paced_rate(system)
                        r = self.throughput(
                            "throughput", system, s.size, s.count, k, rate=rate, loss_expected=bool(rate)
                        )
                        paced = f" paced at {rate:,.0f} msgs/s" if rate else ""
                        self._say(f"throughput {system.label} {s.size} B #{k + 1}{paced}: {_rate_text(r)}")
                for system in self.openum:
                    if system.transport in UDP_TRANSPORTS:
                        r = self.throughput(
                            "unthrottled", system, s.size, s.count, 0, loss_expected=True, idle_timeout=5.0
                        )
                        self._say(f"unthrottled {system.label} {s.size} B: {_rate_text(r)}")
            if "latency" in s.benchmarks:
                modes = [False, True] if s.busy else [False]
                for busy in modes:
                    for k in range(s.latency_repeat):
                        for system in self.systems:
                            if system.name == "openum" and system.transport == "lbtsmx" and not busy:
                                continue  # LBT-SMX receivers only busy-wait (6.5): measured with --busy
                            r = self.latency(system, k, busy)
                            rtt = r.result.get("rtt_us", {})
                            self._say(
                                f"latency {system.label}{' busy' if busy else ''} #{k + 1}: "
                                + (
                                    f"p50 {rtt.get('p50')} us p99 {rtt.get('p99')} us"
                                    if r.ok
                                    else f"FAILED {r.error[:200]}"
                                )
                            )
            if "sweep" in s.benchmarks:
                for k in range(s.sweep_repeat):
                    for size in s.sizes:
                        count = self.sweep_count(size)
                        for system in self.systems:
                            udp = system.is_openum and system.transport in UDP_TRANSPORTS
                            r = self.throughput(
                                "sweep",
                                system,
                                size,
                                count,
                                k,
                                loss_expected=udp,
                                idle_timeout=5.0 if udp else None,
                            )
                            self._say(f"sweep {system.label} {size} B x {count}: {_rate_text(r)}")
            if "memory" in s.benchmarks and s.memory:
                targets = s.memory_transports or [x.transport for x in self.openum]
                for system in self.openum:
                    if system.transport not in targets:
                        continue
                    points = sorted({p for p in s.memory_points if p < s.memory_count} | {s.memory_count})
                    rate = self.memory_rate(system)
                    r = self.throughput(
                        "memory",
                        system,
                        s.size,
                        s.memory_count,
                        0,
                        rate=rate,
                        rss_points=points,
                        idle_timeout=30,
                        loss_expected=bool(rate),
                    )
                    paced = f" at {rate:,.0f} msgs/s" if rate else ""
                    self._say(f"memory {system.label} {s.memory_count} messages{paced}: {_rate_text(r)}")
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def paced_rate(self, system: System) -> float:
        """The send rate of a UDP transport's throughput runs: its maximum sustainable rate (UDP
        transports have no flow control: unthrottled, the fastest sender outruns its receiver); 0
        (unlimited) for everything else, or when no sustainable rate was found."""
        if not system.is_openum or system.transport not in UDP_TRANSPORTS:
            return 0.0
        return float(self.rate_results.get(system.transport, {}).get("max_sustained") or 0.0)

    def memory_rate(self, system: System) -> float:
        """The send rate of a memory run: unlimited on TCP (receiver-paced); on the UDP transports,
        which have no flow control, 80% of the maximum sustainable rate found (or of the measured
        throughput), so that the run measures memory, not loss recovery (``--memory-rate``)."""
        if self.s.memory_rate is not None or system.transport not in UDP_TRANSPORTS:
            return self.s.memory_rate or 0.0
        found = self.rate_results.get(system.transport, {}).get("max_sustained")
        if found:
            return 0.8 * float(found)
        measured = [r.result.get("msgs_per_sec", 0.0) for r in self._ok("throughput", system, self.s.size)]
        return 0.8 * statistics.median(measured) if measured else 50_000.0

    def sweep_count(self, size: int) -> int:
        return max(1000, min(self.s.sweep_count, self.s.sweep_bytes // size))

    def max_rate(self, system: System) -> None:
        """Highest send rate with zero loss over ``rate_duration`` s: a binary search on the rate."""
        s = self.s
        high = s.rate_start
        good, bad = 0.0, 0.0
        probes: list[dict[str, Any]] = []
        rate = high
        for step in range(max(1, s.rate_steps)):
            count = max(100, int(rate * s.rate_duration))
            r = self.throughput(
                "rate", system, s.size, count, step, rate=rate, idle_timeout=3.0, loss_expected=True
            )
            achieved = r.publisher.get("msgs_per_sec", 0.0)
            lost = r.extra.get("lost", 0.0)
            sustained = r.ok and not lost and achieved >= 0.95 * rate
            if not r.ok:
                reason = r.error[:200]
            elif lost:
                reason = f"{lost * 100:.2g}% lost"
            elif not sustained:
                # The publisher could not send faster, and nothing was lost: the rate it reached held
                # with zero loss for the whole run, which is what a sustainable rate is.
                reason = f"publisher reached only {achieved:,.0f} msgs/s, with zero loss"
            else:
                reason = "zero loss"
            probes.append({"rate": round(rate), "sustained": sustained, "why": reason})
            r.extra["sustained"] = sustained
            self._say(f"max rate {system.label}: {rate:,.0f} msgs/s -> {'ok' if sustained else reason}")
            if sustained:
                good = max(good, min(rate, achieved))  # what was sent, within 5% of the rate asked
            else:
                bad = rate
                if r.ok and not lost:
                    good = max(good, achieved)
            # Until a rate fails, double it (the top of the range held); then bisect.
            rate = good * 2 if not bad else (good + bad) / 2
        self.rate_results[system.transport] = {
            "max_sustained": round(good),
            "search_started_at": round(high),
            "lower_bound_only": bool(good) and not bad,
            "duration_s": s.rate_duration,
            "probes": probes,
        }

    def _ok(self, kind: str, system: System, size: int) -> list[Run]:
        return [r for r in self.runs if r.kind == kind and r.system == system and r.size == size and r.ok]

    # -- results ---------------------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        s = self.s
        rows: list[dict[str, Any]] = []
        # Runs that lost messages (a UDP transport paced at a rate it did not sustain over the whole
        # count) are reported, not counted in the median.
        lossless = {
            x: [r for r in self._ok("throughput", x, s.size) if not r.extra.get("lost")] for x in self.systems
        }
        thr = {x: _median([r.result["msgs_per_sec"] for r in lossless[x]]) for x in self.systems}
        lat: dict[tuple[System, bool], dict[str, float | None]] = {}
        slow_runs: list[dict[str, Any]] = []
        for x in self.systems:
            for busy in (False, True):
                runs = [
                    r
                    for r in self.runs
                    if r.kind == "latency" and r.system == x and r.ok and r.extra["busy"] is busy
                ]
                lat[(x, busy)] = {
                    key: _median([r.result["rtt_us"][key] for r in runs])
                    for key in ("min", "p50", "p90", "p99", "p999", "max")
                }
                slow_runs += _slow_throughout(runs, lat[(x, busy)]["min"])
        ref = System(*REFERENCE)
        ipc_ref = System(*IPC_REFERENCE)
        for x in self.systems:
            for busy in (False, True) if s.busy else (False,):
                ref_t = thr.get(ref)
                reference = ipc_ref if x.transport in ("lbtipc", "lbtsmx") else ref
                rtt = lat[(x, busy)]
                ref_rtt = lat.get((ref, busy), {})
                row: dict[str, Any] = {
                    "system": x.name,
                    "transport": x.transport,
                    "busy": busy,
                    "msgs_per_sec": None if busy else thr.get(x),
                    "throughput_runs": len(lossless[x]),
                    "throughput_runs_with_loss": len(self._ok("throughput", x, s.size)) - len(lossless[x]),
                    "throughput_vs": reference.label,
                    "throughput_ratio": None if busy else _ratio(thr.get(x), thr.get(reference)),
                    "throughput_ratio_pyzmq_tcp": None if busy else _ratio(thr.get(x), ref_t),
                    "paced_at": None if busy else (self.paced_rate(x) or None),
                    "rtt_us": rtt,
                    "rtt_p50_ratio": _ratio(rtt.get("p50"), ref_rtt.get("p50")),
                    "rtt_p99_ratio": _ratio(rtt.get("p99"), ref_rtt.get("p99")),
                }
                for peer in self.peers:
                    row[f"throughput_ratio_{peer.name}_{peer.transport}"] = (
                        None if busy else _ratio(thr.get(x), thr.get(peer))
                    )
                    peer_rtt = lat.get((peer, busy), {})
                    row[f"rtt_p50_ratio_{peer.name}_{peer.transport}"] = _ratio(
                        rtt.get("p50"), peer_rtt.get("p50")
                    )
                    row[f"rtt_p99_ratio_{peer.name}_{peer.transport}"] = _ratio(
                        rtt.get("p99"), peer_rtt.get("p99")
                    )
                rows.append(row)
        sweep: list[dict[str, Any]] = []
        for size in s.sizes if "sweep" in s.benchmarks else []:
            entry: dict[str, Any] = {"size": size, "count": self.sweep_count(size), "msgs_per_sec": {}}
            entry["lost"] = {}
            for x in self.systems:
                ok = self._ok("sweep", x, size)
                entry["msgs_per_sec"][x.label] = _median([r.result["msgs_per_sec"] for r in ok])
                entry["lost"][x.label] = _median([r.extra.get("lost", 0.0) for r in ok])
            ref_v = entry["msgs_per_sec"].get(ref.label)
            entry["ratio_vs_pyzmq_tcp"] = {
                x.label: _ratio(entry["msgs_per_sec"][x.label], ref_v) for x in self.openum
            }
            sweep.append(entry)
        memory: list[dict[str, Any]] = []
        for r in self.runs:
            if r.kind != "memory":
                continue
            rss = r.result.get("rss", {})
            first_key = str(min(s.memory_points)) if s.memory_points else None
            first = rss.get(first_key) if first_key else None
            last = rss.get(str(s.memory_count))
            if last is None and r.extra.get("lost") and r.result.get("rss_end"):
                # Loss at the tail: the last counter never came; the RSS at the end stands in for it.
                last = r.result["rss_end"]
                rss = {**rss, str(s.memory_count): last}
            memory.append(
                {
                    "transport": r.system.transport,
                    "ok": r.ok,
                    "rate": r.extra.get("rate", 0.0),
                    "lost": r.extra.get("lost", 0.0),
                    "rss_bytes": rss,
                    "from": int(first_key) if first_key else None,
                    "to": s.memory_count,
                    "growth": None if not (first and last) else round(last / first - 1, 4),
                }
            )
        unthrottled = [
            {
                "transport": r.system.transport,
                "ok": r.ok,
                "msgs_per_sec": r.result.get("msgs_per_sec"),
                "publisher_msgs_per_sec": r.publisher.get("msgs_per_sec"),
                "lost": r.extra.get("lost", 0.0),
                "unrecoverable_loss": r.result.get("unrecoverable_loss", 0),
                "unrecoverable_loss_burst": r.result.get("unrecoverable_loss_burst", 0),
            }
            for r in self.runs
            if r.kind == "unthrottled"
        ]
        return {
            "rows": rows,
            "latency_slow_runs": slow_runs,
            "unthrottled": unthrottled,
            "sweep": sweep,
            "max_rate": self.rate_results,
            "memory": memory,
        }

    def targets(self, summary: dict[str, Any]) -> list[dict[str, Any]]:
        rows = {(r["system"], r["transport"], r["busy"]): r for r in summary["rows"]}
        out: list[dict[str, Any]] = []
        have_ref = (*REFERENCE, False) in rows
        size_note = "" if self.s.size == 64 else f" (measured at {self.s.size} B)"

        def add(name: str, value: float | None, limit: float, higher: bool, why: str = "") -> None:
            if why:
                status = "N/A"
            elif value is None:
                status, why = "N/A", "not measured (a run failed or was skipped)"
            else:
                status = "PASS" if (value >= limit if higher else value <= limit) else "FAIL"
            out.append(
                {"target": name + size_note, "value": value, "limit": limit, "status": status, "why": why}
            )

        def unavailable(t: str) -> str:
            if t not in self.s.transports:
                return f"{t} not selected (--transports)"
            if t not in self.available:
                return f"openum {t}: not available in this build"
            return ""

        def missing_ref(label: str) -> str:
            peer, kind = label.split(" ", 1)
            return self.missing_peers.get(peer, "") or (
                "" if (peer, kind, False) in rows else f"{label} not measured"
            )

        thr_on = "throughput" in self.s.benchmarks
        lat_on = "latency" in self.s.benchmarks
        for t, limit in (("tcp", 1.2), ("lbtrm", 1.0), ("lbtru", 1.0)):
            why = unavailable(t) or missing_ref("pyzmq tcp") or ("" if thr_on else "throughput skipped")
            row = rows.get(("openum", t, False), {})
            value = row.get("throughput_ratio")
            if not why and value is None and row.get("throughput_runs_with_loss"):
                why = (
                    f"every run paced at the maximum sustainable rate ({row.get('paced_at'):,.0f} msgs/s) "
                    f"lost messages over {self.s.count:,}: that rate did not hold"
                )
            add(f"throughput, {DISPLAY[t]} >= {limit} x pyzmq tcp", value, limit, True, why)
        for t, limit in (("lbtipc", 3.0), ("lbtsmx", 5.0)):
            why = unavailable(t) or missing_ref("pyzmq ipc") or ("" if thr_on else "throughput skipped")
            value = rows.get(("openum", t, False), {}).get("throughput_ratio")
            add(f"throughput, {DISPLAY[t]} >= {limit} x pyzmq ipc", value, limit, True, why)
        for t in NETWORK_TRANSPORTS:
            why = unavailable(t) or missing_ref("pyzmq tcp") or ("" if lat_on else "latency skipped")
            row = rows.get(("openum", t, False), {})
            add(f"RTT p50, {DISPLAY[t]} <= 1.0 x pyzmq tcp", row.get("rtt_p50_ratio"), 1.0, False, why)
            add(f"RTT p99, {DISPLAY[t]} <= 1.5 x pyzmq tcp", row.get("rtt_p99_ratio"), 1.5, False, why)
        smx_why = (
            unavailable("lbtsmx")
            or ("" if self.s.busy else "busy-wait latency not run (--busy)")
            or missing_ref("pyzmq ipc")
        )
        smx = rows.get(("openum", "lbtsmx", True), {})
        add("RTT p50, LBT-SMX busy-wait <= 2 us", (smx.get("rtt_us") or {}).get("p50"), 2.0, False, smx_why)
        add(
            "RTT p50, LBT-SMX busy-wait <= 0.1 x pyzmq ipc (busy-wait)",
            smx.get("rtt_p50_ratio_pyzmq_ipc"),
            0.1,
            False,
            smx_why,
        )
        ipc_why = unavailable("lbtipc") or missing_ref("pyzmq ipc") or ("" if lat_on else "latency skipped")
        add(
            "RTT p50, LBT-IPC pend <= 1.0 x pyzmq ipc",
            rows.get(("openum", "lbtipc", False), {}).get("rtt_p50_ratio_pyzmq_ipc"),
            1.0,
            False,
            ipc_why,
        )
        out.append(
            {
                "target": "delivery under 5% datagram loss (LBT-RM): 100% in order, "
                "retransmissions <= 1.5 x lost",
                "value": None,
                "limit": None,
                "status": "N/A",
                "why": "not measured by openum bench (needs injected loss: tests/faults)",
            }
        )
        mem = summary["memory"]
        if not mem:
            out.append(
                {
                    "target": "memory: receiver RSS flat (+/- 10%) from 1 M to 10 M messages",
                    "value": None,
                    "limit": 0.1,
                    "status": "N/A",
                    "why": "memory check not run (--no-memory)",
                }
            )
        for m in mem:
            short = m["to"] < MEMORY_TARGET_COUNT
            add(
                f"memory: {DISPLAY.get(m['transport'], m['transport'])} receiver RSS flat (+/- 10%) "
                f"from {_count_text(m['from'])} to {_count_text(m['to'])} messages"
                + (" (the target is to 10 M: run without --memory)" if short else ""),
                None if m["growth"] is None else abs(m["growth"]),
                0.10,
                False,
            )
        if not have_ref and "pyzmq" in self.missing_peers:
            self.notes.append("no ratios: the reference peer pyzmq is not installed")
        return out

    def machine(self) -> dict[str, Any]:
        return machine_facts()


def machine_facts() -> dict[str, Any]:
    from openum._accel import COMPILED, REASON
    from openum._version import __version__

    facts: dict[str, Any] = {
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": _cpu_model(),
        "memory_total_mb": _mem_total_mb(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "openum": __version__,
        # The workers inherit the environment, so they run what this process runs.
        "openum_compiled": COMPILED,
        "openum_build": REASON,
    }
    try:
        import zmq

        facts["pyzmq"] = zmq.__version__
        facts["libzmq"] = zmq.zmq_version()
    except ImportError:
        facts["pyzmq"] = None
    try:
        facts["zenoh"] = importlib.metadata.version("eclipse-zenoh")
    except importlib.metadata.PackageNotFoundError:
        facts["zenoh"] = None
    return facts


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_total_mb() -> int | None:
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) // 1024
    except (OSError, ValueError):
        pass
    return None


# A round-trip run whose fastest round trip is this much slower than the median run's fastest was slow
# throughout: not a tail, a different speed for the whole run (docs/performance.md: where the OS loaded
# both processes' code).
SLOW_THROUGHOUT = 1.3


def _slow_throughout(runs: list[Run], median_min: float | None) -> list[dict[str, Any]]:
    """The latency runs among ``runs`` that were slow from their first round trip to their last."""
    if median_min is None or len(runs) < 3:
        return []
    out: list[dict[str, Any]] = []
    for r in runs:
        rtt = r.result["rtt_us"]
        if rtt["min"] > SLOW_THROUGHOUT * median_min:
            out.append(
                {
                    "system": r.system.name,
                    "transport": r.system.transport,
                    "busy": r.extra["busy"],
                    "repeat": r.repeat,
                    "min": rtt["min"],
                    "p50": rtt["p50"],
                    "p99": rtt["p99"],
                    "median_min": median_min,
                }
            )
    return out


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or not b:
        return None
    return round(a / b, 3)


def _rate_text(run: Run) -> str:
    if run.ok:
        return f"{run.result.get('msgs_per_sec', 0):,.0f} msgs/s"
    return f"FAILED {run.error[:300]}"


def _count_text(n: int | None) -> str:
    if n is None:
        return "?"
    if n >= 1_000_000 and n % 100_000 == 0:
        return f"{n / 1_000_000:g} M"
    return f"{n:,}"
