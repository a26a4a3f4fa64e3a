"""The shared-memory segment and ring of LBT-IPC / LBT-SMX (openum.transport.shm), in one process.

Crashes are simulated by ``_teardown()``: it lets go of the mapping, the file and its locks without the
clean-close steps, which is what the kernel does to a killed process (tests/integration/
test_shm_processes.py kills real ones)."""

from __future__ import annotations

import os
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from openum import TimedOutError
from openum.transport import shm
from openum.transport.shm import (
    DATA,
    EOS,
    FRAGMENT,
    RECEIVER_PACED,
    SHM_DIR,
    SOURCE_PACED,
    BatchFullError,
    Loss,
    Reader,
    ReceiverSlotsFullError,
    RecordTooLargeError,
    SegmentCorruptError,
    SegmentError,
    SegmentInUseError,
    SegmentNotFoundError,
    SegmentOrphanedError,
    Writer,
)

pytestmark = pytest.mark.skipif(not os.path.isdir(SHM_DIR), reason="needs /dev/shm")


@pytest.fixture
def names() -> Iterator[Callable[[], str]]:
    """Unique segment names for one test; whatever the test leaves in /dev/shm is removed after it."""
    prefix = f"openum-t{os.getpid()}-{uuid.uuid4().hex[:8]}"
    count = iter(range(1000))
    yield lambda: f"{prefix}-{next(count)}"
    for name in os.listdir(SHM_DIR):
        if name.startswith(prefix):
            os.unlink(os.path.join(SHM_DIR, name))


def leftovers(name: str) -> list[str]:
    return [n for n in os.listdir(SHM_DIR) if n.startswith(name)]


