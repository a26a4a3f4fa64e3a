"""``openum tr-monitor`` as a real process watching real LBMR datagrams on loopback (CLI.md).

Each test starts ``python -m openum tr-monitor`` with its own resolver port (multicast group
224.9.10.11 on 127.0.0.1, or a unicast port range and a fake lbmrd), waits for the readiness line on
stderr, sends datagrams built with :mod:`openum.wire.lbmr` from a real UDP socket and reads the lines
the monitor prints.  Every wait has a timeout; the fixture terminates (then kills) what it started.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from openum.wire.lbmr import (
    TMR_LEAVE,
    ContextInfo,
    ContextInfoFlags,
    CostOption,
    LateJoinOption,
    LbmrPacket,
    LbtipcTransport,
    LbtrmTransport,
    LbtruTransport,
    ResolutionRequestFlags,
    ResolverKeepalive,
    TcpTransport,
    TopicInfo,
    TopicManagement,
    TopicManagementRecord,
    TopicQuery,
    TopicResolution,
    TopicResolutionRequest,
    WildcardQuery,
    WildcardResolution,
    decode_packet,
    encode_packet,
)

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="multicast on loopback needs Linux"
)

GROUP = "224.9.10.11"
START_TIMEOUT = 20.0
LINE_TIMEOUT = 10.0
EXIT_TIMEOUT = 20.0


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env() -> dict[str, str]:
    # no LBM_* variables from the caller's environment: the test owns the whole configuration
    env = {k: v for k, v in os.environ.items() if not k.startswith("LBM_")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _options(*lines: str) -> list[str]:
    out: list[str] = []
    for line in lines:
        out += ["--option", line]
    return out


class Monitor:
    """A running ``openum tr-monitor``; reader threads queue its stdout and stderr lines."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "openum", "tr-monitor", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
        )
        self.out: queue.Queue[str | None] = queue.Queue()
        self.err: queue.Queue[str | None] = queue.Queue()
        self.err_lines: list[str] = []
        self.out_lines: list[str] = []
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._readers = [
            threading.Thread(
                target=self._read, args=(self.proc.stdout, self.out, self.out_lines), daemon=True
            ),
            threading.Thread(
                target=self._read, args=(self.proc.stderr, self.err, self.err_lines), daemon=True
            ),
        ]
        for t in self._readers:
            t.start()

    @staticmethod
    def _read(stream: Any, into: queue.Queue[str | None], keep: list[str]) -> None:
        for line in stream:
            keep.append(line.rstrip("\n"))
            into.put(line.rstrip("\n"))
        into.put(None)

    def _next(self, q: queue.Queue[str | None], timeout: float, what: str) -> str:
        try:
            line = q.get(timeout=timeout)
        except queue.Empty:
            line = None
        if line is None:
            q.put(None)  # stay at end of file for the next wait
            stderr = "\n".join(self.err_lines)
            raise AssertionError(f"no {what} within {timeout} s; stderr so far:\n{stderr}")
        return line

    def wait_stderr(self, pattern: str, timeout: float = START_TIMEOUT) -> re.Match[str]:
        """The next stderr line matching ``pattern``."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            line = self._next(self.err, max(0.0, deadline - time.monotonic()), f"stderr line {pattern!r}")
            match = regex.search(line)
            if match:
                return match

    def next_line(self, timeout: float = LINE_TIMEOUT) -> str:
        return self._next(self.out, timeout, "stdout line")

    def next_json(self, timeout: float = LINE_TIMEOUT) -> dict[str, Any]:
        obj = json.loads(self.next_line(timeout))
        assert isinstance(obj, dict)
        return obj

    def finish(self, sig: int | None = None, timeout: float = EXIT_TIMEOUT) -> int:
        """Send ``sig`` (or just wait for ``--duration``); the exit status once the output is read."""
        if sig is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout)
        for t in self._readers:
            t.join(timeout)
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


Starter = Callable[..., Monitor]


@pytest.fixture
def start_monitor() -> Iterator[Starter]:
    started: list[Monitor] = []

    def start(*args: str) -> Monitor:
        mon = Monitor(*args)
        started.append(mon)
        return mon

    yield start
    for mon in started:
        mon.close()


def run_monitor(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "openum", "tr-monitor", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(),
        check=False,
    )


def multicast_sender() -> socket.socket:
    """A UDP socket sending to the resolver group on loopback only (TTL 0)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 0)
    return sock


