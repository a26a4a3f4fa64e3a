"""Shared-memory segments and rings of LBT-IPC and LBT-SMX (UM Concepts Guide, sections 6.4 and 6.5).

One transport session is one file in ``/dev/shm`` (``openum-ipc-<transport id>-<session id hex>``,
``openum-smx-...``), mapped by its source (the :class:`Writer`) and by every receiving context (a
:class:`Reader` each).  The file holds a header (identity, the write position, a table of receiver slots)
and a ring of variable-length records; ``docs/shared-memory-layout.md`` documents every byte.

**The ring.**  One writer, many readers, each reader with its own read position.  A record is an 8-byte
header word (payload length and kind) and its payload, padded to 8 bytes; a record never
wraps: a padding record fills the end of the ring.  The writer publishes by storing the write position
after the records (``send``, ``send_many``, or ``acquire`` ... ``complete``, the Pythonic
``lbm_src_buff_acquire`` / ``lbm_src_buffs_complete``), so many records can be published at once; a
reader takes everything published in one call (:meth:`Reader.poll` with a callback, :meth:`Reader.read`
returning memoryviews).

**Pacing** (section 6.4, ``transport_lbtipc_behavior``).  *Source-paced*: the writer never waits; a
reader that fell behind by more than the ring detects it from the positions, reports exactly which
records it lost (:class:`Loss`: the count, their sequence numbers and position range) and resumes at the
oldest record still in the ring.  Readers copy what they take before checking it was not overwritten
meanwhile (UM's "integrity check on read"), so their views stay valid.  *Receiver-paced* (LBT-SMX
always): the writer waits, spinning then pending, or refuses (``try_send``, ``try_acquire``), until the
slowest live reader has room; readers get zero-copy views into the ring, valid during the call.

**Memory ordering.**  Stores become visible in program order on x86-64 (TSO) and CPython does not
reorder the stores of separate bytecodes, so a reader that sees the write position sees the records
before it.  Waking sleeping readers needs a store-then-load order on both sides, which TSO does not give:
a locked instruction (taking and releasing an uncontended lock) serves as the full fence.  Other
architectures (ARM, POWER) would need release/acquire barriers around the position stores and loads,
which Python cannot express; the module refuses to run there.

**Crash safety.**  Each process holds open-file-description locks (``F_OFD_SETLK``) on bytes of the
file: the writer on the owner byte, each reader on its slot byte.  The kernel releases them when the
process dies, however it dies, so a live peer is one whose lock is held and whose pid still has the
start time recorded in the header (``/proc/<pid>/stat`` field 22).  Readers find a dead writer and end
the session; the writer frees the slots of dead readers so they never hold a receiver-paced source up;
creating a segment over one whose owner died reclaims it; a clean close unlinks the file.
:mod:`openum.transport.shm_resources` lists and deletes what crashed processes left.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import platform
import re
import secrets
import select
import socket
import struct
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from openum._errors import (
    LBM_EINVAL,
    LBM_ENOMEM,
    ClosedError,
    ConfigError,
    NotSupportedError,
    OpenUMError,
    TimedOutError,
)

__all__ = [
    "BUSY_WAIT",
    "DATA",
    "DEFAULT_PREFIX",
    "EOS",
    "FRAGMENT",
    "KIND_IPC",
    "KIND_SMX",
    "LAYOUT_VERSION",
    "MAX_RECEIVERS",
    "PAD",
    "PEND",
    "RECEIVER_PACED",
    "SHM_DIR",
    "SOURCE_PACED",
    "SPIN",
    "BatchFullError",
    "Loss",
    "Reader",
    "ReaderStatistics",
    "ReceiverInfo",
    "ReceiverSlotsFullError",
    "RecordTooLargeError",
    "SegmentCorruptError",
    "SegmentError",
    "SegmentIdentity",
    "SegmentInUseError",
    "SegmentNotFoundError",
    "SegmentOrphanedError",
    "Writer",
    "WriterStatistics",
    "holder_alive",
    "parse_identity",
    "process_start_time",
    "receivers_of",
    "segment_name",
]

# --- names and choices -------------------------------------------------------------------------------

#: Where segments live (a tmpfs on Linux).
SHM_DIR: Final = "/dev/shm"
#: The first part of every segment name.
DEFAULT_PREFIX: Final = "openum"
KIND_IPC: Final = "ipc"
KIND_SMX: Final = "smx"
#: ``transport_lbtipc_behavior`` values.
SOURCE_PACED: Final = "source_paced"
RECEIVER_PACED: Final = "receiver_paced"
#: Reader behaviours (``transport_lbtipc_receiver_thread_behavior``) and writer waits.
PEND: Final = "pend"
BUSY_WAIT: Final = "busy_wait"
SPIN: Final = "spin"

#: Record kinds.  ``PAD`` and ``EOS`` belong to the ring; any other kind from 1 to 255 is delivered.
PAD: Final = 0
DATA: Final = 1
FRAGMENT: Final = 2
EOS: Final = 3

LAYOUT_VERSION: Final = 1
MAGIC: Final = b"OPENUMSH"
#: Receiver slots per segment, at most (the sleep counters fill two cache lines).
MAX_RECEIVERS: Final = 64
MIN_CAPACITY: Final = 1024
MAX_CAPACITY: Final = 1 << 40

_KIND_CODES: Final = {KIND_IPC: 1, KIND_SMX: 2}
_KIND_NAMES: Final = {1: KIND_IPC, 2: KIND_SMX}
_PACING_CODES: Final = {SOURCE_PACED: 0, RECEIVER_PACED: 1}
_PACING_NAMES: Final = {0: SOURCE_PACED, 1: RECEIVER_PACED}

# --- layout (docs/shared-memory-layout.md) -------------------------------------------------------------

#: Identity, bytes 0-111, written once before the segment gets its name.
_IDENTITY: Final = struct.Struct("<8sHBBIQQQIIIIIIQIIQQQII")
_HEADER_BYTES: Final = 512
_SLOT_BYTES: Final = 128
_PAGE: Final = 4096
#: Identity flag: the writer pends (sleeps on its wake-up socket) when receiver-paced and blocked.
FLAG_WRITER_PENDS: Final = 1

# 64-bit word indices of the shared state.
_W_WPOS: Final = 16  # byte 128: write position, stored last when publishing
_W_RESERVE: Final = 17  # source-paced: the writer overwrites nothing at or beyond this - capacity
_W_STATE: Final = 18  # 0 creating, 1 open, 2 closed
_W_HEARTBEAT: Final = 19  # bumped by Writer.service()
_W_CTL: Final = 24  # byte 192: bumped (under the table lock) whenever the slot table changes
_W_ACK: Final = 25  # the last _W_CTL value the writer took into account
_W_WWAIT: Final = 26  # 1 while a receiver-paced writer sleeps waiting for room
_H_SLEEP: Final = 128  # 16-bit index of slot 0's sleep counter (byte 256); odd = sleeping
_W_SLEEP: Final = 32  # the word holding the sleep counters of slots 0-3
# Slot words, from the slot's first word (slot i at byte 512 + 128 i).
_S_STATE: Final = 0
_S_PID: Final = 1
_S_START: Final = 2
_S_GEN: Final = 3
_S_MODE: Final = 4
_S_JOINED: Final = 5
_S_RPOS: Final = 8  # second cache line: written by the reader as it goes
_S_RECORDS: Final = 9
_S_LOST: Final = 10
_S_ACTIVITY: Final = 11

_CREATING: Final = 0
_OPEN: Final = 1
_CLOSED: Final = 2
_FREE: Final = 0
_JOINING: Final = 1
_ACTIVE: Final = 2
_MODE_BUSY: Final = 0
_MODE_PEND: Final = 1
_SLOT_STATES: Final = {_JOINING: "joining", _ACTIVE: "active"}
_STATE_NAMES: Final = {_CREATING: "creating", _OPEN: "open", _CLOSED: "closed"}

# Lock bytes (open-file-description locks; they need not hold data).
_LOCK_OWNER: Final = 0
_LOCK_TABLE: Final = 1
_LOCK_SLOT0: Final = 8

_LEN_MASK: Final = 0xFFFFFFFF
_NO_LIMIT: Final = 1 << 62
_ALL: Final = 1 << 62
_DATA_BITS: Final = DATA << 32
# _Reader._scan results.
_STOP: Final = 1
_STOP_EOS: Final = 2
_LATER: Final = -1
_END: Final = -2

_FLOCK: Final = struct.Struct("hhqqi4x")
#: A plain LBMC data message's header (version 0, type DATA, no extension header; msglen, topic index,
#: sqn), written in place by Writer.acquire_message.
_LBMC_DATA_HEADER: Final = 12
_pack_lbmc: Final = struct.Struct(">2xHII").pack_into
_NAME_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_MAX_NAME: Final = 80
_WAKE: Final = b"\x01"


# --- errors ------------------------------------------------------------------------------------------


class SegmentError(OpenUMError):
    """A shared-memory segment could not be created, opened or used."""


class SegmentNotFoundError(SegmentError):
    """No segment of that name exists (its source is gone, or never was)."""


class SegmentInUseError(SegmentError):
    """A live process owns a segment of that name; only its owner may recreate or delete it."""


class SegmentOrphanedError(SegmentError):
    """The segment's owner process is gone: nothing will be written to it again."""


class SegmentCorruptError(SegmentError):
    """A segment's bytes break the layout; ``field`` names what was wrong, ``value`` what was found."""

    def __init__(self, path: str, field: str, value: object, allowed: str) -> None:
        super().__init__(f"shared-memory segment {path}: {field} is {value!r}; {allowed}", errnum=LBM_EINVAL)
        self.path = path
        self.field = field
        self.value = value
        self.allowed = allowed


class ReceiverSlotsFullError(SegmentError):
    """Every receiver slot of the segment is taken by a live reader (``max_receivers``)."""

    errnum = LBM_ENOMEM


class RecordTooLargeError(SegmentError):
    """A record is longer than the segment's ``max_record``."""

    errnum = LBM_EINVAL


