"""``openum demo`` as a real process: a parent, a publisher child and a subscriber child (docs/demo.md).

Free ports keep the run away from the embedded defaults (and from other tests): the resolver's
multicast port and the TCP transport range are given with ``--option``, which the demo must hand to its
children (the publisher's TCP ports show that it did).  Every wait has a timeout.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys

import pytest

from tests.integration.test_lbmrd_process import free_udp_port

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="loopback multicast on Linux")

RUN_TIMEOUT = 60


def free_tcp_range(size: int = 20) -> tuple[int, int]:
    """A TCP port range starting at a free port (the transport skips ports that are taken)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        low = int(s.getsockname()[1])
    low = min(low, 65535 - size + 1)
    return low, low + size - 1


def run_demo(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "openum", "demo", *args],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        env=env,
        check=False,
    )


@pytest.mark.slow
def test_demo_runs_publisher_and_wildcard_subscriber_with_zero_gaps() -> None:
    low, high = free_tcp_range()
    result = run_demo(
        "--duration",
        "4",
        "--rate",
        "2000",
        "--symbols",
        "5",
        "--seed",
        "11",
        "--json",
        "--option",
        f"context resolver_multicast_port {free_udp_port()}",
        "--option",
        f"context transport_tcp_port_low {low}",
        "--option",
        f"context transport_tcp_port_high {high}",
    )
    output = f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.returncode == 0, output
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, output  # --json: stdout is the summary alone; the relayed lines go to stderr
    summary = json.loads(lines[-1])
    assert summary["ok"] is True, output
    assert summary["problems"] == []
    assert summary["topics"] == summary["topics_expected"] == 3 * 5
    assert summary["gaps"] == 0
    assert summary["missing"] == 0
    assert summary["messages"] > 0
    assert summary["messages"] == summary["sent"]
    assert summary["unrecoverable_loss"] == summary["unrecoverable_loss_burst"] == 0
    assert summary["bad_ticks"] == summary["property_errors"] == 0
    assert set(summary["per_venue"]) == {"NYSE", "NASDAQ", "ARCA"}
    assert all(v["topics"] == 5 for v in summary["per_venue"].values())
    assert sum(v["messages"] for v in summary["per_venue"].values()) == summary["messages"]
    assert summary["top"][0]["symbol"] == "AAPL"
    assert all(t["vwap"] is None or t["vwap"] > 0 for t in summary["top"])
    # Both children ran, and the publisher listened on the TCP range given to the parent.
    assert "[sub] " in result.stderr
    assert "[pub] " in result.stderr
    ports = re.search(r"\[pub\] 15 sources .* TCP transport sessions \(([\d, ]+)\)", result.stderr)
    assert ports is not None, output
    assert all(low <= int(p) <= high for p in ports.group(1).split(", ")), output
    assert re.search(r"\[sub\] +\d+\.\ds +[\d,]+ msgs/s  topics \d+/15  gaps 0", result.stderr), output


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["lbtrm", "lbtru"])
def test_demo_over_the_reliable_udp_transports(transport: str) -> None:
    from tests.integration.pubsub import Ports

    ports = Ports.allocate()
    argv = ["--duration", "3", "--rate", "2000", "--symbols", "4", "--seed", "5", "--json"]
    result = run_demo(*argv, "--transport", transport, *ports.argv())
    output = f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.returncode == 0, output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["ok"] is True and summary["gaps"] == 0, output
    assert summary["topics"] == 12 and summary["messages"] == summary["sent"] > 0, output
    kind = {"lbtrm": "LBT-RM", "lbtru": "LBT-RU"}[transport]
    assert re.search(rf"\[pub\] 12 sources .* on \d+ {kind} transport sessions", result.stderr), output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--symbols", "0"], "--symbols: must be 1-100"),
        (["--venues", "NYSE,NYSE"], "venues repeat"),
        (["--rate", "-5"], "--rate: must be a positive number"),
        (["--option", "context no_such_option 1"], "no_such_option"),
        (["--transport", "carrier-pigeon"], "invalid choice: 'carrier-pigeon'"),
    ],
)
def test_demo_bad_usage_exits_2_before_starting_anything(args: list[str], message: str) -> None:
    result = run_demo(*args)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert "[pub]" not in result.stdout + result.stderr
