"""Fuzzing openum's receive paths with mutated valid traffic: ``python -m openum.testing.fuzz``.

The decoders alone are not the attack surface: what a receiver does *after* decoding is.  Each target
(:mod:`openum.testing._fuzz_targets`: ``resolver``, ``lbtrm``, ``lbtru``, ``tcp``, ``lbmrd``) makes
valid traffic with openum's own encoders and source engines, and the harness mutates it: bit flips,
interesting bytes (0, 0x7F, 0x80, 0xFF), sequence-number jumps near 2**31 and 2**32, truncation,
extension, splicing two datagrams, duplicated records and datagrams, dropped and swapped datagrams,
tokens of the format inserted (a dictionary: regex tokens for wildcard patterns, u32 edge values).
Each input is fed to fresh receiving state under a fake clock (gaps between datagrams from
microseconds to seconds; the timers then run up to 90 s of simulated time), and for each input:

- any exception that escapes the receive path is a finding (a :class:`~openum.wire.WireError` too:
  decoders raise it, receivers must count and drop it), written as a reproducer file under ``--out``;
- its CPU time (``time.process_time``) must stay under ``--time-bound-ms`` (default 100 ms); an input
  still running at ten times the bound is stopped between two steps and reported;
- its work (datagrams sent, messages and events delivered) must stay under ``--work-bound``.

Runs are deterministic from ``--seed``: input ``i`` of a target is generated from
``random.Random(f"{seed}:{target}:{i}")``, so ``--target T --seed S --start I --inputs 1`` replays one
input, and ``--replay FILE`` replays a reproducer file byte for byte.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from openum.testing._fuzz_targets import TARGETS, Budget, BudgetExceededError, FuzzTarget, make_target

__all__ = [
    "Case",
    "Finding",
    "FuzzReport",
    "Mutator",
    "generate_case",
    "main",
    "replay",
    "run_case",
    "run_target",
]

MS: Final = 1_000_000
DEFAULT_TIME_BOUND_MS: Final = 100.0
#: Targets whose worst case is UM's own protocol work, not a defect: a far sequence-number jump that two
#: datagrams confirm is a gap of up to MAX_TRACKED_LOSSES datagrams, NAKed every NAK backoff interval
#: until the NAK generation interval ends (at most MAX_POLL_ENTRIES a poll).  Over the 90 s each input
#: simulates that is up to about 0.5 s of CPU (about 5 % of one core for 10 s).
TARGET_TIME_BOUNDS_MS: Final[dict[str, float]] = {"lbtrm": 1000.0, "lbtru": 1000.0}
DEFAULT_WORK_BOUND: Final = 100_000
#: An input is stopped once it has used this many times its time bound (checked between steps).
ABORT_FACTOR: Final = 10.0
_INTERESTING_BYTES: Final = (0x00, 0xFF, 0x7F, 0x80, 0x01, 0xFE)
_SQN_JUMPS: Final = (
    1 << 31,
    (1 << 31) - 1,
    (1 << 31) + 1,
    (1 << 32) - 1,
    (1 << 32) - 2,
    1 << 30,
    1 << 20,
    65_536,
    1000,
)
_GAPS_NS: Final = (0, 0, 10_000, 1 * MS, 5 * MS, 20 * MS, 200 * MS, 1500 * MS, 11_000 * MS)


@dataclass(frozen=True)
class Case:
    """One input: datagrams (or stream chunks), each arriving ``gaps_ns[i]`` after the previous."""

    chunks: tuple[bytes, ...]
    gaps_ns: tuple[int, ...]
    mutations: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "chunks": [c.hex() for c in self.chunks],
            "gaps_ns": list(self.gaps_ns),
            "mutations": list(self.mutations),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Case:
        return cls(
            tuple(bytes.fromhex(c) for c in data["chunks"]),
            tuple(int(g) for g in data["gaps_ns"]),
            tuple(data.get("mutations", ())),
        )


# --- mutations ---------------------------------------------------------------------------------------

Chunks = list[bytes]
Mutator = Callable[[random.Random, Chunks, tuple[bytes, ...]], str]


def _pick(rng: random.Random, chunks: Chunks) -> int:
    return rng.randrange(len(chunks))


def _bit_flip(rng: random.Random, chunks: Chunks, _d: tuple[bytes, ...]) -> str:
    i = _pick(rng, chunks)
    data = bytearray(chunks[i])
    if not data:
        return "bit_flip(empty)"
    for _ in range(rng.choice((1, 1, 2, 4))):
        pos = rng.randrange(len(data))
        data[pos] ^= 1 << rng.randrange(8)
    chunks[i] = bytes(data)
    return f"bit_flip({i})"


def _interesting_byte(rng: random.Random, chunks: Chunks, _d: tuple[bytes, ...]) -> str:
    i = _pick(rng, chunks)
    data = bytearray(chunks[i])
    if not data:
        return "byte(empty)"
    # header bytes are where the interesting fields are: bias toward the start
    pos = rng.randrange(min(len(data), 48)) if rng.random() < 0.7 else rng.randrange(len(data))
    data[pos] = rng.choice(_INTERESTING_BYTES)
    chunks[i] = bytes(data)
    return f"byte({i}@{pos})"


def _sqn_jump(rng: random.Random, chunks: Chunks, _d: tuple[bytes, ...]) -> str:
    """Add a jump near 2**31 or 2**32 to a u32 at a 4-aligned header offset (where sequence numbers
    live in LBT-RM, LBT-RU and LBMC headers), or write an edge value there."""
    i = _pick(rng, chunks)
    data = bytearray(chunks[i])
    if len(data) < 4:
        return "sqn(short)"
    pos = (
        rng.randrange(0, min(len(data) - 3, 44) // 4 + 1) * 4
        if rng.random() < 0.8
        else rng.randrange(len(data) - 3)
    )
    pos = min(pos, len(data) - 4)
    value = int.from_bytes(data[pos : pos + 4], "big")
    jump = rng.choice(_SQN_JUMPS)
    value = (value + jump if rng.random() < 0.75 else value - jump) & 0xFFFF_FFFF
    data[pos : pos + 4] = value.to_bytes(4, "big")
    chunks[i] = bytes(data)
    return f"sqn({i}@{pos}+{jump})"


def _truncate(rng: random.Random, chunks: Chunks, _d: tuple[bytes, ...]) -> str:
    i = _pick(rng, chunks)
    cut = rng.randrange(len(chunks[i]) + 1)
    chunks[i] = chunks[i][:cut]
    return f"truncate({i}:{cut})"


def _extend(rng: random.Random, chunks: Chunks, _d: tuple[bytes, ...]) -> str:
    i = _pick(rng, chunks)
    data = chunks[i]
    if data and rng.random() < 0.5:
        start = rng.randrange(len(data))
        tail = data[start:] * rng.randrange(1, 4)
    else:
        tail = rng.randbytes(rng.randrange(1, 64))
    chunks[i] = data + tail
    return f"extend({i}+{len(tail)})"


def _splice(rng: random.Random, chunks: Chunks, _d: tuple[bytes, ...]) -> str:
    i, j = _pick(rng, chunks), _pick(rng, chunks)
    a, b = chunks[i], chunks[j]
    chunks[i] = a[: rng.randrange(len(a) + 1)] + b[rng.randrange(len(b) + 1) :]
    return f"splice({i},{j})"


def _duplicate_record(rng: random.Random, chunks: Chunks, _d: tuple[bytes, ...]) -> str:
    """Repeat a slice inside a datagram (a record, a header, a list entry) a few times."""
    i = _pick(rng, chunks)
    data = chunks[i]
    if len(data) < 2:
        return "dup_record(short)"
    start = rng.randrange(len(data) - 1)
    end = rng.randrange(start + 1, min(len(data), start + 64) + 1)
    chunks[i] = data[:end] + data[start:end] * rng.randrange(1, 8) + data[end:]
    return f"dup_record({i}:{start}-{end})"


def _duplicate_datagram(rng: random.Random, chunks: Chunks, _d: tuple[bytes, ...]) -> str:
    i = _pick(rng, chunks)
    for _ in range(rng.randrange(1, 4)):
        chunks.insert(rng.randrange(len(chunks) + 1), chunks[i])
    return f"dup_datagram({i})"


def _drop_or_swap(rng: random.Random, chunks: Chunks, _d: tuple[bytes, ...]) -> str:
    i, j = _pick(rng, chunks), _pick(rng, chunks)
    if len(chunks) > 1 and rng.random() < 0.5:
        del chunks[i]
        return f"drop({i})"
    chunks[i], chunks[j] = chunks[j], chunks[i]
    return f"swap({i},{j})"


def _dictionary(rng: random.Random, chunks: Chunks, dictionary: tuple[bytes, ...]) -> str:
    if not dictionary:
        return _interesting_byte(rng, chunks, dictionary)
    i = _pick(rng, chunks)
    data = chunks[i]
    token = rng.choice(dictionary) * rng.choice((1, 1, 2, 4, 8))
    pos = rng.randrange(len(data) + 1)
    if rng.random() < 0.5:
        chunks[i] = data[:pos] + token + data[pos:]  # insert
    else:
        chunks[i] = data[:pos] + token + data[pos + len(token) :]  # overwrite
    return f"dict({i}@{pos})"


MUTATORS: Final[tuple[tuple[str, Mutator], ...]] = (
    ("bit_flip", _bit_flip),
    ("interesting_byte", _interesting_byte),
    ("sqn_jump", _sqn_jump),
    ("truncate", _truncate),
    ("extend", _extend),
    ("splice", _splice),
    ("duplicate_record", _duplicate_record),
    ("duplicate_datagram", _duplicate_datagram),
    ("drop_or_swap", _drop_or_swap),
    ("dictionary", _dictionary),
)


def generate_case(target: FuzzTarget, rng: random.Random) -> Case:
    """Valid traffic from ``target`` with 0-4 mutations (about one input in ten stays valid)."""
    chunks = target.trace(rng) or [b""]
    done: list[str] = []
    count = 0 if rng.random() < 0.1 else rng.choice((1, 1, 1, 2, 2, 3, 4))
    for _ in range(count):
        _, mutate = rng.choice(MUTATORS)
        done.append(mutate(rng, chunks, target.dictionary))
        if not chunks:
            chunks = [b""]
    gaps = tuple(rng.choice(_GAPS_NS) for _ in chunks)
    return Case(tuple(chunks), gaps, tuple(done))


# --- running -------------------------------------------------------------------------------------------


@dataclass
class Finding:
    """An input that raised, ran over the time bound or did too much work."""

    target: str
    seed: str
    index: int
    kind: str  # "exception", "warning", "time", "work"
    detail: str
    cpu_ms: float
    work: int
    case: Case
    path: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "seed": self.seed,
            "index": self.index,
            "kind": self.kind,
            "detail": self.detail,
            "cpu_ms": round(self.cpu_ms, 3),
            "work": self.work,
            "case": self.case.to_json(),
            "replay": f"python -m openum.testing.fuzz --target {self.target} --seed {self.seed} "
            f"--start {self.index} --inputs 1",
            "path": self.path,
        }


@dataclass
class FuzzReport:
    """What one target's run saw."""

    target: str
    seed: str
    inputs: int = 0
    exceptions: int = 0
    over_time: int = 0
    over_work: int = 0
    cpu_s: float = 0.0
    wall_s: float = 0.0
    max_cpu_ms: float = 0.0
    max_work: int = 0
    time_bound_ms: float = DEFAULT_TIME_BOUND_MS
    work_bound: int = DEFAULT_WORK_BOUND
    stopped_early: bool = False
    slowest: list[tuple[float, int]] = field(default_factory=list)  # (cpu ms, index), slowest first
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.exceptions or self.over_time or self.over_work)

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["findings"] = [f.to_json() for f in self.findings]
        data["ok"] = self.ok
        data["cpu_s"] = round(self.cpu_s, 3)
        data["wall_s"] = round(self.wall_s, 3)
        data["max_cpu_ms"] = round(self.max_cpu_ms, 3)
        data["slowest"] = [[round(ms, 3), i] for ms, i in self.slowest]
        return data

    def summary(self) -> str:
        verdict = "OK" if self.ok else "FAILED"
        return (
            f"{self.target}: {self.inputs} inputs, {self.exceptions} exceptions escaped, "
            f"{self.over_time} over {self.time_bound_ms:g} ms, {self.over_work} over {self.work_bound} work; "
            f"slowest {self.max_cpu_ms:.2f} ms (input {self.slowest[0][1] if self.slowest else '-'}), "
            f"most work {self.max_work}; {self.cpu_s:.1f} s CPU: {verdict}"
            + (" (stopped early)" if self.stopped_early else "")
        )


