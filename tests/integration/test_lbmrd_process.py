"""``openum lbmrd`` as a real process with real UDP clients on loopback (spec 06 PART C; CLI.md).

Each test starts the daemon with ``python -m openum lbmrd -p PORT`` on a free port, waits for its
start-up log line on stderr, then talks to it from UDP sockets bound to 127.0.0.1 or, for NAT, to
127.0.1.x and 127.0.2.x (Linux routes all of 127/8 to the loopback interface).  Every wait has a
timeout; processes are terminated (then killed) by the fixture.
"""

from __future__ import annotations

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
from pathlib import Path

import pytest

from openum.wire.lbmr import (
    LbmrPacket,
    ResolverKeepalive,
    TcpTransport,
    TopicInfo,
    TopicQuery,
    TopicResolution,
    decode_packet,
    encode_packet,
)
from tests.helpers import wait_until

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="127/8 client addresses need Linux"
)

START_TIMEOUT = 20.0
STARTED = r"started: listening on 127\.0\.0\.1:(\d+)"

KEEPALIVE = encode_packet(LbmrPacket(ResolverKeepalive()))


def tir(ip: str, port: int, topic: str = "Orders") -> bytes:
    return encode_packet(
        LbmrPacket(TopicResolution(infos=(TopicInfo(topic, 7, TcpTransport(ip, port, 0x1234ABCD)),)))
    )


def tqr(topic: str) -> bytes:
    return encode_packet(LbmrPacket(TopicResolution(queries=(TopicQuery(topic),))))


def free_udp_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_lbmrd(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "openum", "lbmrd", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_env(),
        check=False,
    )


class LbmrdProcess:
    """A running ``openum lbmrd``; its stderr lines are collected by a reader thread."""

    def __init__(self, *args: str, port: int | None = None) -> None:
        self.port = free_udp_port() if port is None else port
        self.address = ("127.0.0.1", self.port)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "openum", "lbmrd", "-p", str(self.port), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
        )
        self.lines: list[str] = []
        self._new: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))
            self._new.put(line.rstrip("\n"))
        self._new.put(None)

    def wait_for(self, pattern: str, timeout: float = 10.0) -> re.Match[str]:
        """The first line from now on matching ``pattern``; AssertionError after ``timeout``."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                line = self._new.get(timeout=left) if left > 0 else None
            except queue.Empty:
                line = None
            if line is None:
                if self._reader.is_alive() is False:
                    self._new.put(None)  # stay at end of file for the next wait
                log = "\n".join(self.lines)
                raise AssertionError(f"no line matching {pattern!r} within {timeout} s; stderr:\n{log}")
            match = regex.search(line)
            if match:
                return match

    def wait_started(self) -> None:
        match = self.wait_for(STARTED, START_TIMEOUT)
        assert int(match.group(1)) == self.port

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait(timeout)
        self._reader.join(timeout)
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


class UdpClient:
    """A topic resolution client: one UDP socket bound to ``ip``."""

    def __init__(self, ip: str = "127.0.0.1") -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((ip, 0))
        self.address: tuple[str, int] = self.sock.getsockname()
        self.name = f"{self.address[0]}:{self.address[1]}"
        self.keepalive_replies = 0

    def send(self, data: bytes, to: tuple[str, int]) -> None:
        self.sock.sendto(data, to)

    def _recv_skipping_keepalives(self, timeout: float) -> tuple[bytes, tuple[str, int]] | None:
        """The next datagram that is not the daemon's answer to one of our keepalives."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            self.sock.settimeout(remaining)
            try:
                data, addr = self.sock.recvfrom(65535)
            except TimeoutError:
                return None
            if data == KEEPALIVE:
                self.keepalive_replies += 1
                continue
            return data, (addr[0], addr[1])

    def recv(self, timeout: float = 5.0) -> tuple[bytes, tuple[str, int]]:
        got = self._recv_skipping_keepalives(timeout)
        if got is None:
            raise AssertionError(f"client {self.name} received nothing within {timeout} s")
        return got

    def assert_nothing(self, timeout: float = 0.5) -> None:
        got = self._recv_skipping_keepalives(timeout)
        if got is not None:
            raise AssertionError(f"client {self.name} unexpectedly received {got[0]!r} from {got[1]}")

    def close(self) -> None:
        self.sock.close()