def start_multicast(start_monitor: Starter, *extra: str) -> tuple[Monitor, int]:
    port = free_udp_port()
    mon = start_monitor(
        *extra,
        *_options(
            f"context resolver_multicast_address {GROUP}",
            f"context resolver_multicast_port {port}",
            "context resolver_multicast_interface 127.0.0.1",
        ),
    )
    mon.wait_stderr(rf"tr-monitor: listening on {re.escape(GROUP)}:{port} via 127\.0\.0\.1")
    return mon, port


def _name(sock: socket.socket) -> str:
    host, port = sock.getsockname()
    return f"{host}:{port}"


# ---- multicast mode


def test_multicast_tirs_queries_malformed_and_summary(start_monitor: Starter) -> None:
    mon, port = start_multicast(start_monitor, "--json", "--duration", "120")
    with multicast_sender() as tx:
        sender = _name(tx)
        # one datagram: one TQR then three TIRs -> four lines, in datagram order
        packet = LbmrPacket(
            TopicResolution(
                queries=(TopicQuery("Quotes"),),
                infos=(
                    TopicInfo(
                        "Orders",
                        7,
                        TcpTransport("127.0.0.1", 14371, 0x1234ABCD),
                        options=(CostOption(5), LateJoinOption("127.0.0.1", 14371)),
                    ),
                    TopicInfo(
                        "Market/US/IBM",
                        8,
                        LbtrmTransport("127.0.0.1", "224.10.10.10", 0xE0679ABB, 14400, 14390),
                    ),
                    TopicInfo("Ipc", 9, LbtipcTransport(0x7F000001, 0x6481F8D4, 20000)),
                ),
            )
        )
        before = time.time()
        tx.sendto(encode_packet(packet), (GROUP, port))
        tqr = mon.next_json()
        assert tqr["kind"] == "TQR" and tqr["topic"] == "Quotes" and tqr["sender"] == sender
        assert tqr["transport"] is None and tqr["source"] is None
        assert before - 60 < tqr["time"] < time.time() + 60

        tcp = mon.next_json()
        assert tcp == {
            "time": tcp["time"],
            "kind": "TIR",
            "topic": "Orders",
            "transport": "tcp",
            "source": "TCP:127.0.0.1:14371:1234abcd[7]",
            "sender": sender,
            "topic_index": 7,
            "options": ["cost", "late_join"],
        }
        rm = mon.next_json()
        assert (rm["kind"], rm["topic"], rm["transport"]) == ("TIR", "Market/US/IBM", "lbtrm")
        assert rm["source"] == "LBTRM:127.0.0.1:14390:e0679abb:224.10.10.10:14400[8]"
        assert rm["options"] == [] and rm["topic_index"] == 8
        ipc = mon.next_json()
        assert (ipc["transport"], ipc["source"]) == ("lbtipc", "LBT-IPC:6481f8d4:20000[9]")

        tx.sendto(
            encode_packet(LbmrPacket(WildcardResolution(queries=(WildcardQuery("^Ord.*"),)))), (GROUP, port)
        )
        wtqr = mon.next_json()
        assert wtqr["kind"] == "WTQR" and wtqr["pattern"] == "^Ord.*" and "topic" not in wtqr
        assert wtqr["sender"] == sender

        tx.sendto(b"\x00\x01\x00", (GROUP, port))  # shorter than the LBMR header
        bad = mon.next_json()
        assert bad["kind"] == "MALFORMED" and bad["sender"] == sender and bad["size"] == 3
        assert "shorter than its 4-byte header" in bad["error"]

        # still alive after the garbage
        tx.sendto(encode_packet(LbmrPacket(TopicResolution(queries=(TopicQuery("After"),)))), (GROUP, port))
        assert mon.next_json()["topic"] == "After"

    assert mon.finish(signal.SIGINT) == 0
    summary = json.loads(mon.out_lines[-1])
    assert summary["kind"] == "SUMMARY"
    assert summary["datagrams"] == 4 and summary["malformed"] == 1
    assert summary["records"] == {"TIR": 3, "TQR": 2, "WTQR": 1}
    assert summary["topics"] == 5 and summary["patterns"] == 1
    text = mon.wait_stderr(
        r"tr-monitor: (\d+) datagram\(s\) in [0-9.]+ s, (\d+) malformed; records: (.*)$", 1
    )
    assert text.groups() == ("4", "1", "3 TIR, 2 TQR, 1 WTQR; 5 distinct topic(s), 1 distinct pattern(s)")