def run_case(
    target: FuzzTarget, case: Case, time_bound_ms: float, work_bound: int, abort_ms: float | None = None
) -> tuple[str | None, str, float, int]:
    """Run one input: ``(finding kind or None, detail, cpu ms, work)``.  The input is stopped (between
    two steps) after ``abort_ms`` of CPU (default: ten times the bound, at least one second)."""
    if abort_ms is None:
        abort_ms = max(time_bound_ms * ABORT_FACTOR, 1000.0)
    abort_s = abort_ms / 1000.0
    budget = Budget(time.process_time, abort_s)
    started = time.process_time()
    work = 0
    kind: str | None = None
    detail = ""
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            work = target.run(case.chunks, case.gaps_ns, budget)
        if caught:
            # Remote input made the process warn: on stderr in production, an exception under
            # ``-W error`` (and under this project's pytest configuration).
            w = caught[0]
            kind = "warning"
            detail = f"{w.category.__name__}: {w.message} ({w.filename}:{w.lineno})"
    except BudgetExceededError:
        kind, detail = "time", f"stopped after {abort_s * 1000:.0f} ms of CPU"
        _release(target)
    except Exception as exc:  # every escaping exception is a finding, WireError included
        kind = "exception"
        detail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        _release(target)
    cpu_ms = (time.process_time() - started) * 1000.0
    if kind is None and cpu_ms > time_bound_ms:
        kind, detail = "time", f"{cpu_ms:.1f} ms of CPU (bound {time_bound_ms:g} ms)"
    elif kind is None and work > work_bound:
        kind, detail = "work", f"{work} datagrams sent, messages and events delivered (bound {work_bound})"
    return kind, detail, cpu_ms, work


