"""The shared-memory resources openum processes created: list them, find orphans, delete them.

The library behind ``openum ipc-resources``, openum's ``lbtipc_resource_manager`` /
``lbtsmx_resource_manager`` (UM Concepts Guide, sections 6.4.9 and 6.5.10).  UM keeps a database of the
shared-memory areas and semaphores it allocated; openum needs none: every resource is a file named
``openum-...`` in ``/dev/shm`` whose header records its owner (pid and process start time) and whose
owner holds a lock on it while it lives (``docs/shared-memory-layout.md``).  A segment is *orphaned* when
that lock is free or the pid no longer names the process that created it: a ``kill -9`` leaves such
files behind.  Wake-up sockets live in Linux's abstract namespace: the kernel frees them with their
process, so they are listed (from ``/proc/net/unix``) but never left over.

:func:`list_segments` returns :class:`SegmentResource` records (``as_dict()`` for JSON,
:func:`format_table` for people); :func:`delete_segment` removes one (refusing a live one unless
forced); :func:`reclaim` removes every orphan (UM's ``-reclaim``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass

from openum.transport.shm import (
    _HEADER_BYTES,
    _LOCK_OWNER,
    _STATE_NAMES,
    _W_STATE,
    _W_WPOS,
    DEFAULT_PREFIX,
    SHM_DIR,
    SegmentCorruptError,
    SegmentError,
    SegmentIdentity,
    SegmentInUseError,
    SegmentNotFoundError,
    _locked_by_other,
    _setlk,
    parse_identity,
    process_start_time,
    receivers_of,
)

__all__ = [
    "ReceiverResource",
    "SegmentResource",
    "WakeSocket",
    "delete_segment",
    "format_table",
    "inspect_segment",
    "list_segments",
    "list_wake_sockets",
    "reclaim",
    "to_json",
]

#: What names of openum resources start with (segment names are ``<prefix>-<kind>-...``).
RESOURCE_PREFIX = DEFAULT_PREFIX + "-"
_CREATING = ".creating-"


@dataclass(frozen=True, slots=True)
class ReceiverResource:
    """A receiver slot in use: its process (``pid``, ``alive``), ``mode`` (pend/busy_wait), ``state``
    (joining/active) and ``lag`` (bytes published it has not read)."""

    slot: int
    pid: int
    alive: bool
    mode: str
    state: str
    lag: int


@dataclass(frozen=True, slots=True)
class WakeSocket:
    """A wake-up socket in the abstract namespace (``name`` without the leading NUL) and its inode."""

    name: str
    inode: int


@dataclass(frozen=True, slots=True)
class SegmentResource:
    """One openum file in the shared-memory directory.

    ``kind``: ipc, smx, or ``?`` when the header cannot be read.  ``state``: open, closed (its writer
    ended it; readers may still map it), creating (a segment being initialised), or corrupt (``problem``
    says why).  ``size``: bytes of the file.  ``owner_alive``: its creator still runs and holds it;
    ``orphaned`` is the opposite.  ``receivers``: slots in use.  ``wake_sockets``: the abstract sockets
    of its pending readers and writer.  ``created_ns``: Unix time of creation.  Fields the header could
    not give are None."""

    name: str
    path: str
    kind: str
    state: str
    size: int
    capacity: int | None
    pacing: str | None
    session_id: int | None
    transport_id: int | None
    owner_pid: int | None
    owner_alive: bool
    receivers: tuple[ReceiverResource, ...]
    wake_sockets: tuple[str, ...]
    created_ns: int | None
    problem: str | None

    @property
    def orphaned(self) -> bool:
        """Whether the process that created it is gone (nothing will write to it again)."""
        return not self.owner_alive

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready mapping (session id in hex, as UM shows it)."""
        return {
            "name": self.name,
            "path": self.path,
            "kind": self.kind,
            "state": self.state,
            "size": self.size,
            "capacity": self.capacity,
            "pacing": self.pacing,
            "session_id": None if self.session_id is None else f"{self.session_id:x}",
            "transport_id": self.transport_id,
            "owner_pid": self.owner_pid,
            "owner_alive": self.owner_alive,
            "orphaned": self.orphaned,
            "receivers": [
                {
                    "slot": r.slot,
                    "pid": r.pid,
                    "alive": r.alive,
                    "mode": r.mode,
                    "state": r.state,
                    "lag": r.lag,
                }
                for r in self.receivers
            ],
            "wake_sockets": list(self.wake_sockets),
            "created_ns": self.created_ns,
            "problem": self.problem,
        }


