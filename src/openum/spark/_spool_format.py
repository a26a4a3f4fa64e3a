"""The Spark reader spool's file format: record framing, and reading a segment back with recovery.

A segment is a 32-byte header (magic ``OUMSPL02``, u64 first position, the 16-character spool id),
then records back to back.  A record is ``u32 body length, u32 CRC-32, u64 position, body``
(big-endian); the CRC covers the body followed by the 8 position bytes, so a record says where it
belongs in the spool on its own.  A body is ``i64 receive time (ns since the epoch), u64 topic
sequence number, u16 topic length, u16 source length, u32 properties length``, then the topic, the
source string, the properties (a JSON object of strings, empty when the message had none) and the
payload (the rest).

Recovery (:func:`scan_segment`) keeps every intact record, as Kafka's log recovery does: after a
damaged record it resynchronises on the next valid frame (a plausible length and position, and a
matching CRC) instead of cutting the segment off there.  The positions carried by the records name
exactly which messages were lost between two intact ones.  A torn last record (a crash in the middle
of a write) is recognised as such: its frame says it is longer than what is left of the file.
"""

from __future__ import annotations

import itertools
import json
import struct
import zlib
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

MAGIC: Final = b"OUMSPL02"
OLD_MAGICS: Final = (b"OUMSPL01",)
SEGMENT_HEADER: Final = struct.Struct(">8sQ16s")
RECORD_HEADER: Final = struct.Struct(">IIQ")
BODY_HEADER: Final = struct.Struct(">qQHHI")
MIN_FRAME: Final = RECORD_HEADER.size + BODY_HEADER.size
#: The offset of a position whose record was lost (in a segment's in-memory index).
LOST: Final = (1 << 64) - 1


class SpoolError(RuntimeError):
    """The spool cannot serve what Spark asks for (lost, foreign, damaged or locked spool directory)."""


@dataclass(frozen=True, slots=True)
class Record:
    """One spooled message."""

    topic: str
    source: str
    sequence_number: int
    receive_ns: int
    payload: bytes
    properties: dict[str, str] | None


@dataclass(frozen=True, slots=True)
class Damage:
    """Bytes of a segment that hold no intact record, and the spool positions they cost."""

    segment: str
    start: int  # byte range [start, end) in the segment file
    end: int
    first: int  # the first position lost
    last: int | None  # the last position lost; None when unknown (damage at the end of the last segment)
    torn: bool = False  # a record cut short at the end of the file: a crash during its write

    @property
    def lost(self) -> int:
        return 0 if self.last is None else self.last - self.first + 1

    def describe(self) -> str:
        where = f"bytes {self.start}..{self.end - 1} of segment {self.segment}"
        if self.torn:
            return f"{where}: a record torn by a crash during its write (never handed to Spark)"
        if self.last is None:
            return f"{where}: damaged; messages from position {self.first} on in it are lost"
        if self.last < self.first:
            return f"{where}: damaged, between two intact records (no message lost)"
        return f"{where}: damaged; messages {self.first}..{self.last} lost"


@dataclass(slots=True)
class ScannedSegment:
    """What :func:`scan_segment` found: the intact records (position, byte offset, stream key)."""

    first: int
    spool_id: str
    size: int
    positions: array[int] = field(default_factory=lambda: array("Q"))
    offsets: array[int] = field(default_factory=lambda: array("Q"))
    keys: list[str] = field(default_factory=list)
    damage: list[Damage] = field(default_factory=list)


def stream_key(topic: str, source: str) -> str:
    """The name of a stream (one topic from one source) in offsets: ``topic@source``."""
    return f"{topic}@{source}"


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


def record_crc(body_crc: int, position: int) -> int:
    """The CRC of a record from the CRC-32 of its body (computed outside the spool's lock)."""
    return zlib.crc32(position.to_bytes(8, "big"), body_crc)


def frame(position: int, body: bytes, body_crc: int | None = None) -> bytes:
    crc = record_crc(zlib.crc32(body) if body_crc is None else body_crc, position)
    return RECORD_HEADER.pack(len(body), crc, position) + body


def segment_header(first: int, spool_id: str) -> bytes:
    return SEGMENT_HEADER.pack(MAGIC, first, spool_id.encode("ascii"))


def decode_records(blob: bytes) -> Iterator[Record]:
    """Every record of a run of framed records (what ``Spool.read`` returns); checks CRCs."""
    view = memoryview(blob)
    pos, end = 0, len(blob)
    unpack_rec, unpack_body = RECORD_HEADER.unpack_from, BODY_HEADER.unpack_from
    rec_size, body_size = RECORD_HEADER.size, BODY_HEADER.size
    while pos < end:
        length, crc, position = unpack_rec(view, pos)
        start = pos + rec_size
        body = view[start : start + length]
        if len(body) != length or record_crc(zlib.crc32(body), position) != crc:
            raise SpoolError(
                f"spooled message {position} (byte {pos} of a partition) is damaged (CRC mismatch)"
            )
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