def _release(target: FuzzTarget) -> None:
    """After an input that did not finish: release what it made (sockets), if that still works."""
    try:
        target.finish()
    except Exception:  # the state may be half-built; the next input resets it anyway
        pass


def _write_reproducer(out: Path, finding: Finding) -> str:
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{finding.target}-{finding.kind}-{finding.seed}-{finding.index}.json"
    path.write_text(json.dumps(finding.to_json(), indent=1) + "\n")
    return str(path)


def run_target(
    name: str,
    *,
    inputs: int,
    seed: str = "0",
    start: int = 0,
    time_bound_ms: float = DEFAULT_TIME_BOUND_MS,
    work_bound: int = DEFAULT_WORK_BOUND,
    max_findings: int = 10,
    out: Path | None = None,
    progress: Callable[[str], None] | None = None,
    progress_every_s: float = 5.0,
    target: FuzzTarget | None = None,
    abort_ms: float | None = None,
) -> FuzzReport:
    """Fuzz one target with ``inputs`` inputs (numbered from ``start``); stop after ``max_findings``.

    ``target``: an instance to use instead of the registered target ``name`` (tests plant failures)."""
    target = target if target is not None else make_target(name)
    report = FuzzReport(name, seed, time_bound_ms=time_bound_ms, work_bound=work_bound)
    wall0 = time.monotonic()
    cpu0 = time.process_time()
    next_progress = wall0 + progress_every_s
    target.start()
    try:
        for index in range(start, start + inputs):
            case = generate_case(target, random.Random(f"{seed}:{name}:{index}"))
            kind, detail, cpu_ms, work = run_case(target, case, time_bound_ms, work_bound, abort_ms)
            report.inputs += 1
            report.max_work = max(report.max_work, work)
            report.max_cpu_ms = max(report.max_cpu_ms, cpu_ms)
            if len(report.slowest) < 5 or cpu_ms > report.slowest[-1][0]:
                report.slowest = sorted([*report.slowest, (cpu_ms, index)], reverse=True)[:5]
            if kind is not None:
                if kind in ("exception", "warning"):
                    report.exceptions += 1
                elif kind == "time":
                    report.over_time += 1
                else:
                    report.over_work += 1
                finding = Finding(name, seed, index, kind, detail, cpu_ms, work, case)
                if out is not None:
                    finding.path = _write_reproducer(out, finding)
                report.findings.append(finding)
                if progress is not None:
                    progress(f"{name}: input {index}: {kind}: {detail.strip().splitlines()[-1]}")
                if len(report.findings) >= max_findings:
                    report.stopped_early = index + 1 < start + inputs
                    break
            if progress is not None and time.monotonic() >= next_progress:
                next_progress = time.monotonic() + progress_every_s
                elapsed = time.monotonic() - wall0
                progress(
                    f"{name}: {report.inputs}/{inputs} inputs, {report.inputs / elapsed:.0f}/s, "
                    f"slowest {report.max_cpu_ms:.2f} ms, findings {len(report.findings)}"
                )
    finally:
        target.close()
        report.cpu_s = time.process_time() - cpu0
        report.wall_s = time.monotonic() - wall0
    return report


