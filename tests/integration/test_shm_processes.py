"""The shared-memory ring between real processes: order, loss accounting, kill -9 on either side, orphans.

Run as a script for throughput and round-trip numbers (nothing here asserts a speed)::

    OPENUM_PURE_PYTHON=1 python -m tests.integration.test_shm_processes [--count N] [--runs R]
"""

from __future__ import annotations

import argparse
import os
import queue
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from openum.transport import shm_resources
from openum.transport.shm import SHM_DIR, Loss, Reader, Writer
from tests.helpers import wait_until

pytestmark = pytest.mark.skipif(not os.path.isdir(SHM_DIR), reason="needs /dev/shm")

TIMEOUT = 20.0


class Child:
    """A Python child process running ``code``; its stdout lines arrive on a queue."""

    def __init__(self, code: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put("<eof>")

    def line(self, timeout: float = TIMEOUT) -> str:
        try:
            got = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"child said nothing within {timeout} s") from None
        if got == "<eof>":
            assert self.proc.stderr is not None
            raise AssertionError(f"child ended: {self.proc.wait(TIMEOUT)}: {self.proc.stderr.read()[-2000:]}")
        return got

    def say(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        assert self.proc.wait(TIMEOUT) == -signal.SIGKILL

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(TIMEOUT)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def prefix() -> Iterator[str]:
    """A name prefix of this test only; whatever the test leaves in /dev/shm is removed after it."""
    value = f"openum-p{os.getpid()}-{uuid.uuid4().hex[:8]}"
    yield value
    for name in os.listdir(SHM_DIR):
        if name.startswith(value):
            os.unlink(os.path.join(SHM_DIR, name))


def writer_code(name: str, count: int, *, pacing: str, capacity: int, batch: int, sizes: int = 0) -> str:
    """A child that creates a writer, says ``ready``, waits for ``go``, sends ``count`` records numbered
    from 0 (``count`` < 0: forever), batch by batch, then closes the segment and says ``done``.  Record
    ``i`` is the 8-byte number ``i`` repeated (``sizes``: 1 + i % sizes times, else once)."""
    return f"""
import sys
from openum.transport.shm import Writer
w = Writer({name!r}, capacity={capacity}, pacing={pacing!r})
print("ready", flush=True)
sys.stdin.readline()
count, batch, sizes = {count}, {batch}, {sizes}
i = 0
while count < 0 or i < count:
    n = batch if count < 0 else min(batch, count - i)
    w.send_many([(j.to_bytes(8, "little") * (1 + j % sizes if sizes else 1)) for j in range(i, i + n)])
    i += n
    if i == n:
        print("sent", flush=True)
w.close()
print("done", flush=True)
"""


class Verifier:
    """Checks records numbered from 0 arrive in order, each whole, gaps matching the reported losses."""

    def __init__(self) -> None:
        self.next = 0
        self.records = 0
        self.lost = 0
        self.bad: list[str] = []

    def on_loss(self, loss: Loss) -> None:
        if loss.first_seq != self.next:
            self.bad.append(f"loss {loss} while expecting record {self.next}")
        self.next += loss.count
        self.lost += loss.count

    def on_record(self, view: memoryview, kind: int) -> None:
        value = int.from_bytes(view[:8], "little")
        if value != self.next or len(view) % 8 or bytes(view) != bytes(view[:8]) * (len(view) // 8):
            self.bad.append(f"record {value} ({len(view)} bytes) while expecting {self.next}")
        self.next = value + 1
        self.records += 1


def read_until_end(reader: Reader, verifier: Verifier, deadline: float) -> None:
    while reader.end_of_session is None:
        assert time.monotonic() < deadline, f"no end of session; {verifier.records} records"
        if not reader.poll(verifier.on_record):
            reader.wait(timeout=1.0)
        assert not verifier.bad, verifier.bad[:5]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["pend", "busy_wait"])
def test_a_million_records_arrive_in_order(prefix: str, mode: str) -> None:
    name = f"{prefix}-ipc-1-1"
    child = Child(writer_code(name, 1_000_000, pacing="receiver_paced", capacity=1 << 20, batch=500))
    try:
        assert child.line() == "ready"
        reader = Reader(name, mode=mode)
        child.say("go")
        verifier = Verifier()
        read_until_end(reader, verifier, time.monotonic() + 120)
        assert reader.end_of_session == "closed"
        assert (verifier.records, verifier.lost, verifier.next) == (1_000_000, 0, 1_000_000)
        assert child.line() in ("sent", "done")
        reader.close()
    finally:
        child.close()
    assert shm_resources.list_segments(prefix=prefix) == []


def test_source_paced_overruns_lose_whole_records_and_say_how_many(prefix: str) -> None:
    name = f"{prefix}-ipc-1-2"
    total = 200_000
    child = Child(writer_code(name, total, pacing="source_paced", capacity=65536, batch=64, sizes=12))
    try:
        assert child.line() == "ready"
        verifier = Verifier()
        reader = Reader(name, mode="pend", on_loss=verifier.on_loss)
        child.say("go")
        while verifier.next < 2000:  # read along, slowly: overruns may catch the reader mid-copy
            reader.poll(verifier.on_record, limit=50)
            assert not verifier.bad, verifier.bad[:5]
            if not reader.available():
                reader.wait(timeout=TIMEOUT)
        assert child.line() == "sent"
        assert child.line() == "done"  # then stop reading while the writer laps the ring many times
        read_until_end(reader, verifier, time.monotonic() + 60)
        assert reader.end_of_session == "closed"
        assert verifier.lost > 0
        assert verifier.records + verifier.lost == verifier.next == total
        stats = reader.statistics()
        assert stats.lost_records == verifier.lost and stats.records == verifier.records
        reader.close()
    finally:
        child.close()


def test_writer_killed_mid_stream_ends_the_session_and_leaves_an_orphan(prefix: str) -> None:
    name = f"{prefix}-ipc-20001-5"
    child = Child(writer_code(name, -1, pacing="source_paced", capacity=1 << 18, batch=100))
    try:
        assert child.line() == "ready"
        verifier = Verifier()
        reader = Reader(name, mode="pend", liveness_interval=0.05, on_loss=verifier.on_loss)
        child.say("go")
        assert child.line() == "sent"
        while verifier.records < 10_000:
            if not reader.poll(verifier.on_record):
                reader.wait(timeout=TIMEOUT)
        pid = child.proc.pid
        child.kill()
        read_until_end(reader, verifier, time.monotonic() + 60)
        assert reader.end_of_session == "writer died"
        assert not verifier.bad
        reader.close()
        (seg,) = shm_resources.list_segments(prefix=prefix)
        assert (seg.name, seg.owner_pid, seg.orphaned, seg.state) == (name, pid, True, "open")
        assert [s.name for s in shm_resources.reclaim(prefix=prefix)] == [name]
        assert shm_resources.list_segments(prefix=prefix) == []
        again = Writer(name, capacity=1 << 18)  # a second run starts clean
        assert again.reclaimed_from_pid is None
        again.close()
    finally:
        child.close()
    assert shm_resources.list_segments(prefix=prefix) == []


def test_reader_killed_mid_stream_frees_its_slot_and_the_writer_goes_on(prefix: str) -> None:
    name = f"{prefix}-smx-30001-6"
    writer = Writer(name, kind="smx", capacity=8192, pacing="receiver_paced", liveness_interval=0.05)
    code = f"""
import sys
from openum.transport.shm import Reader
r = Reader({name!r})
print("joined", flush=True)
got = 0
while got < 200:
    got += r.poll(lambda v, k: None)
print("stalled", flush=True)
sys.stdin.readline()
"""
    child = Child(code)
    sent = 0
    errors: list[BaseException] = []
    try:
        assert child.line() == "joined"

        def keep_sending() -> None:
            nonlocal sent
            try:
                while sent < 2000:
                    writer.send(sent.to_bytes(8, "little") * 8, timeout=60)
                    sent += 1
            except BaseException as err:
                errors.append(err)

        sender = threading.Thread(target=keep_sending)
        sender.start()
        assert child.line() == "stalled"
        assert wait_until(lambda: writer.statistics().blocked > 0 or bool(errors))  # held up by the reader
        assert not errors
        assert sent < 2000
        (info,) = writer.receivers()
        assert info.pid == child.proc.pid and info.alive
        child.kill()
        sender.join(60)
        assert not sender.is_alive() and not errors
        assert sent == 2000
        assert writer.receivers() == []
        assert writer.statistics().evictions == 1
    finally:
        child.close()
        writer.close()
    assert shm_resources.list_segments(prefix=prefix) == []


# --- benchmark (python -m tests.integration.test_shm_processes) -------------------------------------------


def _pin(cpu: int) -> None:
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {cpu % (os.cpu_count() or 1)})