Starter = Callable[..., LbmrdProcess]


@pytest.fixture
def lbmrd() -> Iterator[Starter]:
    started: list[LbmrdProcess] = []

    def start(*args: str, wait: bool = True) -> LbmrdProcess:
        proc = LbmrdProcess(*args)
        started.append(proc)
        if wait:
            proc.wait_started()
        return proc

    yield start
    for proc in started:
        proc.close()


@pytest.fixture
def clients() -> Iterator[Callable[[str], UdpClient]]:
    made: list[UdpClient] = []

    def make(ip: str = "127.0.0.1") -> UdpClient:
        client = UdpClient(ip)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


def register(daemon: LbmrdProcess, *members: UdpClient) -> None:
    for client in members:
        client.send(KEEPALIVE, daemon.address)
        daemon.wait_for(rf"client {re.escape(client.name)} added")


NAT_CONFIG = """\
<?xml version="1.0" encoding="UTF-8" ?>
<lbmrd version="1.0">
  <domains>
    <domain name="Net-A">
      <network>127.0.1/24</network>
    </domain>
    <domain name="Net-B">
      <network>127.0.2.0/24</network>
    </domain>
  </domains>
  <transformations>
    <transform source="Net-A" destination="Net-B">
      <rule>
        <match address="127.0.1.10" port="*" />
        <replace address="127.0.2.1" port="*" />
      </rule>
    </transform>
  </transformations>
</lbmrd>
"""


# ---- forwarding (spec 06 C.1 acceptance test 3)


def test_a_tir_from_client_a_reaches_client_b_and_not_a(
    lbmrd: Starter, clients: Callable[[str], UdpClient]
) -> None:
    daemon = lbmrd()
    a, b = clients("127.0.0.1"), clients("127.0.0.1")
    register(daemon, a, b)
    data = tir("127.0.0.1", 14371)
    a.send(data, daemon.address)
    got, sender = b.recv()
    assert (got, sender) == (data, daemon.address), "forwarded byte for byte, from the daemon's port"
    a.assert_nothing()
    b.send(tqr("Orders"), daemon.address)
    assert a.recv()[0] == tqr("Orders")
    b.assert_nothing()


# ---- dead clients (spec 06 C.1 acceptance tests 1-2)


def test_a_silent_client_is_dropped_after_ttl_and_a_keepalive_client_is_kept(
    lbmrd: Starter, clients: Callable[[str], UdpClient]
) -> None:
    daemon = lbmrd("-t", "2", "-a", "200")
    silent, alive = clients("127.0.0.1"), clients("127.0.0.1")
    register(daemon, silent, alive)
    removed = re.compile(
        rf"client {re.escape(silent.name)} removed: nothing received for ([0-9.]+) s \(ttl 2 s\)"
    )
    deadline = time.monotonic() + 15
    while True:  # keepalives from `alive` every 0.5 s until `silent` is reported dead
        alive.send(KEEPALIVE, daemon.address)
        try:
            match = daemon.wait_for(removed.pattern, timeout=0.5)
            break
        except AssertionError:
            assert time.monotonic() < deadline, "the silent client was never removed"
    assert 2.0 <= float(match.group(1)) < 5.0
    assert not any(f"client {alive.name} removed" in line for line in daemon.lines)
    # the kept client still receives forwarded traffic; the dropped one does not
    newcomer = clients("127.0.0.1")
    newcomer.send(tqr("Orders"), daemon.address)
    assert alive.recv()[0] == tqr("Orders")
    silent.assert_nothing()