def replay(
    path: Path,
    time_bound_ms: float | None = None,
    work_bound: int = DEFAULT_WORK_BOUND,
    target: FuzzTarget | None = None,
) -> tuple[str | None, str, float, int]:
    """Run the input of a reproducer file again, byte for byte (on ``target`` if given, else on the
    registered target the file names): ``(finding kind or None, detail, cpu ms, work)``."""
    data = json.loads(path.read_text())
    target = target if target is not None else make_target(data["target"])
    bound = time_bound_ms or TARGET_TIME_BOUNDS_MS.get(data["target"], DEFAULT_TIME_BOUND_MS)
    target.start()
    try:
        return run_case(target, Case.from_json(data["case"]), bound, work_bound)
    finally:
        target.close()


# --- command line ----------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m openum.testing.fuzz",
        description="Fuzz openum's receive paths with mutated valid traffic; exit 1 on any finding.",
    )
    p.add_argument(
        "--target",
        action="append",
        choices=sorted(TARGETS),
        help="a receive path to fuzz (repeatable; default: all of them)",
    )
    p.add_argument("--inputs", type=int, default=10_000, help="inputs per target (default 10000)")
    p.add_argument("--seed", default="0", help="the run's seed (any string; default 0)")
    p.add_argument("--start", type=int, default=0, help="the first input's number (to replay input N)")
    p.add_argument(
        "--time-bound-ms",
        type=float,
        default=None,
        help=f"CPU time allowed per input, ms (default {DEFAULT_TIME_BOUND_MS:g}; "
        + ", ".join(f"{t} {b:g}" for t, b in TARGET_TIME_BOUNDS_MS.items())
        + ")",
    )
    p.add_argument(
        "--work-bound",
        type=int,
        default=DEFAULT_WORK_BOUND,
        help=f"datagrams sent + messages/events delivered allowed per input (default {DEFAULT_WORK_BOUND})",
    )
    p.add_argument("--max-findings", type=int, default=10, help="stop a target after this many findings")
    p.add_argument("--out", type=Path, default=None, help="write a reproducer file per finding here")
    p.add_argument("--replay", type=Path, default=None, help="run a reproducer file's input again")
    p.add_argument("--json", action="store_true", help="print the reports as JSON on stdout")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.time_bound_ms is not None and args.time_bound_ms <= 0:
        args.inputs = -1  # refused below, with the others
    if args.inputs < 0 or args.work_bound <= 0 or args.max_findings <= 0:
        print("--inputs must be >= 0; --time-bound-ms, --work-bound and --max-findings > 0", file=sys.stderr)
        return 2
    if args.replay is not None:
        kind, detail, cpu_ms, work = replay(
            args.replay, args.time_bound_ms or DEFAULT_TIME_BOUND_MS, args.work_bound
        )
        result = {"finding": kind, "detail": detail, "cpu_ms": round(cpu_ms, 3), "work": work}
        print(
            json.dumps(result, indent=1)
            if args.json
            else f"{kind or 'no finding'}: {cpu_ms:.2f} ms, work {work}\n{detail}"
        )
        return 1 if kind else 0

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    reports = []
    for name in args.target or list(TARGETS):
        report = run_target(
            name,
            inputs=args.inputs,
            seed=args.seed,
            start=args.start,
            time_bound_ms=args.time_bound_ms or TARGET_TIME_BOUNDS_MS.get(name, DEFAULT_TIME_BOUND_MS),
            work_bound=args.work_bound,
            max_findings=args.max_findings,
            out=args.out,
            progress=None if args.quiet else progress,
        )
        reports.append(report)
        if not args.json:
            print(report.summary(), flush=True)
            for f in report.findings:
                where = f" -> {f.path}" if f.path else ""
                print(f"  input {f.index}: {f.kind}: {f.detail.strip().splitlines()[-1]}{where}")
    if args.json:
        print(json.dumps([r.to_json() for r in reports], indent=1))
    return 0 if all(r.ok for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
