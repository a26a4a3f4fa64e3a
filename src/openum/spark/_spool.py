"""The on-disk spool of the openum Spark stream reader: messages delivered but not yet committed.

The reader's receiver appends every delivered message here, on the context thread, before Spark has
seen it.  Spark's offsets name positions in the spool (the count of messages delivered since the spool
was reset), so a micro-batch planned before a failure or a restart is read again, byte for byte, from
the same records; ``commit`` deletes what Spark will never ask for again.

Layout of a spool directory::

    lock                      flock()ed by the one process using the spool (its pid inside)
    index.json                {"version", "spool" (random id), "committed" (last committed offset)}
    status.json               the reader's live status (rewritten about every second; informational)
    <position:020d>.seg       segments of records (:mod:`openum.spark._spool_format`)

Failures (docs/spark.md, "When the spool's disk fails"): reopening keeps every intact record of a
damaged segment and names the positions lost (:class:`Damage`); a batch containing lost positions
fails with :class:`SpoolDataLossError` unless ``failOnDataLoss`` is false, when they are skipped and
counted.  A lost ``index.json`` is rebuilt from the segments (their headers carry the spool id); the
spool never deletes a segment it did not commit.  A write the disk refuses (a short write, ``ENOSPC``,
any ``OSError``) is undone (the file is cut back to its last whole record), the spool is marked
broken, every later message is counted as not spooled, and :meth:`Spool.latest` raises
:class:`SpoolDiskFullError`: no offset covering a record that is not on disk is ever returned.

Durability (``spoolFsync``): every record is handed to the operating system with one ``write`` as it is
delivered, so a crash of the Python process or of Spark loses nothing that was spooled.  ``batch`` (the
default) also ``fsync``\\ s the segments before an offset covering them is returned to Spark, so what
Spark's offset log names survives a machine crash too; ``always`` fsyncs every record (slow); ``none``
leaves it to the operating system.

Size (``maxSpoolBytes``): when the segments would grow past the limit, ``block`` (the default) makes
:meth:`Spool.append` wait until a commit frees space.  The receiving context thread then stops reading
its sockets, and TCP flow control slows the publishers (receiver-paced sources block, or raise
``WouldBlock`` when sending non-blocking).  ``fail`` drops the message instead and makes the next
:meth:`Spool.latest` raise :class:`SpoolFullError`, which fails the query with a message saying what to
change.  Segments are deleted whole, once every record in them is committed.

Pure Python (no pyspark); one process at a time (the lock); appends from one thread, the rest from
another.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import threading
import time
import uuid
import zlib
from array import array
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

from openum.spark._spool_format import (
    LOST,
    RECORD_HEADER,
    SEGMENT_HEADER,
    Damage,
    Record,
    ScannedSegment,
    SpoolError,
    decode_records,
    encode_body,
    frame,
    scan_segment,
    segment_header,
    stream_key,
)

__all__ = [
    "OFFSET_VERSION",
    "Damage",
    "Record",
    "Spool",
    "SpoolDataLossError",
    "SpoolDiskFullError",
    "SpoolError",
    "SpoolFullError",
    "decode_records",
    "encode_body",
    "make_offset",
    "stream_key",
]

OFFSET_VERSION: Final = 1
MIN_SEGMENT: Final = 64 << 10
MAX_SEGMENT: Final = 64 << 20
LOCK_RETRY: Final = 0.1
LOST_KEY: Final = (1 << 32) - 1

log = logging.getLogger("openum.spark")


class SpoolFullError(SpoolError):
    """The spool reached ``maxSpoolBytes`` with ``spoolFullPolicy`` ``fail``: messages were dropped."""


class SpoolDiskFullError(SpoolFullError):
    """The spool's file system refused a write (full, over quota, an I/O error): the spool stopped
    storing messages, and Spark gets no offset past what is on disk."""


class SpoolDataLossError(SpoolError):
    """A batch covers messages that were lost to damage in a segment (``failOnDataLoss`` true)."""


def make_offset(spool_id: str, position: int, streams: Mapping[str, int]) -> dict[str, Any]:
    """An offset as deterministic JSON: sorted keys at every level, only ints and strings."""
    return {
        "messages": int(position),
        "spool": spool_id,
        "streams": {k: int(streams[k]) for k in sorted(streams)},
        "v": OFFSET_VERSION,
    }


def _ranges(positions: list[int]) -> str:
    """``3..5, 9`` for [3, 4, 5, 9]."""
    out: list[str] = []
    i = 0
    while i < len(positions):
        j = i
        while j + 1 < len(positions) and positions[j + 1] == positions[j] + 1:
            j += 1
        out.append(f"{positions[i]}" if i == j else f"{positions[i]}..{positions[j]}")
        i = j + 1
    return ", ".join(out)


class _Segment:
    """One segment file and, in memory, where each position's record starts and which stream it is
    (``LOST`` / ``LOST_KEY`` for a position whose record was lost to damage)."""

    __slots__ = ("damage", "fd", "first", "garbage", "keys", "offsets", "path", "size")

    def __init__(self, path: Path, first: int, fd: int | None, size: int) -> None:
        self.path = path
        self.first = first
        self.fd = fd  # open while this is the active segment (or until it is fsynced)
        self.size = size
        self.offsets = array("Q")  # byte offset of each position's record
        self.keys = array("I")  # stream id of each position's record
        self.garbage: list[tuple[int, int]] = []  # byte ranges holding no intact record
        self.damage: list[Damage] = []

    @property
    def end(self) -> int:
        return self.first + len(self.offsets)

    def byte_at(self, index: int) -> int:
        """Where the first intact record at or after ``index`` starts (the file's end if none)."""
        offsets = self.offsets
        while index < len(offsets) and offsets[index] == LOST:
            index += 1
        return offsets[index] if index < len(offsets) else self.size

    def pieces(self, begin: int, stop: int) -> list[tuple[int, int]]:
        """The byte range ``[begin, stop)`` without its damaged bytes."""
        out: list[tuple[int, int]] = []
        cur = begin
        for g0, g1 in self.garbage:
            if g1 <= cur or g0 >= stop:
                continue
            if g0 > cur:
                out.append((cur, g0))
            cur = max(cur, g1)
        if cur < stop:
            out.append((cur, stop))
        return out


class Spool:
    """An append-only spool of delivered messages in ``directory`` (see the module docstring)."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        max_bytes: int = 1 << 30,
        full_policy: str = "block",
        fsync: str = "batch",
        segment_bytes: int | None = None,
        lock_timeout: float = 15.0,
        fail_on_data_loss: bool = True,
        write: Callable[[int, bytes], int] = os.write,
    ) -> None:
        self.dir = Path(directory)
        self.max_bytes = max_bytes
        self.full_policy = full_policy
        self.fsync = fsync
        self.fail_on_data_loss = fail_on_data_loss
        self.segment_bytes = segment_bytes or max(MIN_SEGMENT, min(MAX_SEGMENT, max_bytes // 8))
        self._write = write
        self._cond = threading.Condition(threading.Lock())
        self._closed = False
        self._segments: list[_Segment] = []
        self._key_ids: dict[str, int] = {}
        self._key_names: list[str] = []
        self._bytes = 0
        self._dropped = 0
        self._blocked_ns = 0
        self._blocked_since: int | None = None
        self._dir_dirty = False
        self._unsynced: list[_Segment] = []
        self._disk_error: str | None = None
        self._disk_dropped = 0
        self._skipped_upto = 0
        self._skipped = 0
        #: What reopening found damaged (segments keep their intact records).
        self.damage: list[Damage] = []
        #: Whether index.json was missing and rebuilt from the segments.
        self.index_rebuilt = False
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SpoolError(f"cannot create the spool directory {self.dir}: {exc.strerror or exc}") from None
        self._lock_fd = self._lock(lock_timeout)
        try:
            self._load()
        except BaseException:
            os.close(self._lock_fd)
            raise

    # -- opening ---------------------------------------------------------------------------------------
    def _lock(self, timeout: float) -> int:
        fd = os.open(self.dir / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    os.close(fd)
                    raise
                if time.monotonic() >= deadline:
                    holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
                    os.close(fd)
                    raise SpoolError(
                        f"the spool directory {self.dir} is in use by another process (pid {holder}): "
                        "another query with the same topic/pattern and configuration is running. Give "
                        "each query its own spool with the option spoolDir"
                    ) from None
                time.sleep(LOCK_RETRY)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return fd

    def _load(self) -> None:
        index = self._read_index()
        scanned: list[tuple[Path, ScannedSegment]] = []
        for path in sorted(self.dir.glob("*.seg")):
            found = scan_segment(path, path.read_bytes())
            if found is None:
                path.unlink()  # shorter than its header: created by a crash, holds no record
                continue
            scanned.append((path, found))
        ids = sorted({found.spool_id for _, found in scanned})
        if index is None:
            if not scanned:
                self.spool_id = uuid.uuid4().hex[:16]
                self.committed: dict[str, Any] = make_offset(self.spool_id, 0, {})
                self._write_index()
                self._next = 0
                return
            if len(ids) > 1:
                raise SpoolError(
                    f"the spool index {self.dir / 'index.json'} is missing and the segments in {self.dir} "
                    f"belong to {len(ids)} different spools ({', '.join(ids)}): openum cannot tell which "
                    "is this query's. Move the foreign segments away (openum deletes none) and restart"
                )
            # Lost index: rebuilt from the segments, deleting nothing.  The committed position is
            # taken as the first one still spooled (Spark's checkpoint knows the real one).
            self.spool_id = ids[0]
            self.committed = make_offset(self.spool_id, scanned[0][1].first, {})
            self.index_rebuilt = True
            log.warning(
                "openum spool %s: index.json was missing; rebuilt it from %d segment(s) of spool %s",
                self.dir,
                len(scanned),
                self.spool_id,
            )
        else:
            self.spool_id = str(index["spool"])
            self.committed = index["committed"]
            foreign = [path.name for path, found in scanned if found.spool_id != self.spool_id]
            if foreign:
                raise SpoolError(
                    f"spool segment(s) {', '.join(foreign)} in {self.dir} belong to another spool than "
                    f"its index.json ({self.spool_id}): the directory was changed by hand. Move them "
                    "away (openum deletes none) and restart"
                )
        self._next = int(self.committed["messages"])
        for i, (path, found) in enumerate(scanned):
            nxt = scanned[i + 1][1].first if i + 1 < len(scanned) else None
            self._add_scanned(path, found, nxt)
        if self._segments:
            self._next = self._segments[-1].end
        for dmg in self.damage:
            (log.info if dmg.torn or (dmg.lost == 0 and dmg.last is not None) else log.error)(
                "openum spool %s: %s", self.dir, dmg.describe()
            )
        if self.index_rebuilt:
            self._write_index()

    def _add_scanned(self, path: Path, found: ScannedSegment, next_first: int | None) -> None:
        """Index a scanned segment; lost positions get ``LOST`` entries, so positions stay those Spark's
        offsets name."""
        if self._segments and found.first != self._segments[-1].end:
            raise SpoolError(
                f"spool segment {path.name} starts at message {found.first}, but the one before it ends "
                f"at {self._segments[-1].end}: the spool directory {self.dir} was changed by hand"
            )
        seg = _Segment(path, found.first, None, found.size)
        expect = found.first
        for position, offset, key in zip(found.positions, found.offsets, found.keys, strict=True):
            while expect < position:
                seg.offsets.append(LOST)
                seg.keys.append(LOST_KEY)
                expect += 1
            seg.offsets.append(offset)
            seg.keys.append(self._key_id(key))
            expect = position + 1
        damage = list(found.damage)
        if damage and damage[-1].last is None and next_first is not None:
            # Damage at the end of a segment that is not the last: the next segment says how many.
            tail = damage[-1]
            damage[-1] = Damage(tail.segment, tail.start, tail.end, tail.first, next_first - 1, tail.torn)
        known_end = max((d.last + 1 for d in damage if d.last is not None), default=seg.end)
        while seg.end < known_end:  # lost records at the end of the segment
            seg.offsets.append(LOST)
            seg.keys.append(LOST_KEY)
        seg.garbage = [(d.start, d.end) for d in damage if d.end > d.start]
        seg.damage = damage
        self.damage.extend(damage)
        self._segments.append(seg)
        self._bytes += seg.size

    def _read_index(self) -> dict[str, Any] | None:
        try:
            data = json.loads((self.dir / "index.json").read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise SpoolError(
                f"the spool index {self.dir / 'index.json'} is unreadable: {exc}. Delete that file (not "
                "the segments): the next start rebuilds it from the segments"
            ) from None
        if data.get("version") != OFFSET_VERSION or "spool" not in data or "committed" not in data:
            raise SpoolError(
                f"{self.dir / 'index.json'} is not an openum spool index of version {OFFSET_VERSION}"
            )
        return dict(data)

    def _write_index(self) -> None:
        data = {"committed": self.committed, "spool": self.spool_id, "version": OFFSET_VERSION}
        tmp = self.dir / "index.json.tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as out:
                json.dump(data, out, sort_keys=True, separators=(",", ":"))
                out.flush()
                if self.fsync != "none":
                    os.fsync(out.fileno())
            os.replace(tmp, self.dir / "index.json")
            if self.fsync != "none":
                self._sync_dir()
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            raise SpoolError(
                f"cannot write the spool index {self.dir / 'index.json'}: {exc.strerror or exc}"
                + (" (the file system is full)" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else "")
            ) from None

    def _key_id(self, key: str) -> int:
        kid = self._key_ids.get(key)
        if kid is None:
            kid = self._key_ids[key] = len(self._key_names)
            self._key_names.append(key)
        return kid

    def reset(self) -> dict[str, Any]:
        """Forget everything (a query starting without a checkpoint); returns the new initial offset."""
        with self._cond:
            for seg in self._segments:
                if seg.fd is not None:
                    os.close(seg.fd)
                seg.path.unlink(missing_ok=True)
            self._segments.clear()
            self._unsynced.clear()
            self._key_ids.clear()
            self._key_names.clear()
            self._bytes = 0
            self._next = 0
            self._dropped = 0
            self._skipped_upto = 0
            self.spool_id = uuid.uuid4().hex[:16]
            self.committed = make_offset(self.spool_id, 0, {})
            self._write_index()
            self._cond.notify_all()
            return dict(self.committed)

    # -- appending (the receiving thread) ----------------------------------------------------------
    def append(self, key: str, body: bytes) -> bool:
        """Spool one record; False when it was not spooled (``fail`` policy, a disk that refused the
        write, or the spool is closed), and counted."""
        need = len(body) + RECORD_HEADER.size
        body_crc = zlib.crc32(body)
        with self._cond:
            if self._disk_error is not None:
                self._disk_dropped += 1
                return False
            while self._bytes > 0 and self._bytes + need > self.max_bytes:
                if self._closed:
                    return False
                if self.full_policy == "fail":
                    self._dropped += 1
                    return False
                if self._blocked_since is None:
                    self._blocked_since = time.monotonic_ns()
                self._cond.wait(0.25)
            if self._closed:
                return False
            if self._blocked_since is not None:
                self._blocked_ns += time.monotonic_ns() - self._blocked_since
                self._blocked_since = None
            position = self._next
            try:
                seg = self._active_segment(need)
                assert seg.fd is not None
                self._write_all(seg, frame(position, body, body_crc))
            except OSError as exc:
                self._disk_failed(exc, position)
                return False
            seg.offsets.append(seg.size)
            seg.keys.append(self._key_id(key))
            seg.size += need
            self._bytes += need
            self._next += 1
            return True

    def _write_all(self, seg: _Segment, data: bytes) -> None:
        """Write (and for ``always`` fsync) a whole record, or cut the file back and raise."""
        assert seg.fd is not None
        try:
            written = self._write(seg.fd, data)
            if written != len(data):
                raise OSError(
                    errno.ENOSPC, f"short write: {written} of {len(data)} bytes (the file system is full)"
                )
            if self.fsync == "always":
                os.fsync(seg.fd)
        except OSError:
            with contextlib.suppress(OSError):  # cutting a file back needs no space
                os.ftruncate(seg.fd, seg.size)
            raise

    def _disk_failed(self, exc: OSError, position: int) -> None:
        """The file system refused a write: stop spooling (the caller holds the lock)."""
        free = ""
        with contextlib.suppress(OSError):
            st = os.statvfs(self.dir)
            free = f"; {st.f_bavail * st.f_frsize:,} bytes free"
        self._disk_error = (
            f"writing message {position} failed: {exc.strerror or exc} [errno {exc.errno}]{free}"
        )
        self._disk_dropped += 1
        log.error("openum spool %s: %s; messages are no longer spooled", self.dir, self._disk_error)

    def _active_segment(self, need: int) -> _Segment:
        seg = self._segments[-1] if self._segments else None
        if seg is not None and seg.fd is not None and seg.size + need <= self.segment_bytes:
            return seg
        if seg is not None and seg.fd is not None:
            if seg.size == SEGMENT_HEADER.size:
                return seg  # an empty segment takes any one record
            self._unsynced.append(seg)  # closed by the next sync()
        path = self.dir / f"{self._next:020d}.seg"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        new = _Segment(path, self._next, fd, 0)
        try:
            self._write_all(new, segment_header(self._next, self.spool_id))
        except OSError:
            os.close(fd)
            with contextlib.suppress(OSError):
                path.unlink()  # our own new file, holding no record
            raise
        new.size = SEGMENT_HEADER.size
        self._segments.append(new)
        self._bytes += SEGMENT_HEADER.size
        self._dir_dirty = True
        if self.fsync == "always":
            self._sync_dir()
        elif self.fsync == "none":
            self._close_unsynced()
        return new

    def _close_unsynced(self) -> None:
        for seg in self._unsynced:
            if seg.fd is not None and seg is not self._segments[-1]:
                os.close(seg.fd)
                seg.fd = None
        self._unsynced.clear()

    def _sync_dir(self) -> None:
        fd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self._dir_dirty = False

    def sync(self) -> None:
        """Make what is spooled durable (``batch`` policy; a no-op for ``none``)."""
        if self.fsync == "none":
            return
        with self._cond:
            pending = [s.fd for s in self._unsynced if s.fd is not None]
            active = self._segments[-1].fd if self._segments else None
            dir_dirty = self._dir_dirty
            for fd in pending:
                os.fsync(fd)
            self._close_unsynced()
        if active is not None:
            try:
                os.fsync(active)
            except OSError as exc:
                if exc.errno != errno.EBADF:  # EBADF: closed meanwhile by close(), nothing to sync
                    raise
        if dir_dirty:
            self._sync_dir()

    # -- offsets (the Spark thread) --------------------------------------------------------------------
    @property
    def tail(self) -> int:
        """Messages spooled since the last reset (the position the next one gets)."""
        with self._cond:
            return self._next

    @property
    def base(self) -> int:
        """The first position still in the spool."""
        with self._cond:
            return self._segments[0].first if self._segments else self._next

    def _check_offset(self, offset: Mapping[str, Any], what: str) -> int:
        if not isinstance(offset, Mapping) or offset.get("v") != OFFSET_VERSION:
            raise SpoolError(
                f"the {what} offset {offset!r} is not an openum offset of version {OFFSET_VERSION}"
            )
        if offset.get("spool") != self.spool_id:
            raise SpoolError(
                f"the checkpoint's {what} offset belongs to spool {offset.get('spool')!r}, but {self.dir} "
                f"holds spool {self.spool_id!r}: the spool directory was deleted, replaced or changed "
                "(option spoolDir) since the checkpoint was written. Restart the query with a new "
                "checkpoint location, or point spoolDir at the spool it used"
            )
        return int(offset["messages"])

    def _check_range(self, first: int, last: int) -> None:
        base, tail = self.base, self.tail
        if first < base or last > tail:
            damaged = [d.describe() for d in self.damage if d.last is None and not d.torn]
            raise SpoolError(
                f"Spark asks for messages {first}..{last - 1} of the spool, but {self.dir} holds "
                f"{base}..{tail - 1}: "
                + (
                    f"the end of the spool was damaged ({'; '.join(damaged)})"
                    if damaged and last > tail
                    else "they were deleted (spool directory cleaned, or the messages were committed by "
                    "another query using the same spool)"
                )
            )

    def _counts(self, first: int, last: int) -> tuple[Counter[str], list[int]]:
        """Per-stream counts of the intact records in ``[first, last)``, and the lost positions there."""
        ids: Counter[int] = Counter()
        lost: list[int] = []
        with self._cond:
            for seg in self._segments:
                if seg.end <= first or seg.first >= last:
                    continue
                lo = max(first, seg.first) - seg.first
                hi = min(last, seg.end) - seg.first
                keys = seg.keys[lo:hi]
                ids.update(keys)
                if LOST_KEY in ids:
                    lost += [seg.first + lo + i for i, k in enumerate(keys) if k == LOST_KEY]
                    del ids[LOST_KEY]
            names = self._key_names
            return Counter({names[i]: n for i, n in ids.items()}), lost

    def _lost_text(self, lost: list[int]) -> str:
        hit = [
            d.describe()
            for d in self.damage
            if d.last is not None and d.lost and any(d.first <= p <= d.last for p in lost)
        ]
        where = "; ".join(hit)
        return f"messages {_ranges(lost)} ({len(lost):,}) of the spool {self.dir} were lost: {where}"

    def latest(self, start: Mapping[str, Any], max_messages: int | None = None) -> dict[str, Any]:
        """The offset after ``start`` covering what is spooled (at most ``max_messages``), made durable."""
        with self._cond:
            dropped, disk_error, disk_dropped = self._dropped, self._disk_error, self._disk_dropped
        if disk_error is not None:
            raise SpoolDiskFullError(
                f"the spool {self.dir} cannot store messages: {disk_error}. {disk_dropped:,} delivered "
                "message(s) were not spooled and are lost; Spark's offsets cover only messages on disk. "
                "Free space on that file system (or point spoolDir at a larger one, or set maxSpoolBytes "
                "below its free space), then restart the query from its checkpoint"
            )
        if dropped:
            raise SpoolFullError(
                f"the spool {self.dir} reached maxSpoolBytes ({self.max_bytes:,} bytes) and {dropped:,} "
                "message(s) were dropped (spoolFullPolicy=fail): Spark is not keeping up with the message "
                "rate. Give Spark more resources or a shorter trigger interval, raise maxSpoolBytes, or use "
                "spoolFullPolicy=block to slow the publishers down instead"
            )
        first = self._check_offset(start, "start")
        self._check_range(first, first)
        tail = self.tail
        last = tail if max_messages is None else min(tail, first + max_messages)
        if last == first:
            return make_offset(self.spool_id, first, start.get("streams", {}))
        try:
            self.sync()
        except OSError as exc:
            with self._cond:
                self._disk_failed(exc, last - 1)
            return self.latest(start, max_messages)  # raises SpoolDiskFullError
        counts = Counter({k: int(v) for k, v in start.get("streams", {}).items()})
        counts.update(self._counts(first, last)[0])
        return make_offset(self.spool_id, last, counts)

    def read(
        self, start: Mapping[str, Any], end: Mapping[str, Any], per_part: int
    ) -> list[tuple[int, int, bytes]]:
        """The framed records between two offsets as ``(first position, count, bytes)`` runs of at most
        ``per_part`` positions; checks that the per-stream counts match the offsets.  Positions lost to
        damage raise :class:`SpoolDataLossError`, or with ``fail_on_data_loss`` false are left out and
        counted (``skipped_records``)."""
        first = self._check_offset(start, "start")
        last = self._check_offset(end, "end")
        if last <= first:
            return []
        self._check_range(first, last)
        expected = Counter({k: int(v) for k, v in end.get("streams", {}).items()})
        expected.subtract({k: int(v) for k, v in start.get("streams", {}).items()})
        counts, lost = self._counts(first, last)
        if lost and self.fail_on_data_loss:
            raise SpoolDataLossError(
                f"{self._lost_text(lost)}. Spark asks for messages {first}..{last - 1}. Set the option "
                "failOnDataLoss to false to go on without the lost messages (they are counted in "
                "status.json as spool.skipped_records)"
            )
        expected.subtract(counts)
        if any(v < 0 for v in expected.values()) or expected.total() > len(lost):
            raise SpoolError(
                f"the spool {self.dir} does not hold the messages the checkpoint recorded for positions "
                f"{first}..{last - 1} (per-stream counts differ): it is not the spool this query used"
            )
        if lost:
            with self._cond:
                new = [p for p in lost if p >= self._skipped_upto]
                self._skipped += len(new)
                self._skipped_upto = max(self._skipped_upto, last)
            if new:
                log.error("openum spool: skipping (failOnDataLoss=false): %s", self._lost_text(new))
        with self._cond:
            plan = list(self._segments)
        runs: list[tuple[int, int, bytes]] = []
        pos = first
        while pos < last:
            count = min(per_part, last - pos)
            chunks: list[bytes] = []
            for seg in plan:
                seg_end = seg.end
                if seg_end <= pos or seg.first >= pos + count:
                    continue
                lo = pos - seg.first if pos > seg.first else 0
                hi = min(pos + count, seg_end) - seg.first
                with open(seg.path, "rb") as f:
                    for b0, b1 in seg.pieces(seg.byte_at(lo), seg.byte_at(hi)):
                        f.seek(b0)
                        chunks.append(f.read(b1 - b0))
            intact = count - sum(1 for p in lost if pos <= p < pos + count)
            runs.append((pos, intact, b"".join(chunks)))
            pos += count
        return runs

    def commit(self, end: Mapping[str, Any]) -> int:
        """Spark will not ask for anything before ``end`` again: record it and delete whole segments
        before it.  Returns the number of segments deleted."""
        last = self._check_offset(end, "committed")
        if last < int(self.committed["messages"]):
            return 0
        with self._cond:
            self.committed = make_offset(self.spool_id, last, end.get("streams", {}))
        self._write_index()
        removed = 0
        with self._cond:
            while len(self._segments) > 1 and self._segments[0].end <= last:
                seg = self._segments.pop(0)
                if seg.fd is not None:
                    os.close(seg.fd)
                    seg.fd = None
                if seg in self._unsynced:
                    self._unsynced.remove(seg)
                seg.path.unlink(missing_ok=True)
                self._bytes -= seg.size
                removed += 1
            if removed:
                self._dir_dirty = True
                self._cond.notify_all()
        return removed

    # -- status and closing ----------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """The spool's counters (``status.json``'s ``spool``; docs/spark.md names each)."""
        with self._cond:
            blocked = self._blocked_ns
            if self._blocked_since is not None:
                blocked += time.monotonic_ns() - self._blocked_since
            return {
                "spool": self.spool_id,
                "bytes": self._bytes,
                "max_bytes": self.max_bytes,
                "segments": len(self._segments),
                "base": self._segments[0].first if self._segments else self._next,
                "tail": self._next,
                "committed": int(self.committed["messages"]),
                "dropped": self._dropped,
                "blocked": self._blocked_since is not None,
                "blocked_seconds": round(blocked / 1e9, 3),
                "disk_full": self._disk_error is not None,
                "disk_error": self._disk_error,
                "disk_dropped": self._disk_dropped,
                "lost_records": sum(d.lost for d in self.damage),
                "damaged_segments": len({d.segment for d in self.damage if not d.torn}),
                "skipped_records": self._skipped,
                "index_rebuilt": self.index_rebuilt,
            }

    def close(self) -> None:
        """Wake a blocked :meth:`append` (it then drops its record), sync, release the lock."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        with contextlib.suppress(OSError):
            self.sync()
        with self._cond:
            for seg in self._segments:
                if seg.fd is not None:
                    os.close(seg.fd)
                    seg.fd = None
            self._unsynced.clear()
        os.close(self._lock_fd)

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
