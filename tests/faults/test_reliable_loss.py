"""Real loss on real sockets (issue 6): LBT-RM and LBT-RU recover 5% random loss made by iptables.

Each test creates its own network namespace (only ``lo``, so nothing can leave the machine), adds an
``iptables -m statistic --mode random --probability 0.05`` DROP rule for the transport's data port, and
runs ``openum recv --verify`` and ``openum send`` as real processes inside it with UM's default ports.
Every one of 200,000 messages must arrive, in order, and the NAK and retransmission counters of both
ends, and the rule's own drop counter, must be non-zero.  Needs root (CI runs as root).

Losing the session's first data datagram (transport sequence number 0) is head loss (UM Concepts Guide,
section 2.4.2): a receiver that was there before the source sent anything repairs it like any other
loss (the LBT-RM receiver sees that the first datagram it gets is among the session's first, with
sequence number 0 still in the source's window; the LBT-RU receiver learns where the session starts
from the connection handshake).  ``test_a_dropped_first_datagram_is_repaired`` drops exactly that
datagram, once, with an ``iptables -m u32`` match.
"""

from __future__ import annotations

import pytest

from tests.faults.conftest import Namespace
from tests.integration.pubsub import Processes, last_json

pytestmark = [pytest.mark.root, pytest.mark.slow]

MESSAGES = 200_000
LOSS = 0.05
#: The first data datagram of a session, as an ``iptables -m u32`` match (offsets from the UDP header,
#: which starts ``(IHL & 0xF) * 4`` bytes into the IP packet): type DATA (0) in the payload's first byte
#: and transport sequence number 0 (LBT-RM: payload bytes 8-11; LBT-RU: payload bytes 4-7).  A
#: retransmission of it matches too, so the rule drops only the first match (``-m statistic --mode nth
#: --every 1000000 --packet 0``).
FIRST_DATAGRAM = {
    "lbtrm": "0>>22&0x3C@8>>24=0x00&&0>>22&0x3C@16=0",
    "lbtru": "0>>22&0x3C@8>>24=0x00&&0>>22&0x3C@12=0",
}
#: The data ports iptables drops on: LBT-RM's destination port; LBT-RU receivers' ports.
DATA_PORTS = {"lbtrm": "14400", "lbtru": "14360:14379"}


@pytest.mark.parametrize("transport", ["lbtrm", "lbtru"])
def test_200k_messages_arrive_in_order_under_5_percent_iptables_loss(
    transport: str, netns: Namespace, procs: Processes
) -> None:
    netns.run(
        "iptables", "-A", "INPUT", "-p", "udp", "--dport", DATA_PORTS[transport],
        "-m", "statistic", "--mode", "random", "--probability", str(LOSS), "-j", "DROP",
    )  # fmt: skip
    topic = f"faults/{transport}"
    recv = procs.openum(
        "recv", topic, "--count", str(MESSAGES), "--verify", "--json", "--timeout", "60", prefix=netns.prefix
    )
    wait = ["--wait-receivers", "1"] if transport == "lbtru" else ["--delay", "3"]
    send = procs.openum(
        "send",
        topic,
        "--count",
        str(MESSAGES),
        "--transport",
        transport,
        "--json",
        *wait,
        prefix=netns.prefix,
    )
    send_out, send_err = send.communicate(timeout=300)
    assert send.returncode == 0, send_err
    recv_out, recv_err = recv.communicate(timeout=120)
    assert recv.returncode == 0, (recv_out[-2000:], recv_err[-2000:])
    sent, got = last_json(send_out), last_json(recv_out)
    assert sent["sent"] == MESSAGES
    assert got["received"] == MESSAGES
    assert got["gaps"] == got["duplicates"] == got["out_of_order"] == 0, got
    assert got["unrecoverable_loss"] == got["unrecoverable_loss_burst"] == 0, got
    recovery = got["recovery"]
    assert recovery["lost"] > 0 and recovery["naks_sent"] > 0 and recovery["rxs_rcved"] > 0, recovery
    assert recovery["unrecovered_txw"] == recovery["unrecovered_tmo"] == 0, recovery
    assert sent["recovery"]["naks_rcved"] > 0 and sent["recovery"]["rxs_sent"] > 0, sent["recovery"]
    dropped = netns.dropped()
    # The rule dropped roughly 5% of the data datagrams (originals and retransmissions alike).
    datagrams = recovery["msgs_rcved"] + dropped
    assert 0.02 * datagrams < dropped < 0.10 * datagrams, (dropped, datagrams)
    print(f"\n{transport}: iptables dropped {dropped} of {datagrams} datagrams; recovery {recovery}")


@pytest.mark.parametrize("transport", ["lbtrm", "lbtru"])
def test_a_dropped_first_datagram_is_repaired(transport: str, netns: Namespace, procs: Processes) -> None:
    """The session's first data datagram is dropped once (its retransmission gets through): every
    message arrives, in order, with the loss NAKed and repaired, and no loss event."""
    netns.run(
        "iptables", "-A", "INPUT", "-p", "udp", "--dport", DATA_PORTS[transport],
        "-m", "u32", "--u32", FIRST_DATAGRAM[transport],
        "-m", "statistic", "--mode", "nth", "--every", "1000000", "--packet", "0", "-j", "DROP",
    )  # fmt: skip
    topic = f"faults/head/{transport}"
    count = 200
    recv = procs.openum(
        "recv", topic, "--count", str(count), "--verify", "--json", "--timeout", "30", prefix=netns.prefix
    )
    wait = ["--wait-receivers", "1"] if transport == "lbtru" else ["--delay", "3"]
    send = procs.openum(
        "send", topic, "--count", str(count), "--transport", transport, "--json", *wait, prefix=netns.prefix
    )
    _, send_err = send.communicate(timeout=60)
    assert send.returncode == 0, send_err
    recv_out, recv_err = recv.communicate(timeout=60)
    assert recv.returncode == 0, (recv_out[-2000:], recv_err[-2000:])
    got = last_json(recv_out)
    assert netns.dropped() == 1  # exactly the first data datagram
    assert got["received"] == count
    assert got["gaps"] == got["duplicates"] == got["out_of_order"] == 0, got
    assert got["unrecoverable_loss"] == got["unrecoverable_loss_burst"] == 0, got
    recovery = got["recovery"]
    assert recovery["lost"] >= 1 and recovery["naks_sent"] >= 1 and recovery["rxs_rcved"] >= 1, recovery
    assert recovery["unrecovered_txw"] == recovery["unrecovered_tmo"] == 0, recovery