def _unreadable(
    name: str, path: str, size: int, state: str, alive: bool, problem: str, pid: int | None = None
) -> SegmentResource:
    return SegmentResource(
        name, path, "?", state, size, None, None, None, None, pid, alive, (), (), None, problem
    )


def _inspect_fd(fd: int, name: str, path: str, sockets: Sequence[WakeSocket]) -> SegmentResource:
    size = os.fstat(fd).st_size
    lock_held = _locked_by_other(fd, _LOCK_OWNER)
    head = os.pread(fd, _HEADER_BYTES, 0)
    try:
        ident: SegmentIdentity = parse_identity(head, size, path)
    except SegmentCorruptError as err:
        state = "creating" if _CREATING in name else "corrupt"
        pid = None
        if _CREATING in name:  # <name>.creating-<pid>-<hex>
            try:
                pid = int(name.split(_CREATING, 1)[1].split("-", 1)[0])
            except ValueError:
                pid = None
        return _unreadable(name, path, size, state, lock_held, str(err), pid)
    alive = lock_held and process_start_time(ident.owner_pid) == ident.owner_start_time
    table = os.pread(fd, ident.index_offset, 0)
    words = memoryview(table).cast("Q")
    state_code = words[_W_STATE]
    state = "creating" if _CREATING in name else _STATE_NAMES.get(state_code, "corrupt")
    problem = None if state != "corrupt" else f"state word is {state_code} (0 to 2 allowed)"
    receivers = tuple(
        ReceiverResource(r.slot, r.pid, r.alive, r.mode, r.state, r.lag)
        for r in receivers_of(words, fd, ident, words[_W_WPOS])
    )
    own = tuple(sorted(s.name for s in sockets if s.name.startswith(name + "-")))
    return SegmentResource(
        name, path, ident.kind, state, size, ident.capacity, ident.pacing, ident.session_id,
        ident.transport_id, ident.owner_pid, alive, receivers, own, ident.created_ns, problem,
    )  # fmt: skip


def inspect_segment(
    name: str, *, directory: str = SHM_DIR, sockets: Sequence[WakeSocket] | None = None
) -> SegmentResource:
    """Read one segment's header and slot table (without joining it).  Raises
    :class:`~openum.transport.shm.SegmentNotFoundError` when there is no such file."""
    _check_plain_name(name)
    path = os.path.join(directory, name)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise SegmentNotFoundError(f"no shared-memory segment {path}") from None
    try:
        return _inspect_fd(fd, name, path, list_wake_sockets() if sockets is None else sockets)
    finally:
        os.close(fd)


def list_segments(*, directory: str = SHM_DIR, prefix: str = RESOURCE_PREFIX) -> list[SegmentResource]:
    """Every file of ``directory`` whose name starts with ``prefix``, sorted by name.

    Files that vanish while being listed are skipped; unreadable ones are listed with their problem."""
    sockets = list_wake_sockets(prefix)
    out: list[SegmentResource] = []
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return out
    for name in names:
        if not name.startswith(prefix):
            continue
        path = os.path.join(directory, name)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except FileNotFoundError:
            continue
        except OSError as err:
            out.append(_unreadable(name, path, 0, "corrupt", False, f"cannot open: {err.strerror}"))
            continue
        try:
            out.append(_inspect_fd(fd, name, path, sockets))
        finally:
            os.close(fd)
    return out