def _frame_at(view: memoryview, pos: int, lo: int, hi: int) -> tuple[int, int, str] | None:
    """``(length, position, stream key)`` of a valid record at byte ``pos`` with a position in
    ``[lo, hi)``, else None.  The cheap checks come before the CRC, so scanning bytes stays fast."""
    n = len(view)
    if pos + MIN_FRAME > n:
        return None
    length, crc, position = RECORD_HEADER.unpack_from(view, pos)
    if not lo <= position < hi or length < BODY_HEADER.size or pos + RECORD_HEADER.size + length > n:
        return None
    start = pos + RECORD_HEADER.size
    _, _, tlen, slen, plen = BODY_HEADER.unpack_from(view, start)
    if BODY_HEADER.size + tlen + slen + plen > length:
        return None
    body = view[start : start + length]
    if record_crc(zlib.crc32(body), position) != crc:
        return None
    p = BODY_HEADER.size
    try:
        key = stream_key(str(body[p : p + tlen], "utf-8"), str(body[p + tlen : p + tlen + slen], "utf-8"))
    except UnicodeDecodeError:
        return None
    return length, position, key


def _torn(view: memoryview, pos: int, expect: int) -> bool:
    """Whether the bytes from ``pos`` to the end are the start of the record ``expect``, cut short."""
    left = len(view) - pos
    if left < RECORD_HEADER.size:
        return True
    length, _, position = RECORD_HEADER.unpack_from(view, pos)
    return bool(position == expect and RECORD_HEADER.size + length > left)


def scan_segment(path: Path, data: bytes) -> ScannedSegment | None:
    """Read a segment back, keeping every intact record; None for a file too short for its header
    (a crash while creating it: it holds no record).  :class:`SpoolError` when the header is not that
    of a segment of this format (the file is left alone)."""
    if data[:8] in OLD_MAGICS:
        raise SpoolError(
            f"spool segment {path} was written by an older openum (spool format 1). Finish the query "
            "with the openum version that wrote it, or move the spool directory away and start the "
            "query with a new checkpoint location"
        )
    if len(data) < SEGMENT_HEADER.size and MAGIC.startswith(data[:8]):
        return None
    magic, first, raw_id = SEGMENT_HEADER.unpack_from(data.ljust(SEGMENT_HEADER.size, b"\0"), 0)
    named = int(path.stem) if path.stem.isdigit() else None
    if magic != MAGIC or named != first or not raw_id.isalnum():
        raise SpoolError(
            f"{path} is not an openum spool segment, or its header is damaged (magic {magic!r}, first "
            f"position {first}, file name {path.name}). Move it out of {path.parent} (openum does not "
            "delete it) and restart the query; the messages in it are then lost"
        )
    seg = ScannedSegment(first, raw_id.decode("ascii"), len(data))
    view = memoryview(data)
    pos = SEGMENT_HEADER.size
    expect = first
    hi = first + (len(data) - pos) // MIN_FRAME + 1  # no segment holds more records than this
    name = path.name
    while pos < len(data):
        found = _frame_at(view, pos, expect, hi)
        if found is None:
            # Damaged: try the damaged header's own length first (a flipped byte in a body), then every
            # following byte, for the next valid frame.
            length = RECORD_HEADER.unpack_from(view, pos)[0] if pos + RECORD_HEADER.size <= len(data) else 0
            candidates = itertools.chain(
                (pos + RECORD_HEADER.size + length,) if length else (), range(pos + 1, len(data))
            )
            resync = next(
                ((q, f) for q in candidates if (f := _frame_at(view, q, expect, hi)) is not None), None
            )
            if resync is None:
                # A damaged last record whose intact header reaches exactly to the end: only it is lost.
                whole = pos + RECORD_HEADER.size + length == len(data) and (
                    RECORD_HEADER.unpack_from(view, pos)[2] == expect
                )
                last = expect if whole else None
                seg.damage.append(Damage(name, pos, len(data), expect, last, _torn(view, pos, expect)))
                break
            q, found = resync
            seg.damage.append(Damage(name, pos, q, expect, found[1] - 1))
            pos = q
        elif found[1] != expect:  # intact bytes, but positions missing between them (never written so)
            seg.damage.append(Damage(name, pos, pos, expect, found[1] - 1))
        length, position, key = found
        seg.positions.append(position)
        seg.offsets.append(pos)
        seg.keys.append(key)
        pos += RECORD_HEADER.size + length
        expect = position + 1
    return seg