def test_human_format_other_kinds_and_sigterm(start_monitor: Starter) -> None:
    mon, port = start_multicast(start_monitor)
    header = mon.next_line()
    assert header.split() == ["TIME", "KIND", "TOPIC/PATTERN", "TRANSPORT", "SOURCE", "SENDER"]
    with multicast_sender() as tx:
        sender = _name(tx)
        records = [
            LbmrPacket(
                TopicResolution(infos=(TopicInfo("Ru", 3, LbtruTransport("127.0.0.1", 14380, None)),))
            ),
            LbmrPacket(TopicManagement((TopicManagementRecord("Orders", TMR_LEAVE),))),
            LbmrPacket(
                TopicResolutionRequest(ResolutionRequestFlags.ADVERTISEMENT | ResolutionRequestFlags.QUERY)
            ),
            LbmrPacket(ContextInfo(ContextInfoFlags.QUERY, name="ctxA")),
            LbmrPacket(ResolverKeepalive()),  # multicast mode prints keepalives: they are unusual there
        ]
        for packet in records:
            tx.sendto(encode_packet(packet), (GROUP, port))
        lines = [mon.next_line() for _ in records]
    stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d"
    for line in lines:
        assert re.match(stamp + " ", line), line
        assert sender in line
    # aligned columns: every field starts where the header's does
    starts = [header.index(h) for h in ("KIND", "TOPIC/PATTERN", "TRANSPORT", "SOURCE", "SENDER")]
    tir = lines[0]
    assert [tir[s:].split()[0] for s in starts] == ["TIR", "Ru", "lbtru", "LBT-RU:127.0.0.1:14380[3]", sender]
    assert [lines[1][s:].split()[0] for s in starts] == ["TMR", "Orders", "-", "-", sender]
    assert lines[1].rstrip().endswith("leave")
    assert lines[2][starts[0] :].startswith("TR-REQUEST") and lines[2].endswith("advertisement,query")
    assert lines[3][starts[0] :].startswith("CONTEXT-INFO") and "query name=ctxA" in lines[3]
    assert lines[4][starts[0] :].startswith("KEEPALIVE")

    assert mon.finish(signal.SIGTERM) == 0
    mon.wait_stderr(r"5 datagram\(s\) .* 0 malformed; records: 1 CONTEXT-INFO, 1 KEEPALIVE, 1 TIR, 1 TMR", 1)
    assert not any(line.startswith("{") for line in mon.out_lines), "no JSON without --json"


def test_duration_ends_the_run(start_monitor: Starter) -> None:
    mon, _ = start_multicast(start_monitor, "--json", "--duration", "0.3")
    assert mon.finish() == 0
    assert [json.loads(line)["kind"] for line in mon.out_lines] == ["SUMMARY"]
    mon.wait_stderr(r"tr-monitor: 0 datagram\(s\) in 0\.[0-9] s, 0 malformed; records: none", 1)


# ---- unicast mode (a fake lbmrd)


