"""``openum send T --option "source resolver_send_final_advertisements 3" --count 1 --linger 0`` puts
exactly 3 final advertisements on the wire: a real capture on ``lo`` decoded by tshark holds three LBMR
topic-management records of type "leave" (``lbmr.tmb.tmr.type`` 0) for T, and decodes cleanly.

``--linger 0`` closes the source and then the context right after the last send: every final
advertisement must still leave before ``Context.close()`` returns (UM Concepts Guide, section 2.11.1).
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

import openum
from openum.wire.lbmr import TMR_LEAVE, LbmrPacket, ResolverKeepalive, encode_packet
from tests.conformance.test_tr_capture import Capture
from tests.conformance.tshark import Tshark
from tests.helpers import wait_until
from tests.integration.pubsub import WAIT, Ports, Processes

TOPIC = "capture/finals/IBM"
FINALS = 3


@pytest.fixture
def capture_lo(tshark_bin: str) -> Callable[[Path, str], Capture]:
    if os.geteuid() != 0:
        pytest.skip("capturing on lo needs root (CI runs as root)")
    return Capture


def _push_through(cap: Capture, port: int, expected: int) -> bool:
    """Make dumpcap take in the ``expected`` packets already sent.

    dumpcap may hold the last packets of a quiet capture unread (it neither counts them nor writes them
    when stopped), so send markers after them, valid LBMR keepalives to the resolver group, until it has
    counted more than ``expected``: packets are read in the order they were captured, so every earlier one
    is in then.
    """
    marker = encode_packet(LbmrPacket(ResolverKeepalive()))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
        for _ in range(40):
            sock.sendto(marker, ("224.9.10.11", port))
            if cap.wait_packets(expected + 1, 0.5):
                return True
    return False


def test_openum_send_without_linger_puts_every_final_advertisement_on_the_wire(
    capture_lo: Callable[[Path, str], Capture], tmp_path: Path, procs: Processes
) -> None:
    ports = Ports.allocate(2)
    cap = capture_lo(tmp_path / "finals.pcap", f"udp port {ports.resolver}")
    try:
        assert cap.ready.wait(20), cap.stderr
        # A context on the same resolver port tells when the sender's datagrams have all arrived (it
        # sends none itself: no source, no receiver).
        with openum.Context(options=[f"context resolver_multicast_port {ports.resolver}"]) as watcher:
            send = procs.openum(
                "send",
                TOPIC,
                "--option",
                f"source resolver_send_final_advertisements {FINALS}",
                *ports.argv(),
                "--count",
                "1",
                "--linger",
                "0",
            )
            try:
                _, err = send.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                send.kill()
                raise
            assert send.returncode == 0, err
            # The sender has exited: whatever it sent is on its way already.
            assert wait_until(lambda: watcher.statistics().final_advertisements_rcved >= FINALS, WAIT)
            received = watcher.statistics().tr_dgrams_rcved
            assert _push_through(cap, ports.resolver, received), (cap.packets, received, cap.stderr)
    finally:
        cap.stop()
    rows = Tshark(decode_as=(f"udp.port=={ports.resolver},lbmr",)).assert_clean(
        cap.pcap, fields=["lbmr.tmb.tmr.type", "lbmr.tmb.tmr.name"]
    )
    records = [
        (int(kind), name)
        for row in rows
        for kind, name in zip(row.get("lbmr.tmb.tmr.type", []), row.get("lbmr.tmb.tmr.name", []), strict=True)
    ]
    leaves = [r for r in records if r[0] == TMR_LEAVE and r[1] == TOPIC]
    assert len(leaves) == FINALS, records
    assert len(records) == FINALS  # nothing else of the kind on the wire
    assert len(rows) > received  # the sender's datagrams and the markers after them