# ---- the bounded client table, set from the command line


def test_max_clients_flags_bound_the_table_and_the_daemon_says_so(
    lbmrd: Starter, clients: Callable[[str], UdpClient]
) -> None:
    daemon = lbmrd("--max-clients", "3", "--max-clients-per-host", "2")
    assert any("clients at most 3 (2 per host)" in line for line in daemon.lines)
    a, b = clients("127.0.0.1"), clients("127.0.0.1")
    register(daemon, a, b)
    third_on_host = clients("127.0.0.1")
    third_on_host.send(tir("127.0.0.1", 14371), daemon.address)
    daemon.wait_for(
        rf"{re.escape(third_on_host.name)} not added: 127\.0\.0\.1 has 2 clients \(at most 2 per host\)"
    )
    c = clients("127.0.3.1")
    register(daemon, c)  # the third client in all, from another host
    fourth = clients("127.0.4.1")
    fourth.send(tir("127.0.4.1", 14372), daemon.address)
    _statistics(daemon, "table full 1,", "host limit 1)", "clients 3 active")  # warnings are rate-limited
    for member in (a, b, c):
        member.assert_nothing(0.2)  # neither stranger's TIR was forwarded
    # a member's TIR still reaches the other members, and not the strangers
    a.send(tir("127.0.0.1", 14373), daemon.address)
    assert b.recv()[0] == c.recv()[0] == tir("127.0.0.1", 14373)
    third_on_host.assert_nothing(0.2)
    fourth.assert_nothing(0.2)


def test_max_clients_zero_means_no_limit(lbmrd: Starter, clients: Callable[[str], UdpClient]) -> None:
    daemon = lbmrd("--max-clients", "0", "--max-clients-per-host", "0")
    assert any("clients at most unlimited (unlimited per host)" in line for line in daemon.lines)
    members = [clients("127.0.0.1") for _ in range(70)]  # more than the default 64 per host
    register(daemon, *members)
    assert not any("not added" in line for line in daemon.lines)


# ---- NAT (spec 06 C.3 NAT acceptance test, on 127.0.1.x / 127.0.2.x)


def test_nat_rewrites_a_tir_for_the_other_domain_only(
    lbmrd: Starter, clients: Callable[[str], UdpClient], tmp_path: Path
) -> None:
    config = tmp_path / "nat.xml"
    config.write_text(NAT_CONFIG)
    daemon = lbmrd(str(config))
    daemon.wait_for(r"NAT domains: Net-A 127\.0\.1\.0/24; Net-B 127\.0\.2\.0/24")
    source, home, remote = clients("127.0.1.10"), clients("127.0.1.20"), clients("127.0.2.20")
    register(daemon, home, remote)
    data = tir("127.0.1.10", 14400)
    source.send(data, daemon.address)
    assert home.recv()[0] == data, "same domain: byte for byte"
    rewritten = decode_packet(remote.recv()[0])
    assert isinstance(rewritten.body, TopicResolution)
    assert rewritten.body.infos[0].transport == TcpTransport("127.0.2.1", 14400, 0x1234ABCD)
    assert rewritten.body.infos[0].topic == "Orders"
    # no transform from Net-B to Net-A: the remote side's TIRs reach Net-A unchanged
    back = tir("127.0.2.20", 14401)
    remote.send(back, daemon.address)
    assert source.recv()[0] == back
    assert home.recv()[0] == back


# ---- -v, -d, --dump-config, usage


def test_validate_accepts_a_good_file_and_rejects_a_bad_one_with_file_and_line(tmp_path: Path) -> None:
    good = tmp_path / "good.xml"
    good.write_text(NAT_CONFIG)
    proc = run_lbmrd("-v", str(good))
    assert proc.returncode == 0, proc.stderr
    assert f"{good}: OK" in proc.stdout
    bad = tmp_path / "bad.xml"
    bad.write_text(
        '<?xml version="1.0" ?>\n<lbmrd version="1.0">\n  <daemon><ttl>60</ttl></daemon>\n</lbmrd>\n'
    )
    proc = run_lbmrd("--validate", str(bad))
    assert proc.returncode == 2
    assert f"{bad}:2: <lbmrd> needs a <domains>" in proc.stderr
    assert f"{bad}:2: <lbmrd> needs a <transformations>" in proc.stderr