def test_unicast_keepalives_register_with_the_daemon_and_forwarded_tirs_print(start_monitor: Starter) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as daemon:
        daemon.bind(("127.0.0.1", 0))
        daemon.settimeout(LINE_TIMEOUT)
        dport = daemon.getsockname()[1]
        low = free_udp_port()
        mon = start_monitor(
            "--json",
            "--duration",
            "120",
            *_options(
                f"context resolver_unicast_daemon 127.0.0.1:{dport}",
                f"context resolver_unicast_port_low {low}",
                f"context resolver_unicast_port_high {low}",
                "context resolver_unicast_keepalive_interval 50",
                "context source_includes_topic_index 0",
            ),
        )
        ready = mon.wait_stderr(
            r"listening on 127\.0\.0\.1:(\d+) \(unicast\), keepalives to 127\.0\.0\.1:(\d+)"
        )
        assert ready.groups() == (str(low), str(dport))

        # the monitor registers itself with keepalives, repeated every interval
        for _ in range(2):
            data, client = daemon.recvfrom(65535)
            assert client == ("127.0.0.1", low)
            assert isinstance(decode_packet(data).body, ResolverKeepalive)

        # lbmrd answers keepalives with keepalives (not printed), then forwards other clients' TR
        daemon.sendto(encode_packet(LbmrPacket(ResolverKeepalive())), client)
        tir = TopicInfo("Orders", 42, LbtruTransport("127.0.0.1", 14380, None))
        daemon.sendto(encode_packet(LbmrPacket(TopicResolution(infos=(tir,)))), client)
        line = mon.next_json()
        assert line["kind"] == "TIR", "the daemon's keepalive must not be printed"
        assert line["source"] == "LBT-RU:127.0.0.1:14380", "source_includes_topic_index 0: no [idx]"
        assert line["topic_index"] == 42
        assert line["sender"] == f"127.0.0.1:{dport}"

    assert mon.finish(signal.SIGTERM) == 0
    summary = json.loads(mon.out_lines[-1])
    assert summary["records"] == {"KEEPALIVE": 1, "TIR": 1}
    assert summary["keepalives_not_shown"] == 1 and summary["datagrams"] == 2
    mon.wait_stderr(r"1 keepalive\(s\) not shown", 1)


def test_show_keepalives_prints_the_daemons_answers(start_monitor: Starter) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as daemon:
        daemon.bind(("127.0.0.1", 0))
        daemon.settimeout(LINE_TIMEOUT)
        low = free_udp_port()
        mon = start_monitor(
            "--json",
            "--show-keepalives",
            "--duration",
            "120",
            *_options(
                f"context resolver_unicast_daemon 127.0.0.1:{daemon.getsockname()[1]}",
                f"context resolver_unicast_port_low {low}",
                f"context resolver_unicast_port_high {low}",
            ),
        )
        mon.wait_stderr(r"\(unicast\)")
        _, client = daemon.recvfrom(65535)
        daemon.sendto(encode_packet(LbmrPacket(ResolverKeepalive())), client)
        assert mon.next_json()["kind"] == "KEEPALIVE"
    assert mon.finish(signal.SIGTERM) == 0


# ---- errors


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (_options("context resolver_multicast_port notaport"), "resolver_multicast_port"),
        (_options("context no_such_option 1"), "no_such_option"),
        (["--duration", "-1"], "--duration"),
        (["--duration", "soon"], "--duration"),
        (
            _options("context resolver_multicast_interface no-such-device0"),
            "context resolver_multicast_interface: interface 'no-such-device0'",
        ),
    ],
)
def test_bad_usage_or_configuration_exits_2(args: list[str], message: str) -> None:
    result = run_monitor(*args)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert result.stdout == ""


def test_multicast_port_taken_exclusively_exits_1() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as blocker:
        blocker.bind(("0.0.0.0", 0))  # no SO_REUSEADDR: nobody else may bind this port
        port = blocker.getsockname()[1]
        result = run_monitor("--duration", "5", *_options(f"context resolver_multicast_port {port}"))
    assert result.returncode == 1, result.stderr
    assert f"cannot bind UDP {GROUP}:{port}" in result.stderr
    assert "in use" in result.stderr


def test_multicast_join_on_a_foreign_interface_exits_1() -> None:
    port = free_udp_port()
    result = run_monitor(
        "--duration",
        "5",
        *_options(
            f"context resolver_multicast_port {port}", "context resolver_multicast_interface 192.0.2.1"
        ),
    )
    assert result.returncode == 1, result.stderr
    assert f"cannot join multicast group {GROUP} on interface 192.0.2.1" in result.stderr


def test_unicast_port_range_in_use_exits_1() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as blocker:
        blocker.bind(("127.0.0.1", 0))
        port = blocker.getsockname()[1]
        result = run_monitor(
            "--duration",
            "5",
            *_options(
                "context resolver_unicast_daemon 127.0.0.1:15380",
                f"context resolver_unicast_port_low {port}",
                f"context resolver_unicast_port_high {port}",
            ),
        )
    assert result.returncode == 1, result.stderr
    assert f"cannot bind a UDP port on 127.0.0.1 in {port}" in result.stderr


def test_help_names_the_flags() -> None:
    result = run_monitor("--help")
    assert result.returncode == 0
    for flag in ("--json", "--duration", "--show-keepalives", "--option", "--config"):
        assert flag in result.stdout
