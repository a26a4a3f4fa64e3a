"""The on-disk spool of the openum Spark stream reader: messages delivered but not yet committed.

The reader's receiver appends every delivered message here, on the context thread, before Spark has
seen it.  Spark's offsets name positions in the spool (the count of messages delivered since the spool
was reset), so a micro-batch planned before a failure or a restart is read again, byte for byte, from
the same records; ``commit`` deletes what Spark will never ask for again.

Layout of a spool directory::

    lock                      flock()ed by the one process using the spool (its pid inside)
    index.json                {"version", "spool" (random id), "committed" (last committed offset)}
    status.json               the reader's live status (rewritten about every second; informational)
    <position:020d>.seg       segments: a 16-byte header (magic "OUMSPL01", u64 first position), then
                              records back to back

A record is ``u32 body length, u32 CRC-32 of the body, body`` (big-endian); a body is
``i64 receive time (ns since the epoch), u64 topic sequence number, u16 topic length, u16 source length,
u32 properties length``, then the topic, the source string, the properties (a JSON object of strings,
empty when the message had none) and the payload (the rest).  Reopening a spool checks every record's
CRC and cuts off a torn last record (a crash in the middle of a write).

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
import os
import struct
import threading
import time
import uuid
import zlib
from array import array
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

__all__ = [
    "OFFSET_VERSION",
    "Record",
    "Spool",
    "SpoolError",
    "SpoolFullError",
    "decode_records",
    "encode_body",
    "make_offset",
    "stream_key",
]

MAGIC: Final = b"OUMSPL01"
SEGMENT_HEADER: Final = struct.Struct(">8sQ")
RECORD_HEADER: Final = struct.Struct(">II")
BODY_HEADER: Final = struct.Struct(">qQHHI")
OFFSET_VERSION: Final = 1
MIN_SEGMENT: Final = 64 << 10
MAX_SEGMENT: Final = 64 << 20
LOCK_RETRY: Final = 0.1


class SpoolError(RuntimeError):
    """The spool cannot serve what Spark asks for (lost, foreign or locked spool directory)."""


class SpoolFullError(SpoolError):
    """The spool reached ``maxSpoolBytes`` with ``spoolFullPolicy`` ``fail``: messages were dropped."""


@dataclass(frozen=True, slots=True)
class Record:
    """One spooled message."""

    topic: str
    source: str
    sequence_number: int
    receive_ns: int
    payload: bytes
    properties: dict[str, str] | None


def stream_key(topic: str, source: str) -> str:
    """The name of a stream (one topic from one source) in offsets: ``topic@source``."""
    return f"{topic}@{source}"


def make_offset(spool_id: str, position: int, streams: Mapping[str, int]) -> dict[str, Any]:
    """An offset as deterministic JSON: sorted keys at every level, only ints and strings."""
    return {
        "messages": int(position),
        "spool": spool_id,
        "streams": {k: int(streams[k]) for k in sorted(streams)},
        "v": OFFSET_VERSION,
    }


def encode_body(
    topic: bytes, source: bytes, sequence_number: int, receive_ns: int, payload: bytes, props: bytes
) -> bytes:
    """A record body from already-encoded strings (the receive path caches topic/source bytes)."""
    return (
        BODY_HEADER.pack(receive_ns, sequence_number, len(topic), len(source), len(props))
        + topic
        + source
        + props
        + payload
    )


def _frame(body: bytes) -> bytes:
    return RECORD_HEADER.pack(len(body), zlib.crc32(body)) + body


def decode_records(blob: bytes) -> Iterator[Record]:
    """Every record of a run of framed records (what :meth:`Spool.read` returns); checks CRCs."""
    view = memoryview(blob)
    pos, end = 0, len(blob)
    unpack_rec, unpack_body = RECORD_HEADER.unpack_from, BODY_HEADER.unpack_from
    rec_size, body_size = RECORD_HEADER.size, BODY_HEADER.size
    while pos < end:
        length, crc = unpack_rec(view, pos)
        start = pos + rec_size
        body = view[start : start + length]
        if len(body) != length or zlib.crc32(body) != crc:
            raise SpoolError(f"spooled record at byte {pos} of a partition is damaged (CRC mismatch)")
        receive_ns, sqn, tlen, slen, plen = unpack_body(body, 0)
        p = body_size
        topic = str(body[p : p + tlen], "utf-8")
        p += tlen
        source = str(body[p : p + slen], "utf-8")
        p += slen
        props = json.loads(bytes(body[p : p + plen])) if plen else None
        p += plen
        yield Record(topic, source, sqn, receive_ns, bytes(body[p:]), props)
        pos = start + length


class _Segment:
    """One segment file and, in memory, where each of its records starts and which stream it is."""

    __slots__ = ("fd", "first", "keys", "offsets", "path", "size")

    def __init__(self, path: Path, first: int, fd: int | None, size: int) -> None:
        self.path = path
        self.first = first
        self.fd = fd  # open while this is the active segment (or until it is fsynced)
        self.size = size
        self.offsets = array("Q")  # byte offset of each record
        self.keys = array("I")  # stream id of each record

    @property
    def end(self) -> int:
        return self.first + len(self.offsets)


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
    ) -> None:
        self.dir = Path(directory)
        self.max_bytes = max_bytes
        self.full_policy = full_policy
        self.fsync = fsync
        self.segment_bytes = segment_bytes or max(MIN_SEGMENT, min(MAX_SEGMENT, max_bytes // 8))
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
        if index is None:
            self.spool_id = uuid.uuid4().hex[:16]
            self.committed: dict[str, Any] = make_offset(self.spool_id, 0, {})
            for path in self.dir.glob("*.seg"):
                path.unlink()
            self._write_index()
            self._next = 0
            return
        self.spool_id = str(index["spool"])
        self.committed = index["committed"]
        self._next = int(self.committed["messages"])
        for path in sorted(self.dir.glob("*.seg")):
            self._scan(path)
        if self._segments:
            self._next = self._segments[-1].end

    def _read_index(self) -> dict[str, Any] | None:
        try:
            data = json.loads((self.dir / "index.json").read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise SpoolError(f"the spool index {self.dir / 'index.json'} is unreadable: {exc}") from None
        if data.get("version") != OFFSET_VERSION or "spool" not in data or "committed" not in data:
            raise SpoolError(
                f"{self.dir / 'index.json'} is not an openum spool index of version {OFFSET_VERSION}"
            )
        return dict(data)

    def _write_index(self) -> None:
        data = {"committed": self.committed, "spool": self.spool_id, "version": OFFSET_VERSION}
        tmp = self.dir / "index.json.tmp"
        with open(tmp, "w", encoding="utf-8") as out:
            json.dump(data, out, sort_keys=True, separators=(",", ":"))
            out.flush()
            if self.fsync != "none":
                os.fsync(out.fileno())
        os.replace(tmp, self.dir / "index.json")
        if self.fsync != "none":
            self._sync_dir()

    def _scan(self, path: Path) -> None:
        """Rebuild a segment's in-memory index; a torn last record (a crash mid-write) is cut off."""
        data = path.read_bytes()
        if len(data) < SEGMENT_HEADER.size:
            path.unlink()
            return
        magic, first = SEGMENT_HEADER.unpack_from(data, 0)
        if magic != MAGIC:
            raise SpoolError(f"{path} is not an openum spool segment")
        if self._segments and first != self._segments[-1].end:
            raise SpoolError(
                f"spool segment {path.name} starts at message {first}, but the one before it ends at "
                f"{self._segments[-1].end}: the spool directory {self.dir} was changed by hand"
            )
        seg = _Segment(path, first, None, SEGMENT_HEADER.size)
        pos = SEGMENT_HEADER.size
        view = memoryview(data)
        while pos + RECORD_HEADER.size <= len(data):
            length, crc = RECORD_HEADER.unpack_from(view, pos)
            body = view[pos + RECORD_HEADER.size : pos + RECORD_HEADER.size + length]
            if len(body) != length or zlib.crc32(body) != crc:
                break
            _, _, tlen, slen, _ = BODY_HEADER.unpack_from(body, 0)
            p = BODY_HEADER.size
            key = stream_key(str(body[p : p + tlen], "utf-8"), str(body[p + tlen : p + tlen + slen], "utf-8"))
            seg.offsets.append(pos)
            seg.keys.append(self._key_id(key))
            pos += RECORD_HEADER.size + length
        if pos < len(data):
            with open(path, "r+b") as f:
                f.truncate(pos)
        seg.size = pos
        self._segments.append(seg)
        self._bytes += pos

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
            self.spool_id = uuid.uuid4().hex[:16]
            self.committed = make_offset(self.spool_id, 0, {})
            self._write_index()
            self._cond.notify_all()
            return dict(self.committed)

    # -- appending (the receiving thread) ----------------------------------------------------------
    def append(self, key: str, body: bytes) -> bool:
        """Spool one record; False when it was dropped (``fail`` policy, or the spool is closed)."""
        framed = _frame(body)
        with self._cond:
            while self._bytes > 0 and self._bytes + len(framed) > self.max_bytes:
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
            seg = self._active_segment(len(framed))
            assert seg.fd is not None
            os.write(seg.fd, framed)
            seg.offsets.append(seg.size)
            seg.keys.append(self._key_id(key))
            seg.size += len(framed)
            self._bytes += len(framed)
            self._next += 1
            if self.fsync == "always":
                os.fsync(seg.fd)
            return True

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
        os.write(fd, SEGMENT_HEADER.pack(MAGIC, self._next))
        new = _Segment(path, self._next, fd, SEGMENT_HEADER.size)
        self._segments.append(new)
        self._bytes += SEGMENT_HEADER.size
        self._dir_dirty = True
        if self.fsync == "always":
            os.fsync(fd)
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
            with contextlib.suppress(OSError):  # closed meanwhile by close(): nothing left to sync
                os.fsync(active)
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
            raise SpoolError(
                f"Spark asks for messages {first}..{last - 1} of the spool, but {self.dir} holds "
                f"{base}..{tail - 1}: they were deleted (spool directory cleaned, or the messages were "
                "committed by another query using the same spool)"
            )

    def _counts(self, first: int, last: int) -> Counter[str]:
        ids: Counter[int] = Counter()
        with self._cond:
            for seg in self._segments:
                if seg.end <= first or seg.first >= last:
                    continue
                lo = max(first, seg.first) - seg.first
                hi = min(last, seg.end) - seg.first
                ids.update(seg.keys[lo:hi])
            names = self._key_names
            return Counter({names[i]: n for i, n in ids.items()})

    def latest(self, start: Mapping[str, Any], max_messages: int | None = None) -> dict[str, Any]:
        """The offset after ``start`` covering what is spooled (at most ``max_messages``), made durable."""
        with self._cond:
            dropped = self._dropped
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
        self.sync()
        counts = Counter({k: int(v) for k, v in start.get("streams", {}).items()})
        counts.update(self._counts(first, last))
        return make_offset(self.spool_id, last, counts)

    def read(
        self, start: Mapping[str, Any], end: Mapping[str, Any], per_part: int
    ) -> list[tuple[int, int, bytes]]:
        """The framed records between two offsets as ``(first position, count, bytes)`` runs of at most
        ``per_part`` records; checks that the per-stream counts match the offsets."""
        first = self._check_offset(start, "start")
        last = self._check_offset(end, "end")
        if last <= first:
            return []
        self._check_range(first, last)
        expected = Counter({k: int(v) for k, v in end.get("streams", {}).items()})
        expected.subtract({k: int(v) for k, v in start.get("streams", {}).items()})
        if +expected != self._counts(first, last):
            raise SpoolError(
                f"the spool {self.dir} does not hold the messages the checkpoint recorded for positions "
                f"{first}..{last - 1} (per-stream counts differ): it is not the spool this query used"
            )
        with self._cond:
            plan = [(s.path, s.first, s.end, s.size, s.offsets) for s in self._segments]
        runs: list[tuple[int, int, bytes]] = []
        pos = first
        while pos < last:
            count = min(per_part, last - pos)
            chunks: list[bytes] = []
            for path, seg_first, seg_end, seg_size, offsets in plan:
                if seg_end <= pos or seg_first >= pos + count:
                    continue
                lo = pos - seg_first if pos > seg_first else 0
                hi = min(pos + count, seg_end) - seg_first
                begin = offsets[lo]
                stop = offsets[hi] if hi < len(offsets) else seg_size
                with open(path, "rb") as f:
                    f.seek(begin)
                    chunks.append(f.read(stop - begin))
            runs.append((pos, count, b"".join(chunks)))
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