def test_dump_dtd_prints_the_dtd() -> None:
    proc = run_lbmrd("-d")
    assert proc.returncode == 0
    assert proc.stdout.startswith("<!ELEMENT lbmrd")
    assert "<!ATTLIST transform" in proc.stdout


def test_dump_config_merges_the_command_line_over_the_file(tmp_path: Path) -> None:
    config = tmp_path / "nat.xml"
    config.write_text(
        NAT_CONFIG.replace("<domains>", "<daemon><port>12000</port><ttl>30</ttl></daemon>\n  <domains>")
    )
    proc = run_lbmrd("--dump-config", "-p", "12345", str(config))
    assert proc.returncode == 0, proc.stderr
    assert "<port>12345</port> <!-- command line -->" in proc.stdout
    assert f"<ttl>30</ttl> <!-- seconds; {config}:3 -->" in proc.stdout
    assert '<match address="127.0.1.10" port="*"/>' in proc.stdout
    assert "<!-- clients at most: 1024 (default;" in proc.stdout
    proc = run_lbmrd("--dump-config", "--max-clients-per-host", "0")
    assert "<!-- clients per host at most: 0 (no limit) (command line;" in proc.stdout


def test_max_clients_flags_refuse_what_is_not_a_count() -> None:
    proc = run_lbmrd("-v", "--max-clients", "-1")
    assert proc.returncode == 2
    assert (
        "argument --max-clients: max-clients '-1' is not an integer; allowed: an integer from 0 (no limit)"
        in (proc.stderr)
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["-t", "0"], "argument -t/--ttl: ttl 0 is out of range; allowed: an integer from 1 to"),
        (
            ["-p", "65536"],
            "argument -p/--port: port 65536 is out of range; allowed: an integer from 1 to 65535",
        ),
        (["-i", "10.0.0.0/40"], "argument -i/--interface: interface '10.0.0.0/40' has a bad prefix length"),
        (["-d", "-v"], "argument -v/--validate: not allowed with argument -d/--dump-dtd"),
        (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    ],
)
def test_bad_usage_exits_2_naming_what_was_wrong(args: list[str], expected: str) -> None:
    proc = run_lbmrd(*args)
    assert proc.returncode == 2
    assert expected in proc.stderr


# ---- shutdown, statistics, bind failure, log file


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_cleanly_with_a_statistics_line(
    lbmrd: Starter, clients: Callable[[str], UdpClient], sig: int
) -> None:
    daemon = lbmrd()
    a, b = clients("127.0.0.1"), clients("127.0.0.1")
    register(daemon, a, b)
    a.send(b"not lbmr at all", daemon.address)
    a.send(tir("127.0.0.1", 14371), daemon.address)
    b.recv()
    assert daemon.stop(sig) == 0
    stats = next(line for line in daemon.lines if "statistics:" in line)
    assert "received 4 datagrams (1 TIR/TQR, 2 keepalive, 0 other;" in stats
    assert "forwarded 1 (" in stats and "dropped 1 (malformed 1," in stats
    assert "clients 2 active (2 added, 0 removed as dead)" in stats
    assert daemon.lines[-1].endswith("stopped")


def test_sigusr1_logs_statistics_and_keeps_running(
    lbmrd: Starter, clients: Callable[[str], UdpClient]
) -> None:
    daemon = lbmrd()
    a = clients("127.0.0.1")
    register(daemon, a)
    daemon.proc.send_signal(signal.SIGUSR1)
    line = daemon.wait_for(r"statistics: received \d+ datagrams")
    assert "clients 1 active (1 added" in line.string
    b = clients("127.0.0.1")
    register(daemon, b)  # still serving
    assert daemon.proc.poll() is None
    assert daemon.stop() == 0


