"""A real capture of openum's topic resolution on ``lo`` decodes cleanly in tshark, and its TIR times
follow the initial-phase schedule (seed 8.1.4: 0, 10, 30, 70, 150, 310, 630, 1130 ms)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import threading
from pathlib import Path

import pytest

import openum
from openum._source_string import SourceString
from tests.conformance.tshark import Tshark, tshark_path
from tests.helpers import wait_until
from tests.integration.test_lbmrd_process import free_udp_port

SCHEDULE_MS = [0, 10, 30, 70, 150, 310, 630, 1130]
EARLY_TOLERANCE_MS = 2  # timers never fire early; allow clock granularity
LATE_TOLERANCE_MS = 60  # a loaded 2-core machine


class Capture:
    """``dumpcap -i lo`` (Wireshark's capture engine, installed with tshark) writing a pcap.

    dumpcap rather than ``tshark -w``: stopped with SIGINT, dumpcap reliably writes every captured frame.
    """

    def __init__(self, pcap: Path, capture_filter: str) -> None:
        self.pcap = pcap
        dumpcap = shutil.which("dumpcap") or tshark_path()
        self.proc = subprocess.Popen(
            [dumpcap, "-i", "lo", "-f", capture_filter, "-w", str(pcap)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.ready = threading.Event()
        self.stderr: list[str] = []
        self.packets = 0  # dumpcap reports its running count on stderr
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line.rstrip())
            if line.startswith("File:"):  # dumpcap is capturing once it names its file
                self.ready.set()
            match = re.match(r"Packets(?: captured)?: (\d+)", line.strip())
            if match:
                self.packets = max(self.packets, int(match.group(1)))

    def wait_packets(self, count: int, timeout: float = 20) -> bool:
        """Wait until dumpcap has written ``count`` packets (it reports them about once a second)."""
        return wait_until(lambda: self.packets >= count, timeout)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self._reader.join(10)
        if self.proc.stderr is not None:
            self.proc.stderr.close()


@pytest.fixture
def capture_lo(tshark_bin: str, tmp_path: Path) -> type[Capture]:
    if os.geteuid() != 0:
        pytest.skip("capturing on lo needs root (CI runs as root)")
    return Capture


def test_captured_topic_resolution_decodes_cleanly_and_follows_the_schedule(
    capture_lo: type[Capture], tmp_path: Path
) -> None:
    port = free_udp_port()
    cap = capture_lo(tmp_path / "tr.pcap", f"udp port {port}")
    try:
        assert cap.ready.wait(20), cap.stderr
        opts = [f"context resolver_multicast_port {port}"]
        with openum.Context(options=opts) as pub, openum.Context(options=opts) as sub:
            src = pub.create_source("capture/IBM")
            # Let the unsolicited initial ladder run undisturbed (an answer to a query during the initial
            # phase stands in for the nearest scheduled advertisement, seed 8.1.4) ...
            assert wait_until(lambda: pub.statistics().tirs_sent >= len(SCHEDULE_MS), 20)
            # ... then subscribe: the receiver joins from the cache, and its queries are answered.
            found = threading.Event()
            sub.create_receiver(
                "capture/IBM",
                lambda m: None,
                attrs={"source_notification_function": (lambda s, c: found.set(), None, None)},
            )
            sub.create_wildcard_receiver("^capture/", lambda m: None)
            assert found.wait(20)
            assert wait_until(
                lambda: pub.statistics().tqrs_rcved >= 1 and sub.statistics().wildcard_tqrs_sent >= 1, 20
            )
            assert wait_until(lambda: pub.statistics().wildcard_tqrs_rcved >= 1, 20)
            source_string = src.source_string
            sent = pub.statistics().tr_dgrams_sent + sub.statistics().tr_dgrams_sent
            assert cap.wait_packets(sent), (cap.packets, sent, cap.stderr)
    finally:
        cap.stop()
    tshark = Tshark(decode_as=(f"udp.port=={port},lbmr",))
    rows = tshark.assert_clean(
        cap.pcap,
        fields=[
            "frame.time_relative",
            "ip.src",
            "lbmr.tir.name",
            "lbmr.tir.tcp.port",
            "lbmr.tir.tcp.session_id",
            "lbmr.tir.index",
            "lbmr.tqr.name",
            "lbmr.tqr.pattern",
        ],
    )
    tirs = [
        (float(r["frame.time_relative"][0]), r) for r in rows if "capture/IBM" in r.get("lbmr.tir.name", [])
    ]
    tqrs = [r for r in rows if "capture/IBM" in r.get("lbmr.tqr.name", [])]
    wtqrs = [r for r in rows if r.get("lbmr.tqr.pattern")]
    assert tqrs, rows
    assert wtqrs, rows
    # Every TIR carries the source's transport session: TCP port, session id and topic index.
    parsed = SourceString.parse(source_string)
    for _, row in tirs:
        assert row["ip.src"] == [parsed.ip]  # the IP inside the TIR matches the sending interface
        assert int(row["lbmr.tir.tcp.port"][0]) == parsed.port
        assert int(row["lbmr.tir.tcp.session_id"][0], 16) == parsed.session_id
        assert int(row["lbmr.tir.index"][0]) == parsed.topic_index
    # Unsolicited TIRs follow 0, 10, 30, 70, ... ms; answers to the receivers' queries come in between.
    start = tirs[0][0]
    times = [(t - start) * 1000 for t, _ in tirs]
    for expected in SCHEDULE_MS:
        near = [t for t in times if expected - EARLY_TOLERANCE_MS <= t <= expected + LATE_TOLERANCE_MS]
        assert near, f"no TIR near {expected} ms; TIR times: {[round(t, 1) for t in times]}"


def test_captured_lbtipc_and_lbtsmx_advertisements_decode_cleanly(
    capture_lo: type[Capture], tmp_path: Path
) -> None:
    """The TIRs of LBT-IPC and LBT-SMX sources (issue 26): host id, session id and transport id as tshark
    decodes them, equal to what the source strings and this host's id say."""
    from openum.transport.ipc import host_id

    port = free_udp_port()
    cap = capture_lo(tmp_path / "shm-tr.pcap", f"udp port {port}")
    try:
        assert cap.ready.wait(20), cap.stderr
        with openum.Context(options=[f"context resolver_multicast_port {port}"]) as pub:
            sources = {t: pub.create_source(f"capture/{t}", {"transport": t}) for t in ("lbtipc", "lbtsmx")}
            assert wait_until(lambda: pub.statistics().tirs_sent >= 4, 20)
            strings = {t: s.source_string for t, s in sources.items()}
            assert cap.wait_packets(pub.statistics().tr_dgrams_sent), (cap.packets, cap.stderr)
    finally:
        cap.stop()
    fields = ["lbmr.tir.name"] + [
        f"lbmr.tir.{t}.{f}" for t in ("lbtipc", "lbtsmx") for f in ("host_id", "session_id", "xport_id")
    ]
    rows = Tshark(decode_as=(f"udp.port=={port},lbmr",)).assert_clean(cap.pcap, fields=fields)
    for transport, source_string in strings.items():
        parsed = SourceString.parse(source_string)
        tirs = [r for r in rows if f"capture/{transport}" in r.get("lbmr.tir.name", [])]
        assert tirs, rows
        for row in tirs:  # one source per transport: every value of its fields in the datagram is its
            assert {int(v, 0) for v in row[f"lbmr.tir.{transport}.host_id"]} == {host_id()}
            assert {int(v, 0) for v in row[f"lbmr.tir.{transport}.session_id"]} == {parsed.session_id}
            assert {int(v, 0) for v in row[f"lbmr.tir.{transport}.xport_id"]} == {parsed.transport_id}