def u64(i: int, size: int = 8) -> bytes:
    return i.to_bytes(8, "little") * (size // 8) + bytes(size % 8)


def drain(reader: Reader) -> list[tuple[bytes, int]]:
    got: list[tuple[bytes, int]] = []
    while reader.poll(lambda view, kind: got.append((bytes(view), kind))):
        pass
    return got


# --- layout --------------------------------------------------------------------------------------------


def test_segment_name_follows_kind_transport_and_hex_session_id() -> None:
    assert shm.segment_name("ipc", 20001, 0x42792AC) == "openum-ipc-20001-42792ac"
    assert shm.segment_name("smx", 30001, 7, prefix="x") == "x-smx-30001-7"
    with pytest.raises(ValueError, match="not one of ipc, smx"):
        shm.segment_name("tcp", 1, 1)


def test_header_records_identity_and_owner(names: Callable[[], str]) -> None:
    name = names()
    with Writer(name, kind="smx", capacity=8192, pacing=RECEIVER_PACED, max_receivers=5, session_id=0xABC,
                transport_id=30001) as w:  # fmt: skip
        path = os.path.join(SHM_DIR, name)
        with open(path, "rb") as f:
            head = f.read(512)
        assert head[:8] == b"OPENUMSH"
        assert struct.unpack_from("<H", head, 8)[0] == shm.LAYOUT_VERSION
        ident = shm.parse_identity(head, os.path.getsize(path), path)
        assert (ident.kind, ident.pacing, ident.capacity) == ("smx", RECEIVER_PACED, 8192)
        assert (ident.session_id, ident.transport_id, ident.max_receivers) == (0xABC, 30001, 5)
        assert ident.owner_pid == os.getpid()
        assert ident.owner_start_time == shm.process_start_time(os.getpid())
        assert ident.ring_offset % 4096 == 0
        assert ident.file_size == ident.ring_offset + 8192 == os.path.getsize(path)
        assert ident.max_record == 8192 // 4 - 8 == w.max_record
        assert ident.index_entries == 0  # receiver-paced rings need no resynchronisation index
        src = Writer(names(), capacity=8192)
        assert src.identity().index_entries == 8192 // 1024 + 2
        assert src.max_record == 8192 // 8 - 8
        src.close()


def test_options_are_checked(names: Callable[[], str]) -> None:
    with pytest.raises(ValueError, match="capacity"):
        Writer(names(), capacity=1000 + 4)
    with pytest.raises(ValueError, match="max_record"):
        Writer(names(), capacity=8192, max_record=2000)
    with pytest.raises(ValueError, match="pacing"):
        Writer(names(), pacing="paced")
    with pytest.raises(ValueError, match="max_receivers"):
        Writer(names(), capacity=8192, max_receivers=65)
    with pytest.raises(ValueError, match="name"):
        Writer("../etc/passwd", capacity=8192)


def test_process_start_time_tells_processes_apart() -> None:
    assert shm.process_start_time(os.getpid()) is not None
    assert shm.process_start_time(0) is None
    assert shm.process_start_time(2**22 + 12345) is None  # above pid_max


# --- sending and receiving -------------------------------------------------------------------------------


@pytest.mark.parametrize("pacing", [SOURCE_PACED, RECEIVER_PACED])
def test_records_arrive_in_order_with_their_kinds(names: Callable[[], str], pacing: str) -> None:
    name = names()
    w = Writer(name, capacity=65536, pacing=pacing)
    r = Reader(name)
    assert drain(r) == []  # a receiver-paced reader is activated by the writer's next publish
    w.send(b"")
    w.send(b"one", FRAGMENT)
    w.send_many([b"two", b"three", bytearray(b"four")])
    w.send(memoryview(b"five"), 200)
    assert drain(r) == [
        (b"", DATA), (b"one", FRAGMENT), (b"two", DATA), (b"three", DATA), (b"four", DATA), (b"five", 200)
    ]  # fmt: skip
    w.send_many([b"a", b"b"])
    kinds: list[int] = []
    assert [bytes(v) for v in r.read(kinds=kinds)] == [b"a", b"b"]
    assert kinds == [DATA, DATA]
    with pytest.raises(ValueError, match="record kind"):
        w.send(b"x", EOS)
    w.close()
    r.close()


def test_clean_close_ends_the_session_and_leaves_nothing(names: Callable[[], str]) -> None:
    name = names()
    w = Writer(name, capacity=8192, pacing=RECEIVER_PACED)
    r = Reader(name, mode="pend")
    w.send(b"first")  # activates the reader (from the record it publishes)
    assert drain(r) == [(b"first", DATA)]
    w.send(b"last")
    w.close()
    assert leftovers(name) == []
    assert r.end_of_session is None
    assert drain(r) == [(b"last", DATA)]
    assert r.end_of_session == "closed"
    assert r.lag() == 0  # the end-of-session record was consumed
    assert r.poll(lambda v, k: None) == 0
    r.close()
    assert leftovers(name) == []


def test_wrap_around_keeps_order_across_many_laps(names: Callable[[], str]) -> None:
    name = names()
    w = Writer(name, capacity=1024, pacing=RECEIVER_PACED)
    r = Reader(name)
    w.send(b"")
    drain(r)
    sizes = [(i * 37) % 200 for i in range(3000)]  # 0..199 bytes: padding at many different offsets
    got: list[bytes] = []
    sent = 0
    while sent < len(sizes):
        while sent < len(sizes) and w.try_send(u64(sent, sizes[sent])):
            sent += 1
        r.poll(lambda v, k: got.append(bytes(v)))
    got += [p for p, _ in drain(r)]
    assert got == [u64(i, sizes[i]) for i in range(len(sizes))]
    assert w.position > 100 * 1024  # a hundred laps
    w.close()
    r.close()


@pytest.mark.parametrize("pacing", [SOURCE_PACED, RECEIVER_PACED])
def test_poll_and_read_take_at_most_limit_records(names: Callable[[], str], pacing: str) -> None:
    name = names()
    w = Writer(name, capacity=65536, pacing=pacing)
    r = Reader(name)
    w.send_many([u64(i) for i in range(10)])
    got: list[bytes] = []
    assert r.poll(lambda v, k: got.append(bytes(v)), limit=3) == 3
    assert len(r.read(limit=4)) == 4
    assert r.poll(lambda v, k: got.append(bytes(v)), limit=0) == 0
    assert r.poll(lambda v, k: got.append(bytes(v))) == 3
    assert got == [u64(i) for i in (0, 1, 2, 7, 8, 9)]
    w.close()
    r.close()


def test_source_paced_copies_are_cut_between_records(names: Callable[[], str]) -> None:
    name = names()
    w = Writer(name, capacity=65536)
    r = Reader(name, max_copy=4096)  # copies of 4 KiB at most, or one record when it is larger
    sizes = [3000, 5000, 24, 3000, 7000, 8, 4000]
    w.send_many([u64(i, size) for i, size in enumerate(sizes)])
    counts = []
    got: list[bytes] = []
    while n := r.poll(lambda v, k: got.append(bytes(v))):
        counts.append(n)
    assert got == [u64(i, size) for i, size in enumerate(sizes)]
    assert len(counts) > 3  # it took several copies
    w.close()
    r.close()


def test_acquire_complete_is_zero_copy_and_batched(names: Callable[[], str]) -> None:
    name = names()
    w = Writer(name, kind="smx", capacity=8192, pacing=RECEIVER_PACED)
    r = Reader(name)
    w.send(b"")
    drain(r)
    views = [w.acquire(100) for _ in range(3)]
    for i, view in enumerate(views):
        view[:] = bytes([i]) * 100
    assert r.poll(lambda v, k: None) == 0  # nothing visible before complete()
    seen: list[tuple[bytes, bool]] = []
    assert w.complete() == 3
    r.poll(lambda v, k: seen.append((bytes(v), v.obj is r._mm)))
    assert seen == [(bytes([i]) * 100, True) for i in range(3)]  # views into the mapping itself
    w.acquire(10)[:] = b"0123456789"
    assert w.cancel() == 1
    nxt = w.complete_and_acquire(4)
    nxt[:] = b"next"
    w.complete()
    assert drain(r) == [(b"next", DATA)]
    batch = [w.acquire(1300) for _ in range(3)]  # 3 x 1308 of a 4096-byte batch bound
    with pytest.raises(BatchFullError, match="complete"):
        w.acquire(1300)
    assert len(batch) == 3
    w.complete()
    with pytest.raises(RecordTooLargeError):
        w.acquire(w.max_record + 1)
    assert w.try_acquire(w.max_record) is not None
    w.cancel()
    w.close()
    r.close()


def test_source_paced_views_are_private_copies(names: Callable[[], str]) -> None:
    name = names()
    w = Writer(name, capacity=4096)
    r = Reader(name)
    w.send(b"keep")
    views = r.read()
    for i in range(200):  # laps the ring many times
        w.send(u64(i, 64))
    assert bytes(views[0]) == b"keep"
    w.close()
    r.close()


def test_a_reader_joining_a_source_paced_ring_starts_at_the_write_position(names: Callable[[], str]) -> None:
    name = names()
    w = Writer(name, capacity=4096)
    for i in range(300):  # several laps before the reader comes
        w.send(u64(i, 24))
    r = Reader(name)
    assert drain(r) == []
    w.send(b"after")
    assert drain(r) == [(b"after", DATA)]
    for i in range(1000):  # overrun it: its loss accounting must start from its join point
        w.send(u64(i, 24))
    got = drain(r)
    (loss,) = r.losses
    assert loss.first_seq == 301
    assert loss.count + len(got) == 1000
    assert [int.from_bytes(p[:8], "little") for p, _ in got] == list(range(loss.count, 1000))
    w.close()
    r.close()


# --- source-paced overrun -------------------------------------------------------------------------------


def test_overrun_reports_exactly_the_records_lost(names: Callable[[], str]) -> None:
    name = names()
    w = Writer(name, capacity=4096)
    losses: list[Loss] = []
    r = Reader(name, on_loss=losses.append)
    w.send_many([u64(i, 40) for i in range(1000)])  # 48 bytes each: ~12 laps of a 4096-byte ring
    got = [int.from_bytes(p[:8], "little") for p, _ in drain(r)]
    (loss,) = losses
    assert loss.first_seq == 0 and loss.first_position == 0
    assert got == list(range(loss.count, 1000))  # every record after the loss, nothing twice
    assert loss.end_position > 0 and loss.end_position % 8 == 0
    assert 1000 - loss.count <= 4096 // 48  # what survived fits the ring
    # A second overrun: its loss starts right after what was delivered.
    w.send_many([u64(i, 40) for i in range(1000, 3000)])
    got = [int.from_bytes(p[:8], "little") for p, _ in drain(r)]
    assert losses[1].first_seq == 1000
    assert got == list(range(1000 + losses[1].count, 3000))
    stats = r.statistics()
    assert stats.losses == 2 and stats.lost_records == loss.count + losses[1].count
    assert stats.records == 3000 - stats.lost_records
    (info,) = w.receivers()
    assert info.lost == stats.lost_records
    w.close()
    r.close()


def test_overrun_counts_records_not_padding(names: Callable[[], str]) -> None:
    name = names()
    w = Writer(name, capacity=1024)
    r = Reader(name)
    sizes = [((i * 53) % 120) for i in range(500)]  # uneven sizes: padding records at the ring's end
    for i, size in enumerate(sizes):
        w.send(u64(i, max(size, 8)))
    got = [int.from_bytes(p[:8], "little") for p, _ in drain(r)]
    (loss,) = r.losses
    assert got == list(range(loss.count, 500))
    w.close()
    r.close()


# --- receiver-paced ------------------------------------------------------------------------------------


def test_receiver_paced_writer_would_block_then_resumes_without_loss(names: Callable[[], str]) -> None:
    name = names()
    w = Writer(name, capacity=4096, pacing=RECEIVER_PACED, spin=10)
    r = Reader(name)
    w.send(u64(0, 64))  # activates the reader
    sent = 1
    while w.try_send(u64(sent, 64)):
        sent += 1
    assert sent >= 4096 // 72 - 2
    with pytest.raises(TimedOutError, match="not keeping up"):
        w.send(b"x" * 64, timeout=0.05)
    assert w.try_acquire(64) is None
    assert not w.has_room(64)
    got = [int.from_bytes(p[:8], "little") for p, _ in drain(r)]
    assert w.has_room(64)
    assert w.try_send(u64(sent, 64))
    got += [int.from_bytes(p[:8], "little") for p, _ in drain(r)]
    assert got == list(range(sent + 1))
    stats = w.statistics()
    assert stats.would_block >= 2 and stats.blocked >= 1
    w.close()
    r.close()


def test_receiver_paced_read_holds_records_until_released(names: Callable[[], str]) -> None:
    name = names()
    w = Writer(name, capacity=4096, pacing=RECEIVER_PACED)
    r = Reader(name)
    w.send(b"")
    drain(r)
    while w.try_send(b"x" * 64):
        pass
    views = r.read()
    assert views and all(v.obj is r._mm for v in views)
    assert not w.try_send(b"x" * 64)  # the views are still reserved
    r.release()
    assert w.try_send(b"x" * 64)
    w.close()
    r.close()


@pytest.mark.parametrize("wait", ["pend", "spin"])
def test_blocked_writer_continues_when_the_reader_catches_up(names: Callable[[], str], wait: str) -> None:
    name = names()
    w = Writer(name, capacity=4096, pacing=RECEIVER_PACED, wait=wait, spin=50)
    r = Reader(name)
    w.send(b"")
    drain(r)
    while w.try_send(u64(1, 64)):
        pass
    done = threading.Event()
    errors: list[BaseException] = []

    def blocked_send() -> None:
        try:
            w.send(u64(2, 64), timeout=20)
            done.set()
        except BaseException as err:
            errors.append(err)

    t = threading.Thread(target=blocked_send)
    t.start()
    got: list[bytes] = []
    while not done.is_set() and not errors:
        r.poll(lambda v, k: got.append(bytes(v)))
    t.join(20)
    assert not errors
    got += [p for p, _ in drain(r)]
    assert got[-1] == u64(2, 64) and got.count(u64(2, 64)) == 1
    w.close()
    r.close()


def test_a_dead_reader_is_evicted_and_no_longer_paces_the_writer(names: Callable[[], str]) -> None:
    name = names()
    w = Writer(name, capacity=4096, pacing=RECEIVER_PACED, liveness_interval=0.01, spin=10)
    live = Reader(name)
    dead = Reader(name)
    w.send(b"")
    drain(live)
    while w.try_send(b"x" * 64):
        drain(live)
    assert not w.try_send(b"x" * 64)  # `dead` has read nothing: the ring is full for it
    assert [i.alive for i in w.receivers()] == [True, True]
    dead._teardown()  # as if killed: its locks go, its slot stays marked in use
    assert [i.alive for i in w.receivers()] == [True, False]
    w.send(b"y" * 64, timeout=20)  # the blocked writer finds the dead reader and evicts it
    assert [i.slot for i in w.receivers()] == [live.slot]
    assert w.statistics().evictions == 1
    assert w.evict_dead() == []
    w.close()
    live.close()


def test_evict_dead_frees_the_slot_for_a_new_reader(names: Callable[[], str]) -> None:
    name = names()
    w = Writer(name, capacity=4096, max_receivers=1)
    first = Reader(name)
    with pytest.raises(ReceiverSlotsFullError):
        Reader(name)
    first._teardown()
    assert w.evict_dead() == [0]
    second = Reader(name)  # a reader joining also reuses a dead reader's slot by itself
    assert second.slot == 0
    second._teardown()
    third = Reader(name)
    assert third.slot == 0
    third.close()
    w.close()


def test_writer_never_waits_for_the_slot_table_lock(names: Callable[[], str]) -> None:
    name = names()
    w = Writer(name, capacity=8192, pacing=RECEIVER_PACED)
    r = Reader(name)  # joining: the writer activates it when it can take the table lock
    fd = os.open(os.path.join(SHM_DIR, name), os.O_RDWR)
    assert shm._setlk(fd, 1, False)  # a process stopped while holding the slot table
    w.send(b"a")  # does not wait
    assert drain(r) == []
    assert w.evict_dead() == []
    os.close(fd)
    w.send(b"b")
    assert drain(r) == [(b"b", DATA)]
    w.close()
    r.close()


# --- pending readers -------------------------------------------------------------------------------------


@pytest.mark.parametrize("pacing", [SOURCE_PACED, RECEIVER_PACED])
def test_pending_reader_sleeps_and_is_woken_by_the_writer(names: Callable[[], str], pacing: str) -> None:
    name = names()
    w = Writer(name, capacity=8192, pacing=pacing)
    r = Reader(name, mode="pend", linger=0, liveness_interval=60)  # one sleep, no liveness wake-ups
    w.send(b"")  # the writer takes the reader into account (activation, acknowledgement)
    drain(r)
    asleep = threading.Event()
    woke: list[bool] = []

    def sleeper() -> None:
        asleep.set()
        woke.append(r.wait(timeout=20))

    t = threading.Thread(target=sleeper)
    t.start()
    assert asleep.wait(10)
    # Wait until it really sleeps (its counter is odd), then publish: the writer must wake it.
    deadline = time.monotonic() + 20
    while not r._h16[128 + r.slot] & 1:
        assert time.monotonic() < deadline, "the reader never went to sleep"
    w.send(b"wake")
    t.join(20)
    assert woke == [True]
    assert drain(r) == [(b"wake", DATA)]
    assert r.statistics().sleeps >= 1
    assert w.statistics().wakeups >= 1
    (info,) = w.receivers()
    assert info.mode == "pend"
    w.close()
    r.close()


def test_arm_refuses_to_sleep_when_records_are_waiting(names: Callable[[], str]) -> None:
    name = names()
    w = Writer(name, capacity=8192)
    r = Reader(name, mode="pend")
    busy = Reader(name)
    assert r.arm() > 0  # nothing published
    r.disarm()
    w.send(b"x")
    assert r.arm() == 0.0
    assert r.fileno() >= 0
    with pytest.raises(ValueError, match="busy_wait"):
        busy.fileno()
    assert busy.wait(timeout=20) is True  # the record is there
    w.close()
    r.close()
    busy.close()


def test_wait_times_out_without_records(names: Callable[[], str]) -> None:
    name = names()
    w = Writer(name, capacity=8192)
    for mode in ("pend", "busy_wait"):
        r = Reader(name, mode=mode)
        assert r.wait(timeout=0.02) is False
        r.close()
    w.close()


# --- crashes and corruption ------------------------------------------------------------------------------


def test_reader_reports_end_of_session_when_the_writer_dies(names: Callable[[], str]) -> None:
    name = names()
    w = Writer(name, capacity=8192, pacing=RECEIVER_PACED)
    r = Reader(name, mode="pend", liveness_interval=0.01)
    w.send(b"")
    w.send(b"before death")
    w._teardown()  # killed: no end-of-session record, the file stays
    assert r.wait(timeout=20)
    got = drain(r)
    assert got[-1] == (b"before death", DATA)
    assert r.wait(timeout=20)
    assert r.check_writer() is False
    r.poll(lambda v, k: None)
    assert r.end_of_session == "writer died"
    with pytest.raises(SegmentOrphanedError, match="is gone"):
        Reader(name)
    r.close()


def test_creating_over_a_dead_owners_segment_reclaims_it(names: Callable[[], str]) -> None:
    name = names()
    old = Writer(name, capacity=8192)
    with pytest.raises(SegmentInUseError, match="live process"):
        Writer(name, capacity=8192)
    old._teardown()
    new = Writer(name, capacity=16384)
    assert new.reclaimed_from_pid == os.getpid()
    assert new.identity().capacity == 16384
    new.close()
    assert leftovers(name) == []


def test_missing_segment(names: Callable[[], str]) -> None:
    with pytest.raises(SegmentNotFoundError):
        Reader(names())


def test_reader_checks_kind_and_session(names: Callable[[], str]) -> None:
    name = names()
    w = Writer(name, kind="smx", capacity=8192, pacing=RECEIVER_PACED, session_id=5)
    with pytest.raises(SegmentError, match="is smx, not ipc"):
        Reader(name, kind="ipc")
    with pytest.raises(SegmentError, match="session id 5, not 6"):
        Reader(name, session_id=6)
    Reader(name, kind="smx", session_id=5).close()
    w.close()


def _corrupt(path: str, offset: int, data: bytes) -> None:
    fd = os.open(path, os.O_RDWR)
    try:
        os.pwrite(fd, data, offset)
    finally:
        os.close(fd)


@pytest.mark.parametrize(
    ("offset", "data", "field"),
    [
        (0, b"NOTOURS!", "magic"),
        (8, struct.pack("<H", 99), "layout version"),
        (10, b"\x09", "kind"),
        (11, b"\x07", "pacing"),
        (16, struct.pack("<Q", 8196), "capacity"),
        (48, struct.pack("<I", 0), "max receivers"),
        (52, struct.pack("<I", 10**6), "max record"),
        (24, struct.pack("<Q", 4096 * 9), "layout"),
        (96, struct.pack("<Q", 1), "slot table"),
        (144, struct.pack("<Q", 7), "state"),
        (128, struct.pack("<Q", 13), "write position"),
        (136, struct.pack("<Q", 1 << 40), "reserve position"),
    ],
)
def test_corrupt_header_raises_an_error_naming_the_field(
    names: Callable[[], str], offset: int, data: bytes, field: str
) -> None:
    name = names()
    w = Writer(name, capacity=8192)
    _corrupt(os.path.join(SHM_DIR, name), offset, data)
    with pytest.raises(SegmentCorruptError) as info:
        Reader(name)
    assert info.value.field.startswith(field)
    assert name in str(info.value)
    w._teardown()


def test_truncated_segment_is_refused(names: Callable[[], str]) -> None:
    name = names()
    w = Writer(name, capacity=8192)
    path = os.path.join(SHM_DIR, name)
    os.truncate(path, 8192)
    with pytest.raises(SegmentCorruptError, match="file size"):
        Reader(name)
    os.truncate(path, 100)
    with pytest.raises(SegmentCorruptError, match="file size"):
        Reader(name)
    w._teardown()


@pytest.mark.parametrize("pacing", [SOURCE_PACED, RECEIVER_PACED])
def test_corrupt_records_raise_instead_of_crashing(names: Callable[[], str], pacing: str) -> None:
    name = names()
    w = Writer(name, capacity=8192, pacing=pacing)
    r = Reader(name)
    w.send(b"")
    drain(r)
    ring = w.identity().ring_offset
    start = r.position
    w.send(b"a" * 16)
    _corrupt(os.path.join(SHM_DIR, name), ring + start, struct.pack("<Q", 5000))  # length past the end
    with pytest.raises(SegmentCorruptError, match="record length"):
        r.poll(lambda v, k: None)
    _corrupt(os.path.join(SHM_DIR, name), ring + start, struct.pack("<Q", 16 | (0x1FF << 32)))
    with pytest.raises(SegmentCorruptError, match="record kind"):
        r.read()
    _corrupt(os.path.join(SHM_DIR, name), ring + start, struct.pack("<Q", 8))  # padding not at the end
    with pytest.raises(SegmentCorruptError, match="padding"):
        r.poll(lambda v, k: None)
    w.close()
    r.close()


def test_random_ring_bytes_never_crash_a_reader(names: Callable[[], str]) -> None:
    import random

    rng = random.Random(26)
    for pacing in (SOURCE_PACED, RECEIVER_PACED):
        name = names()
        w = Writer(name, capacity=4096, pacing=pacing)
        r = Reader(name)
        w.send(b"")
        drain(r)
        path = os.path.join(SHM_DIR, name)
        ring = w.identity().ring_offset
        for _ in range(200):
            w.try_send_many([bytes(rng.randrange(60)) for _ in range(rng.randrange(1, 20))])
            _corrupt(path, ring + 8 * rng.randrange(512), rng.randbytes(rng.choice((1, 8, 16))))
            try:
                r.poll(lambda v, k: None)
            except SegmentCorruptError:
                pass
        w.close()
        r.close()


def test_index_entries_survive_a_writer_that_cancels(names: Callable[[], str]) -> None:
    name = names()
    w = Writer(name, capacity=4096)
    r = Reader(name)
    for i in range(200):
        for _ in range(3):
            w.acquire(40)[:] = bytes(40)
        w.cancel()
        w.send(u64(i, 40))
    got = [int.from_bytes(p[:8], "little") for p, _ in drain(r)]
    (loss,) = r.losses
    assert got == list(range(loss.count, 200))
    w.close()
    assert drain(r) == []
    assert r.end_of_session == "closed" and r.lag() == 0
    assert r.statistics().records + r.statistics().lost_records == 200
    r.close()


def test_mapping_stays_valid_while_views_are_kept(names: Callable[[], str]) -> None:
    name = names()
    w = Writer(name, capacity=8192, pacing=RECEIVER_PACED)
    r = Reader(name)
    w.send(b"")
    drain(r)
    w.send(b"kept")
    views = r.read()
    r.close()  # the mapping cannot be unmapped under a live view: it goes with the view
    assert bytes(views[0]) == b"kept"
    del views
    w.close()
    assert leftovers(name) == []