def test_standalone_module_entry_point_dumps_the_dtd() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "openum.daemons.lbmrd", "--dump-dtd"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0
    assert proc.stdout.startswith("<!ELEMENT lbmrd (daemon?, domains, transformations)>")


def test_an_occupied_port_exits_1_naming_the_address(lbmrd: Starter) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as holder:
        holder.bind(("127.0.0.1", 0))
        port = holder.getsockname()[1]
        proc = run_lbmrd("-p", str(port))
    assert proc.returncode == 1
    assert f"cannot bind UDP 127.0.0.1:{port}: Address already in use" in proc.stderr


def test_logfile_receives_the_log_and_rolls_over_by_size(
    lbmrd: Starter, clients: Callable[[str], UdpClient], tmp_path: Path
) -> None:
    logfile = tmp_path / "lbmrd.log"
    daemon = lbmrd(
        "-L",
        str(logfile),
        "--log-max-bytes",
        "4000",
        "--log-backups",
        "2",
        "--log-level",
        "debug",
        wait=False,
    )
    daemon.wait_for(rf"logging to {re.escape(str(logfile))}", START_TIMEOUT)
    assert wait_until(
        lambda: logfile.exists() and "started: listening on" in logfile.read_text(), START_TIMEOUT
    )
    junk = clients("127.0.0.1")
    rolled = tmp_path / "lbmrd.log.1"

    def flood() -> bool:
        for _ in range(20):
            junk.send(b"\xff" * 40, daemon.address)  # each is logged at debug level
        return rolled.exists()

    assert wait_until(flood, 15, interval=0.01), "the log never rolled over"
    assert not (tmp_path / "lbmrd.log.3").exists()
    assert daemon.stop() == 0
    assert "statistics:" in logfile.read_text()


# ---- strangers (issue 23, item 4): a bounded client table, bounded amplification


def _statistics(daemon: LbmrdProcess, *wanted: str) -> str:
    """The daemon's statistics line (SIGUSR1) once it contains every string of ``wanted``."""
    line = ""

    def logged() -> bool:
        nonlocal line
        daemon.proc.send_signal(signal.SIGUSR1)
        line = daemon.wait_for(r"statistics: received \d+ datagrams").string
        return all(w in line for w in wanted)

    assert wait_until(logged, 20), f"statistics never showed {wanted}: {line}"
    return line


def _drain(client: UdpClient) -> list[bytes]:
    """What is waiting in ``client``'s socket now (the daemon logged its statistics after sending it)."""
    got = []
    client.sock.setblocking(False)
    try:
        while True:
            got.append(client.sock.recv(65535))
    except BlockingIOError:
        pass
    finally:
        client.sock.setblocking(True)
    return got


def test_two_hundred_senders_from_one_host_get_at_most_64_clients_and_a_tir_at_most_63_copies(
    lbmrd: Starter, clients: Callable[[str], UdpClient]
) -> None:
    daemon = lbmrd()
    senders = [clients("127.0.0.1") for _ in range(200)]
    for sender in senders:
        sender.send(KEEPALIVE, daemon.address)
    line = _statistics(daemon, "received 200 datagrams")
    assert "clients 64 active (64 added" in line and "host limit 136)" in line
    accepted = [s for s in senders if _drain(s) == [KEEPALIVE]]  # only clients are answered
    assert len(accepted) == 64
    accepted[0].send(tir("127.0.0.1", 14371), daemon.address)
    line = _statistics(daemon, "received 201 datagrams")
    assert "forwarded 63 (" in line
    copies = {s.name: _drain(s) for s in senders if s is not accepted[0]}
    assert sum(len(c) for c in copies.values()) == 63
    assert all(copies[s.name] == [tir("127.0.0.1", 14371)] for s in accepted[1:])