class BatchFullError(SegmentError):
    """The acquired, not yet completed records leave no room for another one: ``complete()`` first."""


# --- small OS helpers --------------------------------------------------------------------------------


def _require_platform() -> None:
    if not sys.platform.startswith("linux") or platform.machine() not in ("x86_64", "AMD64"):
        raise NotSupportedError(
            f"openum's shared-memory transports need Linux on x86-64 (this is {sys.platform} on "
            f"{platform.machine()}): their lock-free ring relies on x86-64 store ordering, which Python "
            "cannot enforce with barriers elsewhere"
        )


def _setlk(fd: int, byte: int, wait: bool) -> bool:
    """Take the write lock on ``byte`` of ``fd``'s file (open-file-description lock); False if held."""
    arg = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, byte, 1, 0)
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLKW if wait else fcntl.F_OFD_SETLK, arg)
    except (BlockingIOError, PermissionError):
        return False
    return True


def _unlk(fd: int, byte: int) -> None:
    fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _FLOCK.pack(fcntl.F_UNLCK, os.SEEK_SET, byte, 1, 0))


def _locked_by_other(fd: int, byte: int) -> bool:
    """Whether another open file description holds a lock on ``byte`` (never the caller's own)."""
    got = fcntl.fcntl(fd, fcntl.F_OFD_GETLK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, byte, 1, 0))
    return bool(_FLOCK.unpack(got)[0] != fcntl.F_UNLCK)


def process_start_time(pid: int) -> int | None:
    """Field 22 of ``/proc/<pid>/stat`` (clock ticks after boot), or None when ``pid`` is gone or a zombie.

    A pid and its start time name one process: a recycled pid has another start time."""
    if pid <= 0:
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            data = stat.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2 :].split()
    if len(fields) < 20 or fields[0] in (b"Z", b"X", b"x"):
        return None
    try:
        return int(fields[19])
    except ValueError:
        return None


_OWN_START: dict[int, int] = {}


def _own_start_time() -> int:
    pid = os.getpid()
    start = _OWN_START.get(pid)
    if start is None:
        start = process_start_time(pid) or 0
        _OWN_START[pid] = start
    return start


def holder_alive(fd: int, lock_byte: int, pid: int, start_time: int) -> bool:
    """Whether the process recorded as ``pid``/``start_time`` is alive and still holds ``lock_byte``.

    ``fd`` must be an open file description of the segment other than the holder's own."""
    return _locked_by_other(fd, lock_byte) and process_start_time(pid) == start_time


def segment_name(kind: str, transport_id: int, session_id: int, prefix: str = DEFAULT_PREFIX) -> str:
    """The name of a transport session's segment: ``openum-ipc-20001-42792ac`` (session id in hex)."""
    if kind not in _KIND_CODES:
        raise ConfigError(f"segment kind {kind!r} is not one of ipc, smx", value=kind, allowed="ipc, smx")
    return f"{prefix}-{kind}-{transport_id}-{session_id:x}"


def _check_name(name: str) -> None:
    if not _NAME_RE.fullmatch(name) or len(name) > _MAX_NAME:
        raise ConfigError(
            f"shared-memory segment name {name!r} is not allowed",
            value=name,
            allowed=f"1-{_MAX_NAME} characters of A-Z a-z 0-9 . _ -, starting with a letter or digit",
        )


def _wake_address(name: str, slot: int, generation: int) -> bytes:
    """The abstract Unix socket of a pending reader (Linux abstract namespace: no file, freed on exit)."""
    return f"\0{name}-r{slot}-{generation}".encode()


def _writer_address(name: str, pid: int) -> bytes:
    return f"\0{name}-w{pid}".encode()


def _send_wake(sock: socket.socket, address: bytes) -> bool:
    try:
        sock.sendto(_WAKE, address)
    except OSError:  # the reader is gone (refused) or has wake-ups queued already (EAGAIN)
        return False
    return True


def _drain(sock: socket.socket) -> None:
    try:
        while sock.recv(64):
            pass
    except OSError:
        pass


# --- layout ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SegmentIdentity:
    """The fixed part of a segment's header (what its writer decided when it created it)."""

    path: str
    kind: str
    pacing: str
    flags: int
    capacity: int
    ring_offset: int
    file_size: int
    session_id: int
    transport_id: int
    max_receivers: int
    max_record: int
    block_shift: int
    index_entries: int
    index_offset: int
    owner_pid: int
    owner_start_time: int
    created_ns: int


def _block_shift(capacity: int) -> int:
    # Resynchronisation points every 2**shift bytes: at most capacity / 8 apart, at most 64 KiB.
    shift = 6
    while shift < 16 and (2 << shift) <= capacity // 8:
        shift += 1
    return shift