def throughput(count: int, style: str, pacing: str = "receiver_paced", size: int = 64) -> tuple[float, int]:
    """Records per second from a writer (this process) to a reader (a child), and the records received.

    ``style``: ``batch`` (send_many of 256), ``one`` (send), ``acquire`` (acquire x 64, complete) or
    ``acquire1`` (acquire, complete)."""
    name = f"openum-bench-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    count -= count % 256
    writer = Writer(name, capacity=1 << 22, pacing=pacing, wait="spin")
    code = f"""
import os, time
if hasattr(os, "sched_setaffinity") and os.cpu_count() > 1:
    os.sched_setaffinity(0, {{1}})
from openum.transport.shm import Reader
r = Reader({name!r})
print("ready", flush=True)
n = 0
first = last = 0.0
noop = lambda v, k: None
while r.end_of_session is None:
    got = r.poll(noop)
    if got:
        last = time.perf_counter()
        if not n:
            first = last
        n += got
print(n, (n - 1) / (last - first) if n > 1 and last > first else 0.0, flush=True)
r.close()
"""
    child = Child(code)
    try:
        assert child.line() == "ready"
        _pin(0)
        msg = b"x" * size
        if style == "batch":
            items = [msg] * 256
            for _ in range(count // 256):
                writer.send_many(items)
        elif style == "one":
            send = writer.send
            for _ in range(count):
                send(msg)
        else:
            per = 64 if style == "acquire" else 1
            acquire, complete = writer.acquire, writer.complete
            for _ in range(count // per):
                for _ in range(per):
                    acquire(size)[:] = msg
                complete()
        writer.close()
        received, rate = child.line(120).split()
        return float(rate), int(received)
    finally:
        child.close()
        if writer.closed is False:
            writer.close()


def round_trips(count: int, mode: str = "busy_wait") -> list[float]:
    """Round-trip times (microseconds) of 64-byte ping/pong over two receiver-paced segments, ping in
    this process on CPU 0, pong in a child on CPU 1."""
    tag = f"openum-bench-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    ping = Writer(tag + "-ping", kind="smx", capacity=1 << 16, pacing="receiver_paced", wait="spin")
    code = f"""
import os
if hasattr(os, "sched_setaffinity") and os.cpu_count() > 1:
    os.sched_setaffinity(0, {{1}})
from openum.transport.shm import Reader, Writer
pong = Writer({tag + "-pong"!r}, kind="smx", capacity=1 << 16, pacing="receiver_paced", wait="spin")
r = Reader({tag + "-ping"!r}, mode={mode!r})
print("ready", flush=True)
send = pong.send
while r.end_of_session is None:
    if not r.poll(lambda v, k: send(v)):
        r.wait(1.0)
pong.close()
r.close()
"""
    child = Child(code)
    try:
        assert child.line() == "ready"
        back = Reader(tag + "-pong", mode=mode)
        _pin(0)
        msg = b"p" * 64
        times: list[float] = []
        got: list[int] = []
        poll, wait, now = back.poll, back.wait, time.perf_counter_ns
        noop = lambda v, k: got.append(1)  # noqa: E731
        # The first ping activates the child's reader, which joined before it: it gets that ping, and this
        # process's reader, which joined before the first pong, gets the pong.
        ping.send(msg)
        deadline = time.monotonic() + TIMEOUT
        while not poll(noop):
            assert time.monotonic() < deadline, "no pong"
            wait(0.01)
        for _ in range(count):
            got.clear()
            start = now()
            ping.send(msg)
            while not poll(noop):
                if mode == "pend":
                    wait(1.0)
            times.append((now() - start) / 1000)
        ping.close()
        back.close()
        return times[len(times) // 10 :]  # warm-up discarded
    finally:
        child.close()
        if not ping.closed:
            ping.close()


def test_benchmark_helpers_deliver_every_record() -> None:
    """The benchmark's own plumbing works (its speed is only printed by the script, never asserted)."""
    rate, received = throughput(20_000, "batch")
    assert received == 20_000 - 20_000 % 256 and rate > 0
    rate, received = throughput(2_000, "acquire")
    assert received == 2_000 - 2_000 % 256
    times = round_trips(200)
    assert len(times) == 180 and min(times) > 0


def main() -> None:
    parser = argparse.ArgumentParser(description="openum shared-memory ring: throughput and round trips")
    parser.add_argument("--count", type=int, default=2_000_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    pure = os.environ.get("OPENUM_PURE_PYTHON")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, OPENUM_PURE_PYTHON={pure}")
    for style in ("batch", "one", "acquire", "acquire1"):
        rates = [throughput(args.count, style)[0] for _ in range(args.runs)]
        print(f"64 B {style:9s} receiver-paced: median {statistics.median(rates) / 1e6:.2f} M msgs/s  "
              f"(runs: {', '.join(f'{r / 1e6:.2f}' for r in rates)})")  # fmt: skip
    for mode in ("busy_wait", "pend"):
        times = sorted(round_trips(20_000 if mode == "busy_wait" else 5_000, mode))
        p50, p99 = times[len(times) // 2], times[int(len(times) * 0.99)]
        print(f"RTT 64 B {mode:9s}: p50 {p50:.1f} us, p99 {p99:.1f} us")


if __name__ == "__main__":
    main()
