"""``bench/hotpath_bench.py`` runs each of its modes to the end and checks what it measured.

The bench is how the profiling passes of issue 7 measure the hot paths (docs/performance.md), so it must
keep working: each run ends only when the receiver's callback has seen every message in order (the bench
exits non-zero otherwise).  Small counts: this checks that it works, not how fast.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "hotpath_bench.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize(
    ("mode", "transport"),
    [("receive", "tcp"), ("receive", "lbtrm"), ("send", "tcp"), ("roundtrip", "lbtru")],
)
def test_a_mode_delivers_every_message_and_reports_a_rate(mode: str, transport: str) -> None:
    # 5,000 messages: LBT-RM's receive sends 193 datagrams, three windows of 64 and a short last one
    count = "5000" if mode != "roundtrip" else "200"
    proc = _run(mode, "--transport", transport, "--count", count, "--runs", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["count"] == int(count)
    assert result[mode]["median_msgs_per_sec"] > 0
    assert len(result[mode]["all"]) == 1


def test_a_transport_a_mode_cannot_run_over_is_refused() -> None:
    proc = _run("receive", "--transport", "lbtru", "--count", "10")
    assert proc.returncode == 2
    assert "receive runs over tcp or lbtrm, not lbtru" in proc.stderr