def _max_record_limit(capacity: int, source_paced: bool) -> int:
    # A padding record and a record together fit in one batch (capacity / 4 source-paced, / 2 receiver-
    # paced), which keeps a record start within every capacity / 8 of a source-paced ring.
    return min((capacity // 8 if source_paced else capacity // 4) - 8, _LEN_MASK)


def _layout(capacity: int, max_receivers: int, source_paced: bool) -> tuple[int, int, int, int, int]:
    """(block shift, index entries, index offset, ring offset, file size)."""
    shift = _block_shift(capacity) if source_paced else 0
    entries = (capacity >> shift) + 2 if source_paced else 0
    index_offset = _HEADER_BYTES + max_receivers * _SLOT_BYTES
    ring_offset = -(-(index_offset + 16 * entries) // _PAGE) * _PAGE
    return shift, entries, index_offset, ring_offset, ring_offset + capacity


def parse_identity(head: bytes, actual_size: int, path: str) -> SegmentIdentity:
    """Check the fixed header of a segment (its first bytes, the file being ``actual_size`` bytes long).

    Raises :class:`SegmentCorruptError` naming the first field that breaks the layout."""
    if len(head) < _IDENTITY.size or actual_size < _HEADER_BYTES:
        raise SegmentCorruptError(
            path, "file size", actual_size, f"an openum segment has at least a {_HEADER_BYTES}-byte header"
        )
    (magic, version, kind, pacing, flags, capacity, ring_offset, file_size, session_id, transport_id,
     max_receivers, max_record, shift, entries, index_offset, owner_pid, _r1, owner_start, created_ns,
     slots_offset, slot_bytes, _r2) = _IDENTITY.unpack_from(head)  # fmt: skip
    bad = SegmentCorruptError
    if magic != MAGIC:
        raise bad(path, "magic", magic, f"an openum segment starts with {MAGIC!r}")
    if version != LAYOUT_VERSION:
        raise bad(path, "layout version", version, f"this openum reads layout version {LAYOUT_VERSION}")
    if kind not in _KIND_NAMES:
        raise bad(path, "kind", kind, "1 (ipc) or 2 (smx)")
    if pacing not in _PACING_NAMES:
        raise bad(path, "pacing", pacing, "0 (source-paced) or 1 (receiver-paced)")
    if capacity % 8 or not MIN_CAPACITY <= capacity <= MAX_CAPACITY:
        raise bad(path, "capacity", capacity, f"a multiple of 8 from {MIN_CAPACITY} to {MAX_CAPACITY}")
    if slots_offset != _HEADER_BYTES or slot_bytes != _SLOT_BYTES:
        raise bad(
            path, "slot table", (slots_offset, slot_bytes), f"at {_HEADER_BYTES}, {_SLOT_BYTES} per slot"
        )
    if not 1 <= max_receivers <= MAX_RECEIVERS:
        raise bad(path, "max receivers", max_receivers, f"1 to {MAX_RECEIVERS}")
    source_paced = pacing == 0
    limit = _max_record_limit(capacity, source_paced)
    if not 1 <= max_record <= limit:
        raise bad(path, "max record", max_record, f"1 to {limit} for this capacity and pacing")
    want = _layout(capacity, max_receivers, source_paced)
    if (shift, entries, index_offset, ring_offset, file_size) != want:
        raise bad(
            path,
            "layout (block shift, index entries, index offset, ring offset, file size)",
            (shift, entries, index_offset, ring_offset, file_size),
            f"{want} for this capacity, pacing and receiver count",
        )
    if actual_size != file_size:
        raise bad(path, "file size", actual_size, f"the header says {file_size} (truncated or overwritten)")
    return SegmentIdentity(
        path, _KIND_NAMES[kind], _PACING_NAMES[pacing], flags, capacity, ring_offset, file_size, session_id,
        transport_id, max_receivers, max_record, shift, entries, index_offset, owner_pid, owner_start,
        created_ns,
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class ReceiverInfo:
    """One receiver slot in use (receiver monitoring, section 6.4).

    ``state``: ``joining`` (receiver-paced, until the writer takes it into account) or ``active``.
    ``alive``: its process is alive and holds the slot lock.  ``mode``: ``pend`` or ``busy_wait``.
    ``position``: its read position; ``lag``: bytes published it has not taken yet.  ``records``: records
    it took; ``lost``: records it lost to overruns.  ``activity``: its heartbeat counter (waits and
    explicit heartbeats).  ``generation``: how many readers used the slot.  ``joined_ns``: Unix time."""

    slot: int
    state: str
    pid: int
    start_time: int
    alive: bool
    mode: str
    position: int
    lag: int
    records: int
    lost: int
    activity: int
    generation: int
    joined_ns: int


def receivers_of(words: memoryview, fd: int, identity: SegmentIdentity, wpos: int) -> list[ReceiverInfo]:
    """The slots in use, read from ``words`` (the segment's first bytes as 64-bit words)."""
    out: list[ReceiverInfo] = []
    for slot in range(identity.max_receivers):
        b = (_HEADER_BYTES + slot * _SLOT_BYTES) >> 3
        state = words[b + _S_STATE]
        if state not in _SLOT_STATES:
            continue
        pid = words[b + _S_PID]
        start = words[b + _S_START]
        rpos = words[b + _S_RPOS]
        out.append(
            ReceiverInfo(
                slot, _SLOT_STATES[state], pid, start, holder_alive(fd, _LOCK_SLOT0 + slot, pid, start),
                PEND if words[b + _S_MODE] == _MODE_PEND else BUSY_WAIT, rpos,
                max(0, wpos - rpos) if state == _ACTIVE else 0, words[b + _S_RECORDS], words[b + _S_LOST],
                words[b + _S_ACTIVITY], words[b + _S_GEN], words[b + _S_JOINED],
            )
        )  # fmt: skip
    return out


# --- the writer --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WriterStatistics:
    """Counters of a :class:`Writer`.

    ``records``: records published (padding excluded).  ``ring_bytes``: bytes published (headers and
    padding included; the write position).  ``publishes``: times the write position moved.
    ``blocked``: sends that waited for room (receiver-paced); ``blocked_ns``: their time waiting.
    ``would_block``: non-blocking sends and acquires refused for want of room.  ``wakeups``: wake-ups sent
    to pending readers.  ``evictions``: slots of dead readers freed.  ``receivers``: readers now taken into
    account."""

    records: int
    ring_bytes: int
    publishes: int
    blocked: int
    blocked_ns: int
    would_block: int
    wakeups: int
    evictions: int
    receivers: int


class Writer:
    """The source side of one shared-memory transport session: creates the segment and writes records.

    ``capacity`` is the ring's size in bytes (``transport_lbtipc_transmission_window_size``; a multiple of
    8, at least 1024).  ``max_record`` bounds a record's payload (0: the largest the capacity allows,
    capacity / 8 - 8 source-paced, capacity / 4 - 8 receiver-paced).  ``wait`` is what a receiver-paced
    writer does when the ring is full: ``pend`` (spin ``spin`` times, then sleep until a reader signals)
    or ``spin`` (spin and yield, UM's SMX behaviour).  ``liveness_interval`` (seconds) is how often a
    blocked writer looks for dead readers to evict.  A writer is not thread-safe: callers serialise.

    An existing segment of the same name whose owner died is reclaimed (``reclaimed_from_pid``); one
    whose owner lives raises :class:`SegmentInUseError`."""

    def __init__(
        self,
        name: str,
        *,
        kind: str = KIND_IPC,
        capacity: int = 25165824,
        pacing: str = SOURCE_PACED,
        max_receivers: int = 20,
        max_record: int = 0,
        session_id: int = 0,
        transport_id: int = 0,
        directory: str = SHM_DIR,
        mode: int = 0o600,
        wait: str = PEND,
        spin: int = 2000,
        liveness_interval: float = 0.1,
    ) -> None:
        _require_platform()
        _check_name(name)
        if kind not in _KIND_CODES:
            raise ConfigError(
                f"segment kind {kind!r} is not allowed", option="kind", value=kind, allowed="ipc, smx"
            )
        if pacing not in _PACING_CODES:
            raise ConfigError(
                f"pacing {pacing!r} is not allowed", option="pacing", value=pacing,
                allowed="source_paced, receiver_paced",
            )  # fmt: skip
        if capacity % 8 or not MIN_CAPACITY <= capacity <= MAX_CAPACITY:
            raise ConfigError(
                f"ring capacity {capacity} is not allowed", option="capacity", value=capacity,
                allowed=f"a multiple of 8 from {MIN_CAPACITY} to {MAX_CAPACITY}",
            )  # fmt: skip
        if not 1 <= max_receivers <= MAX_RECEIVERS:
            raise ConfigError(
                f"max_receivers {max_receivers} is not allowed", option="max_receivers",
                value=max_receivers, allowed=f"1 to {MAX_RECEIVERS}",
            )  # fmt: skip
        source_paced = pacing == SOURCE_PACED
        limit = _max_record_limit(capacity, source_paced)
        if max_record == 0:
            max_record = limit
        if not 1 <= max_record <= limit:
            raise ConfigError(
                f"max_record {max_record} does not fit a {pacing} ring of {capacity} bytes",
                option="max_record", value=max_record, allowed=f"1 to {limit} (0: {limit})",
            )  # fmt: skip
        if wait not in (PEND, SPIN):
            raise ConfigError(
                f"wait {wait!r} is not allowed", option="wait", value=wait, allowed="pend, spin"
            )
        if not 0 <= session_id <= 0xFFFFFFFF or not 0 <= transport_id <= 0xFFFFFFFF:
            raise ConfigError(
                "session_id and transport_id are 32-bit unsigned", value=(session_id, transport_id),
                allowed="0 to 4294967295",
            )  # fmt: skip
        self.name = name
        self.path = os.path.join(directory, name)
        self.kind = kind
        self.pacing = pacing
        self.capacity = capacity
        self.max_record = max_record
        self.session_id = session_id
        self.transport_id = transport_id
        #: Pid of the dead owner whose leftover segment of the same name this writer replaced, if any.
        self.reclaimed_from_pid: int | None = None
        self._source_paced = source_paced
        self._pends = wait == PEND and not source_paced
        self._spin = spin
        self._liveness = liveness_interval
        self._max_batch = capacity // 4 if source_paced else capacity // 2
        self._max_receivers = max_receivers
        shift, entries, index_offset, ring_offset, file_size = _layout(capacity, max_receivers, source_paced)
        self._shift = shift
        self._entries = entries
        self._ix = index_offset >> 3
        self._pid = os.getpid()
        self._closed = False

        tmp = f"{self.path}.creating-{self._pid}-{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
        mm: mmap.mmap | None = None
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        try:
            sock.setblocking(False)
            if self._pends:
                sock.bind(_writer_address(name, self._pid))
            _setlk(fd, _LOCK_OWNER, False)
            # Allocating now turns a full /dev/shm into an error here rather than SIGBUS on a later store.
            try:
                os.posix_fallocate(fd, 0, file_size)
            except OSError as err:
                raise SegmentError(
                    f"cannot allocate {file_size} bytes for shared-memory segment {self.path}: "
                    f"{err.strerror} (free space in {directory}, or a smaller transmission window)"
                ) from err
            mm = mmap.mmap(fd, file_size)
            flags = FLAG_WRITER_PENDS if self._pends else 0
            _IDENTITY.pack_into(
                mm, 0, MAGIC, LAYOUT_VERSION, _KIND_CODES[kind], _PACING_CODES[pacing], flags, capacity,
                ring_offset, file_size, session_id, transport_id, max_receivers, max_record, shift, entries,
                index_offset, self._pid, 0, _own_start_time(), time.time_ns(), _HEADER_BYTES, _SLOT_BYTES, 0,
            )  # fmt: skip
            self._mm = mm
            self._mv = memoryview(mm)
            self._q = self._mv.cast("Q")
            self._ring = self._mv[ring_offset : ring_offset + capacity]
            self._rq = self._ring.cast("Q")
            self._q[_W_STATE] = _OPEN
            self._link(tmp)
        except BaseException:
            sock.close()
            if mm is not None:
                self._release_views()
                mm.close()
            os.close(fd)
            os.unlink(tmp)
            raise
        os.unlink(tmp)
        self._fd = fd
        self._inode = os.fstat(fd).st_ino
        self._sock = sock
        self._fence_lock = threading.Lock()

        self._wpos = 0  # published
        self._tail = 0  # written (acquired records included)
        self._toff = 0  # _tail % capacity
        self._seq = 0  # source-paced: records written (padding excluded)
        self._next_block = 0  # source-paced: the next resynchronisation block to index
        self._limit = _NO_LIMIT  # receiver-paced: _tail may not pass the slowest reader + capacity
        # A record ending at or before _fast_end needs no check: it is within _limit, the batch bound
        # (_wpos + _max_batch) and the current lap of the ring.  Refreshed on the slow paths only (it can
        # only be too small, never too large, between refreshes).
        self._fast_end = min(capacity, self._max_batch)
        self._pending = 0  # acquired records not yet published
        self._ctl = 0
        self._rpos_words: list[int] = []
        self._npend = 0
        self._pend_words: list[int] = []
        self._pend_seen: list[int] = []
        self._pend_lanes: list[list[tuple[int, int]]] = []
        self._pend_addr: dict[int, bytes] = {}
        self._pend_gen: dict[int, int] = {}
        self._last_woken: dict[int, int] = {}
        self._records = 0
        self._publishes = 0
        self._blocked = 0
        self._blocked_ns = 0
        self._would_block = 0
        self._wakeups = 0
        self._evictions = 0

    # -- creation --------------------------------------------------------------------------------------

    def _link(self, tmp: str) -> None:
        """Give the initialised file its name, reclaiming a dead owner's file of that name."""
        for _ in range(16):
            try:
                os.link(tmp, self.path)
                return
            except FileExistsError:
                pass
            try:
                other = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            try:
                if not _setlk(other, _LOCK_OWNER, False):
                    pid = (
                        struct.unpack("<I", os.pread(other, 4, 72))[0] if os.fstat(other).st_size >= 76 else 0
                    )
                    raise SegmentInUseError(
                        f"shared-memory segment {self.path} belongs to a live process (pid {pid}); pick "
                        "another transport or session id"
                    )
                # Its owner is dead and we hold its owner lock: unlink it if the name still means it.
                try:
                    same = os.stat(self.path).st_ino == os.fstat(other).st_ino
                except FileNotFoundError:
                    same = False
                if same:
                    size = os.fstat(other).st_size
                    self.reclaimed_from_pid = (
                        struct.unpack("<I", os.pread(other, 4, 72))[0] if size >= 76 else 0
                    )
                    os.unlink(self.path)
            finally:
                os.close(other)
        raise SegmentError(f"could not create shared-memory segment {self.path}: its name keeps being taken")

    # -- sending ---------------------------------------------------------------------------------------

    def send(
        self, data: bytes | bytearray | memoryview, kind: int = DATA, timeout: float | None = None
    ) -> None:
        """Write one record and publish it (with any acquired ones).

        Receiver-paced, waits for room up to ``timeout`` seconds (None: as long as it takes) and raises
        :class:`~openum.TimedOutError` then; source-paced never waits."""
        n = len(data)
        size = (n + 15) & -8
        tail = self._tail
        end = tail + size
        if end > self._fast_end or n > self.max_record or kind != DATA:
            if not self._send_slow(data, kind, timeout, True):
                raise self._timed_out(timeout)
            return
        self._write_published(data, n, size, tail, end)

    def try_send(self, data: bytes | bytearray | memoryview, kind: int = DATA) -> bool:
        """:meth:`send` without waiting: False when a receiver-paced ring has no room now."""
        n = len(data)
        size = (n + 15) & -8
        tail = self._tail
        end = tail + size
        if end > self._fast_end or n > self.max_record or kind != DATA:
            return self._send_slow(data, kind, 0.0, False)
        self._write_published(data, n, size, tail, end)
        return True

    def _write_published(
        self, data: bytes | bytearray | memoryview, n: int, size: int, tail: int, end: int
    ) -> None:
        """The fast path of :meth:`send` / :meth:`try_send`: a DATA record of ``n`` bytes (``size`` in the
        ring) that fits before ``_fast_end``, written at ``tail`` and published with what was acquired."""
        q = self._q
        if self._source_paced:
            q[_W_RESERVE] = end
            if tail >= self._next_block:
                self._index(tail)
            self._seq += 1
        off = self._toff
        self._ring[off + 8 : off + 8 + n] = data
        self._rq[off >> 3] = n | _DATA_BITS
        off += size
        self._toff = 0 if off == self.capacity else off
        self._tail = end
        prev = self._wpos
        self._wpos = end
        q[_W_WPOS] = end
        self._records += self._pending + 1
        self._pending = 0
        self._publishes += 1
        if self._npend or q[_W_CTL] != self._ctl:
            self._after_publish(prev)

    def _send_slow(
        self, data: bytes | bytearray | memoryview, kind: int, timeout: float | None, block: bool
    ) -> bool:
        """:meth:`send` when the record needs a check: its kind, its size, room, the ring's end."""
        if kind != DATA:
            _check_kind(kind)
        self._publish()  # acquired records first: the batch bound then never refuses this one
        view = self._acquire(len(data), kind, timeout, block)
        if view is None:
            return False
        view[:] = data
        self._publish()
        return True

    def send_many(
        self, items: Sequence[bytes | bytearray | memoryview], kind: int = DATA, timeout: float | None = None
    ) -> None:
        """Write every item as one record and publish them together.

        A batch larger than a quarter of the ring (half, receiver-paced) is published in parts.  Receiver-
        paced, waits for room as :meth:`send` does (what was written before a timeout is published)."""
        if self._send_many(items, kind, timeout, True) < len(items):
            raise self._timed_out(timeout)

    def try_send_many(self, items: Sequence[bytes | bytearray | memoryview], kind: int = DATA) -> int:
        """:meth:`send_many` without waiting: how many of ``items`` (from the first) were published."""
        return self._send_many(items, kind, 0.0, False)

    def _send_many(
        self, items: Sequence[bytes | bytearray | memoryview], kind: int, timeout: float | None, block: bool
    ) -> int:
        if kind != DATA:
            _check_kind(kind)
        ring = self._ring
        rq = self._rq
        q = self._q
        cap = self.capacity
        max_record = self.max_record
        source_paced = self._source_paced
        kind_bits = kind << 32
        tail = self._tail
        off = self._toff
        fast_end = self._fast_end
        seq = self._seq
        next_block = self._next_block if source_paced else _NO_LIMIT
        count = 0
        done = 0
        for data in items:
            n = len(data)
            size = (n + 15) & -8
            end = tail + size
            if end > fast_end or n > max_record:
                self._tail = tail
                self._toff = off
                self._seq = seq
                self._pending += count
                done += count
                count = 0
                if not self._make_room(n, size, timeout, block, True):
                    break
                tail = self._tail
                off = self._toff
                fast_end = self._fast_end
                seq = self._seq
                next_block = self._next_block if source_paced else _NO_LIMIT
                end = tail + size
            if source_paced:
                q[_W_RESERVE] = end
                if tail >= next_block:
                    self._seq = seq
                    self._index(tail)
                    next_block = self._next_block
                seq += 1
            ring[off + 8 : off + 8 + n] = data
            rq[off >> 3] = n | kind_bits
            tail = end
            off += size
            if off == cap:
                off = 0
            count += 1
        self._tail = tail
        self._toff = off
        self._seq = seq
        self._pending += count
        done += count
        self._publish()
        return done

    def acquire(self, n: int, timeout: float | None = None) -> memoryview:
        """Reserve a record of ``n`` payload bytes and return a writable view of it in the ring.

        Write the payload into the view, then :meth:`complete` (or :meth:`complete_and_acquire`) publishes
        every record acquired so far; several acquires before one complete make a batch.  Receiver-paced,
        waits for room as :meth:`send` does.  Raises :class:`BatchFullError` when the acquired records
        leave no room for this one in a batch (a quarter of the ring; half receiver-paced)."""
        size = (n + 15) & -8
        off = self._toff
        end = self._tail + size
        if end > self._fast_end or not 0 <= n <= self.max_record or self._source_paced:
            view = self._acquire(n, DATA, timeout, True)
            if view is None:
                raise self._timed_out(timeout)
            return view
        self._rq[off >> 3] = n | _DATA_BITS
        self._tail = end
        off += size
        self._toff = 0 if off == self.capacity else off
        self._pending += 1
        return self._ring[off - size + 8 : off - size + 8 + n]

    def acquire_message(self, n: int, topic_index: int, sqn: int, block: bool) -> memoryview | None:
        """:meth:`acquire` of a record that is one plain LBMC data message (LBT-SMX's zero-copy send):
        its 12-byte header (``topic_index``, ``sqn``) is written here and the view returned is its
        ``n``-byte payload.  ``block`` False: None when a receiver-paced ring has no room now."""
        m = n + _LBMC_DATA_HEADER
        size = (m + 15) & -8
        off = self._toff
        end = self._tail + size
        if end > self._fast_end or not 0 <= m <= self.max_record or self._source_paced:
            view = self._acquire(m, DATA, None if block else 0.0, block)
            if view is None:
                return None
            _pack_lbmc(view, 0, m, topic_index, sqn)
            return view[_LBMC_DATA_HEADER:]
        ring = self._ring
        self._rq[off >> 3] = m | _DATA_BITS
        _pack_lbmc(ring, off + 8, m, topic_index, sqn)
        self._tail = end
        nxt = off + size
        self._toff = 0 if nxt == self.capacity else nxt
        self._pending += 1
        start = off + 8 + _LBMC_DATA_HEADER
        return ring[start : start + n]

    def try_acquire(self, n: int, kind: int = DATA) -> memoryview | None:
        """:meth:`acquire` without waiting (and of any ``kind``): None when a receiver-paced ring has no
        room now."""
        if kind != DATA:
            _check_kind(kind)
        return self._acquire(n, kind, 0.0, False)

    def acquire_kind(self, n: int, kind: int, timeout: float | None = None) -> memoryview:
        """:meth:`acquire` for a record of another ``kind`` than DATA."""
        _check_kind(kind)
        view = self._acquire(n, kind, timeout, True)
        if view is None:
            raise self._timed_out(timeout)
        return view

    def _acquire(self, n: int, kind: int, timeout: float | None, block: bool) -> memoryview | None:
        size = (n + 15) & -8
        off = self._toff
        tail = self._tail
        end = tail + size
        cap = self.capacity
        if end > self._fast_end or not 0 <= n <= self.max_record:
            if not self._make_room(n, size, timeout, block, False):
                return None
            off = self._toff
            tail = self._tail
            end = tail + size
        if self._source_paced:
            self._q[_W_RESERVE] = end
            if tail >= self._next_block:
                self._index(tail)
            self._seq += 1
        self._rq[off >> 3] = n | (kind << 32)
        self._tail = end
        nxt = off + size
        self._toff = 0 if nxt == cap else nxt
        self._pending += 1
        return self._ring[off + 8 : off + 8 + n]

    def complete(self) -> int:
        """Publish every acquired record (``lbm_src_buffs_complete``); returns how many."""
        pending = self._pending
        tail = self._tail
        prev = self._wpos
        if tail != prev:
            q = self._q
            self._wpos = tail
            q[_W_WPOS] = tail
            self._records += pending
            self._pending = 0
            self._publishes += 1
            if q[_W_CTL] != self._ctl:
                self._control(prev)
            if self._npend:
                self._wake()
        return pending

    def complete_and_acquire(self, n: int, timeout: float | None = None) -> memoryview:
        """:meth:`complete`, then :meth:`acquire` ``n`` bytes (``lbm_src_buffs_complete_and_acquire``)."""
        self._publish()
        return self.acquire(n, timeout)

    def cancel(self) -> int:
        """Drop every acquired, not yet completed record (``lbm_src_buffs_cancel``); returns how many."""
        dropped = self._pending
        if self._source_paced and self._tail != self._wpos:
            # Index entries of blocks starting at or before the write position name the record that will
            # start there with the sequence number it will have: still right.  Later blocks are indexed
            # again by the records that replace the dropped ones.
            self._seq -= dropped
            self._next_block = min(self._next_block, ((self._wpos >> self._shift) + 1) << self._shift)
        self._tail = self._wpos
        self._toff = self._wpos % self.capacity
        self._pending = 0
        self._refresh_fast_end()
        return dropped

    def has_room(self, n: int) -> bool:
        """Whether a record of ``n`` payload bytes could be written now without waiting (always true
        source-paced).  Looks at the readers' positions again when the last look said no."""
        size = (n + 15) & -8
        if self._tail + size <= self._fast_end:
            return True
        off = self._toff
        end = self._tail + (size if off + size <= self.capacity else self.capacity - off + size)
        if end <= self._limit:
            return True
        if self._q[_W_CTL] != self._ctl:
            self._control(self._wpos)
        else:
            self._update_limit()
        return end <= self._limit

    def _timed_out(self, timeout: float | None) -> TimedOutError:
        return TimedOutError(
            f"shared-memory segment {self.name}: no room for the record after {timeout} s: a receiver-paced "
            "reader is not keeping up (see receivers())"
        )

    def _make_room(self, n: int, size: int, timeout: float | None, block: bool, may_publish: bool) -> bool:
        """The slow path of a write: size check, batch bound, room (waiting), padding at the ring's end."""
        if self._closed:
            raise ClosedError(f"shared-memory segment {self.name} is closed")
        if n > self.max_record or n < 0:
            raise RecordTooLargeError(
                f"a record of {n} bytes does not fit segment {self.name}: its max_record is {self.max_record}"
            )
        cap = self.capacity
        off = self._toff
        need = size if off + size <= cap else cap - off + size
        if self._tail + need - self._wpos > self._max_batch:
            if not may_publish:
                raise BatchFullError(
                    f"shared-memory segment {self.name}: the acquired records ({self._tail - self._wpos} "
                    f"bytes) leave no room for {need} more in one batch (at most {self._max_batch}); "
                    "complete() first"
                )
            self._publish()
        end = self._tail + need
        if end > self._limit and not self._wait_room(end, timeout, block, may_publish):
            return False
        if off + size > cap:
            self._pad()
        self._refresh_fast_end()
        return True

    def _refresh_fast_end(self) -> None:
        self._fast_end = min(
            self._limit, self._wpos + self._max_batch, self._tail - self._toff + self.capacity
        )

    def _pad(self) -> None:
        """Fill the end of the ring with a padding record: records never wrap."""
        off = self._toff
        tail = self._tail
        size = self.capacity - off
        if self._source_paced:
            self._q[_W_RESERVE] = tail + size
            if tail >= self._next_block:
                self._index(tail)
        self._rq[off >> 3] = (size - 8) | (PAD << 32)
        self._tail = tail + size
        self._toff = 0

    def _index(self, pos: int) -> None:
        """Source-paced: record ``pos`` (and the current sequence number) as the first record of the blocks
        that start after the previous record and at or before ``pos`` (seqlock-style entries)."""
        q = self._q
        shift = self._shift
        entries = self._entries
        ix = self._ix
        last = pos >> shift
        b = self._next_block >> shift
        while b <= last:
            e = ix + 2 * (b % entries)
            q[e] = 0
            q[e + 1] = self._seq
            q[e] = pos + 1
            b += 1
        self._next_block = (last + 1) << shift

    def _publish(self) -> None:
        tail = self._tail
        prev = self._wpos
        if tail == prev:
            return
        q = self._q
        self._wpos = tail
        q[_W_WPOS] = tail
        self._records += self._pending
        self._pending = 0
        self._publishes += 1
        if self._npend or q[_W_CTL] != self._ctl:
            self._after_publish(prev)

    def _after_publish(self, prev: int) -> None:
        """The slot table changed, or pending readers may need waking."""
        if self._q[_W_CTL] != self._ctl:
            self._control(prev)
        if self._npend:
            self._wake()

    # -- readers ---------------------------------------------------------------------------------------

    def _fence(self) -> None:
        # A locked instruction (the lock's compare-and-swap) drains this CPU's store buffer: full fence.
        self._fence_lock.acquire()
        self._fence_lock.release()

    def _control(self, prev: int) -> None:
        """The slot table changed: activate joining readers (at ``prev``), list the active and pending.

        The writer never waits for the table lock (a stopped reader could hold it): when it is taken, the
        change is taken into account at the next publish."""
        q = self._q
        rpos_words: list[int] = []
        pend: list[tuple[int, int]] = []
        if not _setlk(self._fd, _LOCK_TABLE, False):
            self._update_limit()
            return
        try:
            ctl = q[_W_CTL]
            for slot in range(self._max_receivers):
                b = (_HEADER_BYTES + slot * _SLOT_BYTES) >> 3
                state = q[b + _S_STATE]
                if state == _JOINING and not self._source_paced:
                    q[b + _S_RPOS] = prev
                    q[b + _S_STATE] = _ACTIVE
                    state = _ACTIVE
                if state == _ACTIVE:
                    rpos_words.append(b + _S_RPOS)
                    if q[b + _S_MODE] == _MODE_PEND:
                        pend.append((slot, q[b + _S_GEN]))
            self._ctl = ctl
            q[_W_ACK] = ctl
        finally:
            _unlk(self._fd, _LOCK_TABLE)
        self._rpos_words = [] if self._source_paced else rpos_words
        self._npend = len(pend)
        words: dict[int, list[tuple[int, int]]] = {}
        for slot, gen in pend:
            words.setdefault(_W_SLEEP + slot // 4, []).append((slot, 16 * (slot % 4)))
            if self._pend_gen.get(slot) != gen:
                self._pend_gen[slot] = gen
                self._pend_addr[slot] = _wake_address(self.name, slot, gen)
                self._last_woken[slot] = -1
        self._pend_words = list(words)
        self._pend_lanes = list(words.values())
        self._pend_seen = [-1] * len(words)
        self._update_limit()

    def _update_limit(self) -> None:
        q = self._q
        words = self._rpos_words
        if not words:
            self._limit = _NO_LIMIT
            self._refresh_fast_end()
            return
        low = q[words[0]]
        for w in words:
            low = min(low, q[w])
        self._limit = low + self.capacity
        self._refresh_fast_end()

    def _wake(self) -> None:
        """After publishing: wake the pending readers that went to sleep since they were last woken."""
        self._fence()
        q = self._q
        seen = self._pend_seen
        words = self._pend_words
        for i in range(len(words)):
            v = q[words[i]]
            if v == seen[i]:
                continue
            seen[i] = v
            for slot, shift in self._pend_lanes[i]:
                c = (v >> shift) & 0xFFFF
                if c & 1 and c != self._last_woken[slot]:
                    self._last_woken[slot] = c
                    if _send_wake(self._sock, self._pend_addr[slot]):
                        self._wakeups += 1

    def _wait_room(self, end: int, timeout: float | None, block: bool, may_publish: bool) -> bool:
        """Receiver-paced: wait until every live reader has left room for the ring to reach ``end``."""
        q = self._q
        if q[_W_CTL] != self._ctl:
            self._control(self._wpos)
        else:
            self._update_limit()
        if end <= self._limit:
            return True
        if not block:
            self._would_block += 1
            return False
        if may_publish:  # let readers take what this call wrote so far (acquired records stay unpublished)
            self._publish()
        self._blocked += 1
        start = time.monotonic_ns()
        now = time.monotonic()
        deadline = None if timeout is None else now + timeout
        next_check = now + self._liveness
        spins = 0
        try:
            while True:
                if q[_W_CTL] != self._ctl:
                    self._control(self._wpos)
                else:
                    self._update_limit()
                if end <= self._limit:
                    return True
                spins += 1
                if spins < self._spin:
                    continue
                now = time.monotonic()
                if now >= next_check:
                    self.evict_dead()
                    next_check = now + self._liveness
                    continue
                if deadline is not None and now >= deadline:
                    return False
                if not self._pends or spins < 2 * self._spin:
                    os.sched_yield()
                    continue
                # Pend: announce it, then look again (a reader that advanced before it saw the flag
                # must be seen now: both sides fence between their store and their load).
                q[_W_WWAIT] = 1
                self._fence()
                self._update_limit()
                if end > self._limit:
                    wait = next_check - now if deadline is None else min(next_check, deadline) - now
                    select.select([self._sock], [], [], max(wait, 0.0))
                q[_W_WWAIT] = 0
                _drain(self._sock)
        finally:
            self._blocked_ns += time.monotonic_ns() - start

    def evict_dead(self) -> list[int]:
        """Free the slots of readers whose process died (or whose pid now names another process); returns
        them (none when a reader holds the slot table at that moment: the next call does it)."""
        q = self._q
        evicted: list[int] = []
        if not _setlk(self._fd, _LOCK_TABLE, False):
            return evicted  # a reader is joining or leaving: next time
        try:
            for slot in range(self._max_receivers):
                b = (_HEADER_BYTES + slot * _SLOT_BYTES) >> 3
                if q[b + _S_STATE] == _FREE:
                    continue
                if not holder_alive(self._fd, _LOCK_SLOT0 + slot, q[b + _S_PID], q[b + _S_START]):
                    _clear_slot(q, b)
                    evicted.append(slot)
            if evicted:
                q[_W_CTL] += 1
        finally:
            _unlk(self._fd, _LOCK_TABLE)
        if evicted:
            self._evictions += len(evicted)
            self._control(self._wpos)
        return evicted

    def service(self) -> list[int]:
        """Housekeeping for a timer (``transport_lbtipc_sm_interval``): bump the heartbeat readers watch,
        take slot-table changes into account and evict dead readers (their slots, returned)."""
        q = self._q
        q[_W_HEARTBEAT] += 1
        if q[_W_CTL] != self._ctl:
            self._control(self._wpos)
        return self.evict_dead()

    def receivers(self) -> list[ReceiverInfo]:
        """The receiver slots in use, with their positions and liveness (receiver monitoring)."""
        return receivers_of(self._q, self._fd, self.identity(), self._wpos)

    def identity(self) -> SegmentIdentity:
        """The segment's fixed header."""
        return parse_identity(bytes(self._mv[: _IDENTITY.size]), len(self._mm), self.path)

    def statistics(self) -> WriterStatistics:
        """A snapshot of the counters (see :class:`WriterStatistics`)."""
        if self._source_paced:
            receivers = sum(
                1
                for slot in range(self._max_receivers)
                if self._q[((_HEADER_BYTES + slot * _SLOT_BYTES) >> 3) + _S_STATE] == _ACTIVE
            )
        else:
            receivers = len(self._rpos_words)
        return WriterStatistics(
            self._records, self._wpos, self._publishes, self._blocked, self._blocked_ns, self._would_block,
            self._wakeups, self._evictions, receivers,
        )  # fmt: skip

    @property
    def position(self) -> int:
        """The write position: bytes published since the segment was created."""
        return self._wpos

    @property
    def closed(self) -> bool:
        return self._closed

    # -- closing ---------------------------------------------------------------------------------------

    def close(self, timeout: float = 0.0) -> None:
        """End the session: drop uncompleted acquires, write the end-of-session record, mark the header
        closed, wake pending readers and unlink the segment.  Receiver-paced, waits up to ``timeout``
        seconds for room for the end-of-session record (readers see the closed header either way)."""
        if self._closed:
            return
        try:
            self.cancel()
            self._acquire(0, EOS, timeout, timeout > 0)
            self._publish()
            self._q[_W_STATE] = _CLOSED
            self._closed = True
            self._fence()
            for slot in range(self._max_receivers):
                b = (_HEADER_BYTES + slot * _SLOT_BYTES) >> 3
                if self._q[b + _S_STATE] != _FREE and self._q[b + _S_MODE] == _MODE_PEND:
                    _send_wake(self._sock, _wake_address(self.name, slot, self._q[b + _S_GEN]))
        finally:
            self._closed = True
            try:
                if os.stat(self.path).st_ino == self._inode:
                    os.unlink(self.path)
            except FileNotFoundError:
                pass
            self._teardown()

    def _teardown(self) -> None:
        """Let go of the socket, the mapping and the file (what the kernel does when the process dies)."""
        self._closed = True
        self._sock.close()
        self._release_views()
        try:
            self._mm.close()
        except BufferError:  # views handed out are still alive: the mapping goes with the last one
            pass
        os.close(self._fd)

    def _release_views(self) -> None:
        _release_views(self, ("_rq", "_ring", "_q", "_mv"))

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _release_views(owner: object, names: tuple[str, ...]) -> None:
    """Release ``owner``'s memoryviews of the mapping (one still exported elsewhere stays valid)."""
    for name in names:
        view = getattr(owner, name, None)
        if view is not None:
            try:
                view.release()
            except BufferError:
                pass


def _check_kind(kind: int) -> None:
    if not 1 <= kind <= 255 or kind == EOS:
        raise ConfigError(
            f"record kind {kind} is not allowed", option="kind", value=kind,
            allowed=f"1 to 255 except {EOS} (end of session)",
        )  # fmt: skip


def _clear_slot(q: memoryview, b: int) -> None:
    q[b + _S_STATE] = _FREE
    q[b + _S_PID] = 0
    q[b + _S_START] = 0
    q[b + _S_MODE] = _MODE_BUSY
    q[b + _S_RPOS] = 0


# --- the reader --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Loss:
    """Records a source-paced reader lost because the writer overwrote them (unrecoverable loss).

    ``count`` records, sequence numbers ``first_seq`` to ``first_seq + count - 1`` (records counted from
    the segment's start, padding excluded), occupying ring positions ``first_position`` up to
    ``end_position`` (where the reader resumed)."""

    first_seq: int
    count: int
    first_position: int
    end_position: int


@dataclass(frozen=True, slots=True)
class ReaderStatistics:
    """Counters of a :class:`Reader`.

    ``records``: records delivered.  ``ring_bytes``: ring bytes consumed (headers and padding included).
    ``losses``: overruns; ``lost_records``: records lost to them.  ``sleeps``: times a pending reader
    slept; ``polls``: poll/read calls."""

    records: int
    ring_bytes: int
    losses: int
    lost_records: int
    sleeps: int
    polls: int


class Reader:
    """A receiver's view of one shared-memory transport session: joins a slot and reads records.

    ``mode`` is ``busy_wait`` (poll positions; :meth:`wait` spins) or ``pend`` (sleep on a wake-up socket
    the writer signals; :meth:`fileno` is selectable).  ``linger``: polls before sleeping
    (``transport_lbtipc_pend_behavior_linger_loop_count``).  ``liveness_interval`` (seconds): how often an
    idle :meth:`wait` checks that the writer is alive.  ``on_loss`` receives each :class:`Loss`
    (source-paced); without it they accumulate in :attr:`losses`.  ``kind`` and ``session_id``, when
    given, must match the segment's.  ``max_copy`` bounds the bytes a source-paced read copies at once.

    A reader is not thread-safe: one thread polls it.  Opening a segment whose writer is dead raises
    :class:`SegmentOrphanedError`; a corrupt one :class:`SegmentCorruptError`."""

    def __init__(
        self,
        name: str,
        *,
        directory: str = SHM_DIR,
        mode: str = BUSY_WAIT,
        linger: int = 1,
        liveness_interval: float = 0.2,
        on_loss: Callable[[Loss], object] | None = None,
        kind: str | None = None,
        session_id: int | None = None,
        max_copy: int = 1 << 20,
    ) -> None:
        _require_platform()
        _check_name(name)
        if mode not in (PEND, BUSY_WAIT):
            raise ConfigError(
                f"reader mode {mode!r} is not allowed", option="mode", value=mode, allowed="pend, busy_wait"
            )
        self.name = name
        self.path = os.path.join(directory, name)
        self.mode = mode
        self.on_loss = on_loss
        #: Losses not given to ``on_loss`` (the latest 1000).
        self.losses: deque[Loss] = deque(maxlen=1000)
        self._linger = max(0, linger)
        self._liveness = liveness_interval
        self._max_copy = max(4096, max_copy)
        self._eos: str | None = None
        self._writer_dead = False
        self._closed = False
        self._sock: socket.socket | None = None
        self._fence_lock = threading.Lock()
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            raise SegmentNotFoundError(f"no shared-memory segment {self.path}") from None
        self._fd = fd
        self._mm: mmap.mmap | None = None
        try:
            size = os.fstat(fd).st_size
            ident = parse_identity(os.pread(fd, _IDENTITY.size, 0), size, self.path)
            if kind is not None and ident.kind != kind:
                raise SegmentError(f"shared-memory segment {self.path} is {ident.kind}, not {kind}")
            if session_id is not None and ident.session_id != session_id:
                raise SegmentError(
                    f"shared-memory segment {self.path} has session id {ident.session_id:x}, "
                    f"not {session_id:x}"
                )
            self.identity = ident
            self._mm = mmap.mmap(fd, ident.file_size)
            self._mv = memoryview(self._mm)
            self._q = self._mv.cast("Q")
            self._h16 = self._mv[:_HEADER_BYTES].cast("H")
            self._ring = self._mv[ident.ring_offset : ident.ring_offset + ident.capacity]
            self._rq = self._ring.cast("Q")
            self._check_state()
            if not holder_alive(fd, _LOCK_OWNER, ident.owner_pid, ident.owner_start_time):
                raise SegmentOrphanedError(
                    f"shared-memory segment {self.path}: its writer (pid {ident.owner_pid}) is gone"
                )
            self._join()
        except BaseException:
            self._teardown()
            raise

    def _check_state(self) -> None:
        q = self._q
        state = q[_W_STATE]
        wpos = q[_W_WPOS]
        if state not in (_OPEN, _CLOSED):
            raise SegmentCorruptError(self.path, "state", state, "1 (open) or 2 (closed)")
        if wpos % 8:
            raise SegmentCorruptError(self.path, "write position", wpos, "a multiple of 8")
        if self.identity.pacing == SOURCE_PACED:
            reserve = q[_W_RESERVE]
            if not wpos <= reserve <= wpos + self.identity.capacity // 4:
                raise SegmentCorruptError(
                    self.path, "reserve position", reserve,
                    f"between the write position {wpos} and a quarter ring beyond it",
                )  # fmt: skip

    def _join(self) -> None:
        ident = self.identity
        q = self._q
        self._cap = ident.capacity
        self._copy = ident.pacing == SOURCE_PACED
        self._signal_writer = bool(ident.flags & FLAG_WRITER_PENDS)
        self._shift = ident.block_shift
        self._entries = ident.index_entries
        self._ix = ident.index_offset >> 3
        self._rseq = 0
        rpos = 0
        if self._copy:
            rpos, self._rseq = self._join_position()
        slot = -1
        _setlk(self._fd, _LOCK_TABLE, True)
        try:
            for i in range(ident.max_receivers):
                b = (_HEADER_BYTES + i * _SLOT_BYTES) >> 3
                if q[b + _S_STATE] != _FREE and holder_alive(
                    self._fd, _LOCK_SLOT0 + i, q[b + _S_PID], q[b + _S_START]
                ):
                    continue
                if _setlk(self._fd, _LOCK_SLOT0 + i, False):
                    slot = i
                    break
            if slot < 0:
                raise ReceiverSlotsFullError(
                    f"shared-memory segment {self.path}: all {ident.max_receivers} receiver slots are taken "
                    "by live readers"
                )
            b = (_HEADER_BYTES + slot * _SLOT_BYTES) >> 3
            self._slot = slot
            self._b = b
            gen = q[b + _S_GEN] + 1
            self._gen = gen
            q[b + _S_PID] = os.getpid()
            q[b + _S_START] = _own_start_time()
            q[b + _S_GEN] = gen
            q[b + _S_MODE] = _MODE_PEND if self.mode == PEND else _MODE_BUSY
            q[b + _S_JOINED] = time.time_ns()
            q[b + _S_RECORDS] = 0
            q[b + _S_LOST] = 0
            q[b + _S_ACTIVITY] = 0
            lane = _H_SLEEP + slot
            self._sleep = self._h16[lane] & 0xFFFF
            if self._sleep & 1:
                self._sleep = (self._sleep + 1) & 0xFFFF
                self._h16[lane] = self._sleep
            if self._copy:
                q[b + _S_RPOS] = rpos
                q[b + _S_STATE] = _ACTIVE
                self._joining = False
            else:
                q[b + _S_RPOS] = 0
                q[b + _S_STATE] = _JOINING
                self._joining = True
            q[_W_CTL] += 1
            self._join_ctl = q[_W_CTL]
            if self.mode == PEND:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
                try:
                    sock.bind(_wake_address(self.name, slot, gen))
                except OSError:
                    sock.close()
                    _clear_slot(q, b)
                    q[_W_CTL] += 1
                    raise
                sock.setblocking(False)
                self._sock = sock
                self._poller = select.poll()
                self._poller.register(sock, select.POLLIN)
        finally:
            _unlk(self._fd, _LOCK_TABLE)
        self._rpos = rpos
        self._roff = rpos % self._cap
        self._ring_offset = ident.ring_offset
        self._wslot = b + _S_RPOS
        self._acked = False
        self._unacked_sleep = 0.0005
        self._records = 0
        self._consumed = 0
        self._losses = 0
        self._lost = 0
        self._sleeps = 0
        self._polls = 0
        self._held = False

    def _join_position(self) -> tuple[int, int]:
        """Source-paced: the write position and the number of records before it (from the newest index
        entry at or before it, walking the records after that entry)."""
        q = self._q
        rq = self._rq
        cap = self._cap
        shift = self._shift
        for _ in range(1000):
            w = q[_W_WPOS]
            if w == 0:
                return 0, 0
            b = (w - 1) >> shift
            start = -1
            seq = 0
            while b >= 0 and w - (b << shift) <= cap:
                e = self._ix + 2 * (b % self._entries)
                p1 = q[e]
                s = q[e + 1]
                if p1 == q[e] and p1 != 0 and (b << shift) <= p1 - 1 < w:
                    start = p1 - 1
                    seq = s
                    break
                b -= 1
            if start < 0:
                continue
            p = start
            off = p % cap
            ok = True
            while p < w:
                h = rq[off >> 3]
                size = ((h & _LEN_MASK) + 15) & -8
                if h >> 40 or off + size > cap or p + size > w:
                    ok = False
                    break
                if h >> 32 != PAD:
                    seq += 1
                p += size
                off += size
                if off == cap:
                    off = 0
            if ok and start >= q[_W_RESERVE] - cap:
                return w, seq
        raise SegmentError(f"shared-memory segment {self.path}: could not find a record to start at")

    # -- reading ---------------------------------------------------------------------------------------

    def poll(self, handler: Callable[[memoryview, int], object], limit: int = _ALL) -> int:
        """Deliver every published record (at most ``limit``): ``handler(view, kind)`` for each.

        Receiver-paced, ``view`` is the payload in the ring itself (zero copy), valid only during the call
        (copy it to keep it); source-paced, it is a private copy.  A :class:`Loss` is reported before the
        records that follow it.  Returns how many records were delivered; after the end of session
        (:attr:`end_of_session`) returns 0."""
        if self._held:
            self._release()
        w = self._q[_W_WPOS]
        if w == self._rpos or self._joining:
            self._idle()
            if w == self._rpos or self._joining:
                return 0
        self._polls += 1
        if self._copy:
            return self._take_copy(handler, None, None, limit, w)
        return self._take_ring(handler, None, None, limit, w, True)

    def read(self, limit: int = _ALL, kinds: list[int] | None = None) -> list[memoryview]:
        """Take every published record (at most ``limit``) and return their payloads.

        Receiver-paced, the views are the ring itself (zero copy), valid until the next :meth:`read`,
        :meth:`poll` or :meth:`release` (the records stay reserved until then); source-paced they are
        copies.  ``kinds``, when given, gets each record's kind appended.  Losses are reported as by
        :meth:`poll`.  (Keeping many views alive costs garbage-collector time: :meth:`poll` is faster.)"""
        out: list[memoryview] = []
        if self._held:
            self._release()
        w = self._q[_W_WPOS]
        if w == self._rpos or self._joining:
            self._idle()
            if w == self._rpos or self._joining:
                return out
        self._polls += 1
        if self._copy:
            self._take_copy(None, out, kinds, limit, w)
        else:
            self._take_ring(None, out, kinds, limit, w, False)
        return out

    def release(self) -> None:
        """Give back the records of the last :meth:`read` (receiver-paced: the writer may reuse them)."""
        if self._held:
            self._release()

    def _release(self) -> None:
        self._held = False
        self._q[self._wslot] = self._rpos
        if self._signal_writer:
            self._signal()

    def _signal(self) -> None:
        """Receiver-paced: after moving the read position, wake the writer if it sleeps waiting for room."""
        self._fence_lock.acquire()
        self._fence_lock.release()
        if self._q[_W_WWAIT]:
            self._wake_writer()

    def _wake_writer(self) -> None:
        sock = self._sock
        own = sock is None
        if sock is None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            sock.setblocking(False)
        try:
            _send_wake(sock, _writer_address(self.name, self.identity.owner_pid))
        finally:
            if own:
                sock.close()

    def _take_ring(
        self,
        handler: Callable[[memoryview, int], object] | None,
        out: list[memoryview] | None,
        kinds: list[int] | None,
        limit: int,
        w: int,
        release: bool,
    ) -> int:
        """Receiver-paced: deliver straight from the ring, up to two contiguous stretches (before and
        after the ring's end); ``release``: move the shared read position now (else at the next call)."""
        cap = self._cap
        p = self._rpos
        if w - p > cap or w < p:
            self._bad_position(w)
            return 0
        off = self._roff
        count = 0
        start = p
        try:
            for _ in range(2):
                oend = off + min(w - p, cap - off)
                o, n, stop = self._scan(
                    self._ring, self._rq, off, oend, oend, p - off, 0, handler, out, kinds, limit - count
                )
                count += n
                p += o - off
                off = 0 if o == cap else o
                if stop or p == w:
                    break
        finally:
            self._rpos = p
            self._roff = off
            self._records += count
            self._consumed += p - start
            if release:
                q = self._q
                q[self._wslot] = p
                q[self._b + _S_RECORDS] = self._records
                if self._signal_writer:
                    self._signal()
            else:
                self._held = True
        return count

    def _take_copy(
        self,
        handler: Callable[[memoryview, int], object] | None,
        out: list[memoryview] | None,
        kinds: list[int] | None,
        limit: int,
        w: int,
    ) -> int:
        """Source-paced: copy one contiguous stretch of what was published, check that the writer did not
        overwrite it meanwhile, then deliver from the copy.  On an overrun, report the loss and resume at
        the oldest intact record."""
        q = self._q
        cap = self._cap
        for _ in range(8):
            p = self._rpos
            if w < p:
                self._bad_position(w)
                return 0
            if w - p > cap:
                if not self._resync():
                    return 0
                w = q[_W_WPOS]
                continue
            off = self._roff
            whole = min(w - p, cap - off)
            span = whole
            if span > self._max_copy:
                # At least the first record whole (checked against the reserve after copying like the rest).
                first = ((self._rq[off >> 3] & _LEN_MASK) + 15) & -8
                span = max(self._max_copy, min(first, span))
            base = self._ring_offset + off
            assert self._mm is not None
            data = self._mm[base : base + span]
            if p < q[_W_RESERVE] - cap:  # overwritten while copying
                if not self._resync():
                    return 0
                w = q[_W_WPOS]
                continue
            view = memoryview(data)
            o = 0
            count = 0
            stop = 0
            try:
                o, count, stop = self._scan(
                    view, view.cast("Q"), 0, span, whole, p, off, handler, out, kinds, limit
                )
            finally:
                p += o
                self._rpos = p
                self._roff = 0 if off + o == cap else off + o
                self._rseq += count + (1 if stop == _STOP_EOS else 0)
                self._records += count
                self._consumed += o
                q[self._wslot] = p
                q[self._b + _S_RECORDS] = self._records
            return count
        return 0

    def _scan(
        self,
        buf: memoryview,
        words: memoryview,
        off: int,
        oend: int,
        hard_end: int,
        base_pos: int,
        ring_base: int,
        handler: Callable[[memoryview, int], object] | None,
        out: list[memoryview] | None,
        kinds: list[int] | None,
        limit: int,
    ) -> tuple[int, int, int]:
        """Deliver at most ``limit`` records of ``buf[off:oend]``: to ``handler``, or appended to ``out``
        (and their kinds to ``kinds``).  Offset ``o`` of ``buf`` is ring position ``base_pos + o`` and
        ring offset ``ring_base + o``; records may not pass ``hard_end`` (the write position or the ring's
        end), those passing ``oend`` only are left for the next call.  Returns where it stopped, how many
        records it delivered, and 0, _STOP (limit, or a record left for later) or _STOP_EOS."""
        count = 0
        if limit <= 0:
            return off, 0, _STOP
        if handler is not None:
            # Records take 8 bytes at least: when limit cannot be reached, do not count towards it.
            check = limit < (oend - off) >> 3
            while off < oend:
                h = words[off >> 3]
                a = off + 8
                n = h & 0xFFFFFFFF
                nxt = a + ((n + 7) & -8)
                if nxt > oend or h >> 32 != 1:  # 1: DATA
                    kind = self._special(h, off, nxt, oend, hard_end, base_pos, ring_base)
                    if kind == PAD:
                        off = nxt
                        continue
                    if kind == _LATER:
                        return off, count, _STOP
                    if kind == _END:
                        return nxt, count, _STOP_EOS
                    handler(buf[a : a + n], kind)
                else:
                    handler(buf[a : a + n], 1)
                off = nxt
                count += 1
                if check and count >= limit:
                    return off, count, _STOP
            return off, count, 0
        assert out is not None
        append = out.append
        while off < oend:
            h = words[off >> 3]
            a = off + 8
            n = h & 0xFFFFFFFF
            nxt = a + ((n + 7) & -8)
            kind = h >> 32
            if nxt > oend or kind != 1:  # 1: DATA
                kind = self._special(h, off, nxt, oend, hard_end, base_pos, ring_base)
                if kind == PAD:
                    off = nxt
                    continue
                if kind == _LATER:
                    return off, count, _STOP
                if kind == _END:
                    return nxt, count, _STOP_EOS
            append(buf[a : a + n])
            if kinds is not None:
                kinds.append(kind)
            off = nxt
            count += 1
            if count >= limit:
                return off, count, _STOP
        return off, count, 0

    def _special(
        self, h: int, off: int, nxt: int, oend: int, hard_end: int, base_pos: int, ring_base: int
    ) -> int:
        """A record that is not data within ``oend``: returns PAD (skip it), another kind to deliver,
        _LATER (it passes the end of a partial copy: read it next time) or _END (the end-of-session record:
        sets :attr:`end_of_session`, which the caller passes).  A broken record raises
        :class:`SegmentCorruptError` naming its position."""
        kind = h >> 32
        pos = base_pos + off
        if nxt > hard_end:
            raise SegmentCorruptError(
                self.path, f"record length at position {pos}", h & _LEN_MASK,
                f"at most {hard_end - off - 8}: records end by the ring's end and the write position",
            )  # fmt: skip
        if kind == PAD:
            if ring_base + nxt != self._cap:
                raise SegmentCorruptError(
                    self.path, f"padding length at position {pos}", h & _LEN_MASK,
                    f"{self._cap - ring_base - off - 8} (padding reaches the ring's end)",
                )  # fmt: skip
            return PAD
        if nxt > oend:
            return _LATER
        if kind == EOS:
            self._eos = "closed"
            return _END
        if kind > 255:
            raise SegmentCorruptError(self.path, f"record kind at position {pos}", kind, "0 to 255")
        return int(kind)

    def _resync(self) -> bool:
        """Source-paced overrun: find the oldest record the writer has not overwritten (from the block
        index), report the records skipped as a :class:`Loss` and resume there.  False: try again later."""
        q = self._q
        cap = self._cap
        shift = self._shift
        for _ in range(64):
            lo = q[_W_RESERVE] - cap
            w = q[_W_WPOS]
            if self._rpos >= lo and w - self._rpos <= cap:
                return True
            b = (lo + (1 << shift) - 1) >> shift
            found = -1
            seq = 0
            while (b << shift) < w:
                e = self._ix + 2 * (b % self._entries)
                p1 = q[e]
                s = q[e + 1]
                if p1 == q[e] and p1 != 0:
                    cand = p1 - 1
                    if cand >= w:
                        break
                    if cand >= (b << shift):
                        found = cand
                        seq = s
                        break
                b += 1
            if found < 0 or found < q[_W_RESERVE] - cap:
                continue
            lost = seq - self._rseq
            if lost < 0:
                raise SegmentCorruptError(
                    self.path, "index entry sequence number", seq, f"at least the reader's {self._rseq}"
                )
            if lost:
                loss = Loss(self._rseq, lost, self._rpos, found)
                self._losses += 1
                self._lost += lost
                q[self._b + _S_LOST] = self._lost
                if self.on_loss is not None:
                    self.on_loss(loss)
                else:
                    self.losses.append(loss)
            self._rpos = found
            self._roff = found % cap
            self._rseq = seq
            q[self._wslot] = found
            return True
        return False

    def _bad_position(self, w: int) -> None:
        q = self._q
        if q[self._b + _S_STATE] != _ACTIVE or q[self._b + _S_GEN] != self._gen:
            self._eos = "evicted"
            return
        raise SegmentCorruptError(
            self.path, "write position", w,
            f"within {self._cap} bytes after this reader's position {self._rpos} (receiver-paced)",
        )  # fmt: skip

    def _idle(self) -> int:
        """Nothing published: activation (receiver-paced joining), end of session, a dead writer."""
        q = self._q
        if self._joining and q[self._b + _S_STATE] == _ACTIVE and q[self._b + _S_GEN] == self._gen:
            self._rpos = q[self._wslot]
            self._roff = self._rpos % self._cap
            self._joining = False
            self._acked = True
        if (
            self._eos is None
            and (q[_W_STATE] == _CLOSED or self._writer_dead)
            and (q[_W_WPOS] == self._rpos or self._joining)
        ):
            self._eos = "closed" if q[_W_STATE] == _CLOSED else "writer died"
        return 0

    # -- waiting ---------------------------------------------------------------------------------------

    def available(self) -> bool:
        """Whether :meth:`poll` has something to do now (records, the end of session, activation)."""
        q = self._q
        if self._joining:
            return bool(q[self._b + _S_STATE] == _ACTIVE or q[_W_STATE] == _CLOSED or self._writer_dead)
        return bool(
            q[_W_WPOS] != self._rpos or self._eos is not None or q[_W_STATE] == _CLOSED or self._writer_dead
        )

    def fileno(self) -> int:
        """The wake-up socket to select on between :meth:`arm` and :meth:`disarm` (pend mode only)."""
        if self._sock is None:
            raise ConfigError(
                "a busy_wait reader has no wake-up socket", option="mode", value=self.mode, allowed="pend"
            )
        return self._sock.fileno()

    def arm(self) -> float:
        """Announce that this reader goes to sleep (pend mode).  Returns 0.0 when it must not (records
        arrived meanwhile: poll), else how long it may sleep at most (seconds) before polling again.

        The protocol: the reader makes its slot's sleep counter odd, fences, then looks at the write
        position; the writer stores the write position, fences, then looks at the counters and sends a
        1-byte datagram to each sleeper it has not woken yet.  One of them sees the other's store."""
        if self._sock is None:
            raise ConfigError("only a pend reader sleeps", option="mode", value=self.mode, allowed="pend")
        if self._held:
            self._release()
        self._sleep = (self._sleep + 1) & 0xFFFF
        self._h16[_H_SLEEP + self._slot] = self._sleep
        self._fence_lock.acquire()
        self._fence_lock.release()
        q = self._q
        if not self._acked:
            self._acked = q[_W_ACK] >= self._join_ctl
        if self.available():
            self.disarm()
            return 0.0
        if self._acked:
            return self._liveness
        # Until the writer acknowledged this reader's join, a publish racing with it may not wake it:
        # sleep briefly, longer each time (the writer acknowledges at its next publish).
        self._unacked_sleep = min(2 * self._unacked_sleep, self._liveness)
        return self._unacked_sleep

    def disarm(self) -> None:
        """Back from sleep (or not going): make the sleep counter even and drop queued wake-ups."""
        if self._sleep & 1:
            self._sleep = (self._sleep + 1) & 0xFFFF
            self._h16[_H_SLEEP + self._slot] = self._sleep
        if self._sock is not None:
            _drain(self._sock)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until :meth:`poll` has something to do; False when ``timeout`` seconds passed first.

        Busy-wait readers spin; pend readers poll ``linger`` times then sleep on their wake-up socket.
        While waiting, the writer's liveness is checked every ``liveness_interval``: a dead writer ends
        the session (after what it published is read)."""
        if self.available():
            return True
        q = self._q
        q[self._b + _S_ACTIVITY] += 1
        now = time.monotonic()
        deadline = None if timeout is None else now + timeout
        next_check = now + self._liveness
        if self._sock is None:
            spins = 0
            while True:
                if self.available():
                    return True
                spins += 1
                if spins & 1023 == 0:
                    now = time.monotonic()
                    if now >= next_check:
                        next_check = now + self._liveness
                        self.check_writer()
                    elif deadline is not None and now >= deadline:
                        return False
        for _ in range(self._linger):
            if self.available():
                return True
        while True:
            now = time.monotonic()
            if now >= next_check:
                next_check = now + self._liveness
                if not self.check_writer():
                    return True
            if deadline is not None and now >= deadline:
                return False
            most = self.arm()
            if most == 0.0:
                return True
            block = min(most, next_check - now)
            if deadline is not None:
                block = min(block, deadline - now)
            self._sleeps += 1
            self._poller.poll(max(0, int(block * 1000) + 1))
            self.disarm()
            if self.available():
                return True

    def check_writer(self) -> bool:
        """Whether the writer is still writing: False once it closed the session or died (its pid gone
        or reused, its lock released).  A dead writer ends the session once everything it published has
        been read (``end_of_session`` becomes ``writer died``)."""
        if self._writer_dead or self._q[_W_STATE] == _CLOSED:
            return False
        ident = self.identity
        if holder_alive(self._fd, _LOCK_OWNER, ident.owner_pid, ident.owner_start_time):
            return True
        if self._q[_W_STATE] != _CLOSED:  # a clean close may have just happened
            self._writer_dead = True
            self._idle()
        return False

    def heartbeat(self) -> None:
        """Bump this reader's activity counter (receiver monitoring shows it)."""
        self._q[self._b + _S_ACTIVITY] += 1

    # -- state -----------------------------------------------------------------------------------------

    @property
    def end_of_session(self) -> str | None:
        """None while the session lasts; then why it ended: ``closed`` (the writer closed it),
        ``writer died``, or ``evicted`` (the writer freed this reader's slot)."""
        return self._eos

    @property
    def slot(self) -> int:
        return self._slot

    @property
    def position(self) -> int:
        """The read position (bytes of the ring consumed since the segment was created)."""
        return self._rpos

    def lag(self) -> int:
        """Bytes published and not yet taken."""
        return max(0, self._q[_W_WPOS] - self._rpos)

    def statistics(self) -> ReaderStatistics:
        """A snapshot of the counters (see :class:`ReaderStatistics`)."""
        return ReaderStatistics(
            self._records, self._consumed, self._losses, self._lost, self._sleeps, self._polls
        )

    def close(self) -> None:
        """Leave the slot (the writer stops pacing on this reader) and unmap the segment."""
        if self._closed:
            return
        self._closed = True
        q = self._q
        try:
            _setlk(self._fd, _LOCK_TABLE, True)
            try:
                if q[self._b + _S_GEN] == self._gen and q[self._b + _S_STATE] != _FREE:
                    q[self._b + _S_RECORDS] = self._records
                    _clear_slot(q, self._b)
                    q[_W_CTL] += 1
            finally:
                _unlk(self._fd, _LOCK_TABLE)
            if self._sleep & 1:
                self.disarm()
            if self._signal_writer and q[_W_WWAIT]:
                self._wake_writer()
        finally:
            self._teardown()

    def _teardown(self) -> None:
        self._closed = True
        if self._sock is not None:
            self._sock.close()
        _release_views(self, ("_rq", "_ring", "_h16", "_q", "_mv"))
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:  # views handed out are still alive: the mapping goes with the last one
                pass
        os.close(self._fd)

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
