"""What ``openum lbmrd`` forwards decodes cleanly in tshark, NAT-rewritten TIRs included (spec 06 C.3).

The daemon runs as a real process with the NAT configuration of the integration tests (domains
127.0.1.0/24 and 127.0.2.0/24, rule 127.0.1.10:* -> 127.0.2.1:*).  The datagrams the test clients send
and the ones they receive from the daemon are written into a pcap with their real addresses and ports,
then decoded by tshark with ``-d udp.port==PORT,lbmr`` (the daemon's port is not the default 15380).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from openum.wire.lbmr import (
    LbmrPacket,
    LbtrmTransport,
    LbtruTransport,
    TcpTransport,
    TopicInfo,
    TopicQuery,
    TopicResolution,
    encode_packet,
)
from tests.conformance.tshark import Tshark, udp_frame, write_pcap
from tests.integration.test_lbmrd_process import KEEPALIVE, NAT_CONFIG, LbmrdProcess, UdpClient

pytestmark = [
    pytest.mark.tshark,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="127/8 client addresses need Linux"),
]


def test_forwarded_and_nat_rewritten_tirs_decode_cleanly(tshark_bin: str, tmp_path: Path) -> None:
    config = tmp_path / "nat.xml"
    config.write_text(NAT_CONFIG)
    daemon = LbmrdProcess(str(config))
    source, home, remote = UdpClient("127.0.1.10"), UdpClient("127.0.1.20"), UdpClient("127.0.2.20")
    frames: list[bytes] = []

    def sent(client: UdpClient, data: bytes) -> None:
        client.send(data, daemon.address)
        frames.append(
            udp_frame(
                data,
                src=client.address[0],
                dst=daemon.address[0],
                sport=client.address[1],
                dport=daemon.port,
                ident=len(frames) + 1,
            )
        )

    def received(client: UdpClient) -> bytes:
        data, (ip, port) = client.recv()
        assert (ip, port) == daemon.address
        frames.append(
            udp_frame(
                data,
                src=ip,
                dst=client.address[0],
                sport=port,
                dport=client.address[1],
                ident=len(frames) + 1,
            )
        )
        return data

    try:
        daemon.wait_started()
        for client in (home, remote):
            sent(client, KEEPALIVE)
            daemon.wait_for(rf"client {re.escape(client.name)} added")
        advert = encode_packet(
            LbmrPacket(
                TopicResolution(
                    queries=(TopicQuery("Quotes"),),
                    infos=(
                        TopicInfo("Orders", 7, TcpTransport("127.0.1.10", 14400, 0x1234ABCD)),
                        TopicInfo("Trades", 8, LbtruTransport("127.0.1.10", 14380, 0x01020304)),
                        TopicInfo(
                            "Prices",
                            9,
                            LbtrmTransport("127.0.1.10", "224.10.10.10", 0xCAFEBABE, 14400, 14390),
                        ),
                    ),
                )
            )
        )
        sent(source, advert)
        assert received(home) == advert
        assert received(remote) != advert
        assert daemon.stop() == 0
    finally:
        daemon.close()
        for client in (source, home, remote):
            client.close()

    pcap = write_pcap(tmp_path / "lbmrd.pcap", frames)
    tshark = Tshark(decode_as=(f"udp.port=={daemon.port},lbmr",))
    rows = tshark.assert_clean(
        pcap,
        fields=[
            "frame.protocols",
            "ip.dst",
            "lbmr.hdr.type",
            "lbmr.tqr.name",
            "lbmr.tir.name",
            "lbmr.tir.tcp.ip",
            "lbmr.tir.tcp.port",
            "lbmr.tir.tcp.session_id",
            "lbmr.tir.lbtru.ip",
            "lbmr.tir.lbtru.port",
            "lbmr.tir.lbtrm.srcip",
            "lbmr.tir.lbtrm.sport",
            "lbmr.tir.lbtrm.mcastip",
        ],
    )
    assert len(rows) == 5
    assert all(r["frame.protocols"][0].endswith(":lbmr") for r in rows), rows
    by_dst = {r["ip.dst"][0]: r for r in rows[3:]}
    home_row, remote_row = by_dst["127.0.1.20"], by_dst["127.0.2.20"]
    for row in (home_row, remote_row):
        assert row["lbmr.tqr.name"] == ["Quotes"]
        assert row["lbmr.tir.name"] == ["Orders", "Trades", "Prices"]
        assert row["lbmr.tir.tcp.port"] == ["14400"]
        assert row["lbmr.tir.tcp.session_id"] == ["0x1234abcd"]
        assert row["lbmr.tir.lbtru.port"] == ["14380"]
        assert row["lbmr.tir.lbtrm.sport"] == ["14390"]
        assert row["lbmr.tir.lbtrm.mcastip"] == ["224.10.10.10"]
    # same domain: unchanged; the other domain: every advertised address is the NAT's
    assert home_row["lbmr.tir.tcp.ip"] == ["127.0.1.10"]
    assert home_row["lbmr.tir.lbtru.ip"] == ["127.0.1.10"]
    assert home_row["lbmr.tir.lbtrm.srcip"] == ["127.0.1.10"]
    assert remote_row["lbmr.tir.tcp.ip"] == ["127.0.2.1"]
    assert remote_row["lbmr.tir.lbtru.ip"] == ["127.0.2.1"]
    assert remote_row["lbmr.tir.lbtrm.srcip"] == ["127.0.2.1"]