def list_wake_sockets(prefix: str = RESOURCE_PREFIX) -> list[WakeSocket]:
    """The abstract Unix sockets whose names start with ``prefix`` (from ``/proc/net/unix``)."""
    out: list[WakeSocket] = []
    try:
        with open("/proc/net/unix", encoding="utf-8", errors="replace") as table:
            lines = table.read().splitlines()[1:]
    except OSError:
        return out
    for line in lines:
        fields = line.split(None, 7)
        if len(fields) == 8 and fields[7].startswith("@" + prefix):
            try:
                inode = int(fields[6])
            except ValueError:
                inode = 0
            out.append(WakeSocket(fields[7][1:], inode))
    return out


def _check_plain_name(name: str) -> None:
    if not name or "/" in name or name in (".", ".."):
        raise SegmentError(f"{name!r} is not a segment name (a file name in the shared-memory directory)")


def delete_segment(name: str, *, directory: str = SHM_DIR, force: bool = False) -> SegmentResource:
    """Unlink one segment and return what it was.

    A segment whose owner lives is refused (:class:`~openum.transport.shm.SegmentInUseError`) unless
    ``force``: its processes keep their mappings, but no reader can join it any more.  Never force while
    openum applications run (as UM warns for its resource managers)."""
    _check_plain_name(name)
    path = os.path.join(directory, name)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise SegmentNotFoundError(f"no shared-memory segment {path}") from None
    try:
        info = _inspect_fd(fd, name, path, list_wake_sockets())
        # Holding the owner lock while unlinking keeps a process that reclaims the name meanwhile from
        # losing its fresh segment to us.
        if not force and (info.owner_alive or not _setlk(fd, _LOCK_OWNER, False)):
            raise SegmentInUseError(
                f"shared-memory segment {path} belongs to a live process (pid {info.owner_pid}); "
                "stop it first, or force"
            )
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                os.unlink(path)
        except FileNotFoundError:
            pass
        return info
    finally:
        os.close(fd)


def reclaim(*, directory: str = SHM_DIR, prefix: str = RESOURCE_PREFIX) -> list[SegmentResource]:
    """Delete every orphaned segment (UM's ``-reclaim``); returns those deleted."""
    done: list[SegmentResource] = []
    for seg in list_segments(directory=directory, prefix=prefix):
        if not seg.orphaned:
            continue
        try:
            done.append(delete_segment(seg.name, directory=directory))
        except (SegmentNotFoundError, SegmentInUseError):
            continue  # gone meanwhile, or reclaimed by a new owner
    return done


def to_json(segments: Sequence[SegmentResource], indent: int | None = 2) -> str:
    """The segments as a JSON array of :meth:`SegmentResource.as_dict` objects."""
    return json.dumps([s.as_dict() for s in segments], indent=indent)


_COLUMNS = ("NAME", "KIND", "STATE", "SIZE", "SESSION", "XPORT", "PID", "OWNER", "RECEIVERS")


def format_table(segments: Sequence[SegmentResource]) -> str:
    """A plain-text table, one line per segment (``RECEIVERS``: ``slot:pid/mode`` of each, ``!`` after a
    dead one), then one line per problem."""
    rows: list[tuple[str, ...]] = [_COLUMNS]
    for s in segments:
        receivers = " ".join(
            f"{r.slot}:{r.pid}/{r.mode}{'' if r.alive else '!'}" for r in s.receivers
        )  # fmt: skip
        rows.append(
            (
                s.name, s.kind, s.state, str(s.size),
                "-" if s.session_id is None else f"{s.session_id:x}",
                "-" if s.transport_id is None else str(s.transport_id),
                "-" if s.owner_pid is None else str(s.owner_pid),
                "alive" if s.owner_alive else "ORPHANED",
                receivers or "-",
            )
        )  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    lines += [f"{s.name}: {s.problem}" for s in segments if s.problem]
    return "\n".join(lines)
