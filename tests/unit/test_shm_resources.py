"""Listing, orphan detection and deletion of shared-memory segments (openum.transport.shm_resources)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest

from openum.transport import shm, shm_resources
from openum.transport.shm import (
    SHM_DIR,
    Reader,
    SegmentError,
    SegmentInUseError,
    SegmentNotFoundError,
    Writer,
)
from openum.transport.shm_resources import delete_segment, format_table, list_segments, reclaim

pytestmark = pytest.mark.skipif(not os.path.isdir(SHM_DIR), reason="needs /dev/shm")


@pytest.fixture
def prefix() -> Iterator[str]:
    """A name prefix of this test only; whatever the test leaves in /dev/shm is removed after it."""
    value = f"openum-r{os.getpid()}-{uuid.uuid4().hex[:8]}"
    yield value
    for name in os.listdir(SHM_DIR):
        if name.startswith(value):
            os.unlink(os.path.join(SHM_DIR, name))


def test_live_segment_is_listed_with_owner_receivers_and_sockets(prefix: str) -> None:
    name = shm.segment_name("smx", 30001, 0x42792AC, prefix=prefix)
    w = Writer(name, kind="smx", capacity=8192, pacing="receiver_paced", session_id=0x42792AC,
               transport_id=30001)  # fmt: skip
    pending = Reader(name, mode="pend")
    busy = Reader(name)
    w.send(b"x")  # activates both
    (seg,) = list_segments(prefix=prefix)
    assert (seg.name, seg.kind, seg.state, seg.pacing) == (name, "smx", "open", "receiver_paced")
    assert (seg.session_id, seg.transport_id, seg.owner_pid) == (0x42792AC, 30001, os.getpid())
    assert seg.owner_alive and not seg.orphaned
    assert seg.size == os.path.getsize(os.path.join(SHM_DIR, name))
    assert [(r.slot, r.pid, r.alive, r.mode, r.state) for r in seg.receivers] == [
        (0, os.getpid(), True, "pend", "active"),
        (1, os.getpid(), True, "busy_wait", "active"),
    ]
    assert seg.receivers[0].lag == 16
    assert seg.wake_sockets == (f"{name}-r0-1", f"{name}-w{os.getpid()}")
    assert {s.name for s in shm_resources.list_wake_sockets(prefix)} == set(seg.wake_sockets)
    data = json.loads(shm_resources.to_json([seg]))
    assert data[0]["session_id"] == "42792ac" and data[0]["orphaned"] is False
    assert data[0]["receivers"][0] == {"slot": 0, "pid": os.getpid(), "alive": True, "mode": "pend",
                                       "state": "active", "lag": 16}  # fmt: skip
    table = format_table([seg])
    assert table.splitlines()[0].split() == list(shm_resources._COLUMNS)
    assert f"{name}  smx" in table and "alive" in table and "0:" in table
    assert shm_resources.inspect_segment(name).as_dict() == seg.as_dict()
    pending.close()
    busy.close()
    w.close()
    assert list_segments(prefix=prefix) == []


def test_live_segment_is_not_deleted_unless_forced(prefix: str) -> None:
    name = f"{prefix}-ipc-1-1"
    w = Writer(name, capacity=8192)
    with pytest.raises(SegmentInUseError, match="live process"):
        delete_segment(name)
    assert reclaim(prefix=prefix) == []
    assert [s.name for s in list_segments(prefix=prefix)] == [name]
    gone = delete_segment(name, force=True)
    assert gone.owner_alive
    assert list_segments(prefix=prefix) == []
    w.close()  # its file is gone already: closing still works


def test_segment_of_a_killed_process_is_orphaned_and_reclaimed(prefix: str) -> None:
    name = f"{prefix}-ipc-20001-abc"
    code = (
        "import os, sys; from openum.transport.shm import Writer; "
        f"w = Writer({name!r}, capacity=8192); w.send(b'x'); print(os.getpid(), flush=True); os._exit(0)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    pid = int(out.stdout)
    (seg,) = list_segments(prefix=prefix)
    assert seg.orphaned and seg.owner_pid == pid and seg.state == "open"
    assert "ORPHANED" in format_table([seg])
    with pytest.raises(shm.SegmentOrphanedError):
        Reader(name)
    done = reclaim(prefix=prefix)
    assert [s.name for s in done] == [name]
    assert list_segments(prefix=prefix) == []
    assert reclaim(prefix=prefix) == []


def test_corrupt_and_half_created_files_are_listed_with_their_problem(prefix: str) -> None:
    bad = os.path.join(SHM_DIR, f"{prefix}-garbage")
    with open(bad, "wb") as f:
        f.write(b"\x00" * 600)
    creating = os.path.join(SHM_DIR, f"{prefix}-ipc-1-2.creating-{os.getpid()}-abcd")
    fd = os.open(creating, os.O_RDWR | os.O_CREAT, 0o600)
    os.ftruncate(fd, 4096)
    assert shm._setlk(fd, 0, False)  # its creator holds the owner lock while it initialises the file
    segs = {s.name: s for s in list_segments(prefix=prefix)}
    garbage = segs[f"{prefix}-garbage"]
    assert (garbage.kind, garbage.state, garbage.orphaned) == ("?", "corrupt", True)
    assert garbage.problem is not None and "magic" in garbage.problem
    half = segs[os.path.basename(creating)]
    assert (half.state, half.owner_alive, half.owner_pid) == ("creating", True, os.getpid())
    assert "magic" in format_table([garbage]).splitlines()[-1]
    assert [s.name for s in reclaim(prefix=prefix)] == [f"{prefix}-garbage"]
    os.close(fd)  # the creator died: now it is an orphan too
    assert [s.name for s in reclaim(prefix=prefix)] == [os.path.basename(creating)]
    assert list_segments(prefix=prefix) == []


def test_names_are_checked_and_missing_segments_reported(prefix: str) -> None:
    with pytest.raises(SegmentError, match="not a segment name"):
        delete_segment("../passwd")
    with pytest.raises(SegmentNotFoundError):
        delete_segment(f"{prefix}-none")
    with pytest.raises(SegmentNotFoundError):
        shm_resources.inspect_segment(f"{prefix}-none")
    assert list_segments(prefix=prefix, directory=os.path.join(SHM_DIR, "no-such-dir")) == []
