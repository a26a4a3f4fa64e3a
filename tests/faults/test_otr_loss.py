"""Off-transport recovery under real loss (UM Concepts Guide 10.3; issue 25).

In a network namespace of its own (only ``lo``), an ``iptables -m statistic --mode random --probability
0.2`` DROP rule takes 20% of the datagrams to LBT-RM's data port, and the receiver sends no NAKs
(``transport_lbtrm_send_naks 0``), so the transport repairs nothing.  ``openum send --late-join`` retains
every message; ``openum recv`` with ``use_otr 1`` gets all of them, in order, by OTR (``recovered`` > 0;
a lost first message comes back by Late Join, on by default, which tells the receiver where the stream
starts); with ``use_otr 0`` the loss is reported, never silent.  Needs root (CI runs as root).
"""

from __future__ import annotations

import pytest

from tests.faults.conftest import Namespace
from tests.integration.pubsub import Processes, last_json

pytestmark = [pytest.mark.root, pytest.mark.slow]

MESSAGES = 10_000
LOSS = "0.2"
NO_NAKS = (
    "--option", "receiver transport_lbtrm_send_naks 0",
    "--option", "receiver transport_lbtrm_nak_generation_interval 2000",
)  # fmt: skip
FAST_OTR = (
    "--option", "receiver otr_request_initial_delay 50",
    "--option", "receiver otr_request_minimum_interval 200",
    "--option", "receiver otr_request_maximum_interval 800",
)  # fmt: skip


def _run(netns: Namespace, procs: Processes, topic: str, *recv_options: str) -> tuple[dict, dict]:  # type: ignore[type-arg]
    netns.run(
        "iptables", "-A", "INPUT", "-p", "udp", "--dport", "14400",
        "-m", "statistic", "--mode", "random", "--probability", LOSS, "-j", "DROP",
    )  # fmt: skip
    recv = procs.openum(
        "recv", topic, "--count", str(MESSAGES), "--json", "--timeout", "20", *NO_NAKS, *recv_options,
        prefix=netns.prefix,
    )  # fmt: skip
    send = procs.openum(
        "send", topic, "--count", str(MESSAGES), "--transport", "lbtrm", "--late-join", "--linger", "5",
        "--delay", "3", "--json", "--option", "source transport_topic_sequence_number_info_interval 1000",
        prefix=netns.prefix,
    )  # fmt: skip
    send_out, send_err = send.communicate(timeout=300)
    assert send.returncode == 0, send_err
    recv_out, recv_err = recv.communicate(timeout=300)
    assert netns.dropped() > 0  # about a fifth of the datagrams (each carries a batch of messages)
    return last_json(send_out), {"rc": recv.returncode, "err": recv_err[-2000:], **last_json(recv_out)}


def test_otr_recovers_everything_the_source_retains_under_20_percent_loss(
    netns: Namespace, procs: Processes
) -> None:
    sent, got = _run(netns, procs, "faults/otr", "--verify", "--option", "receiver use_otr 1", *FAST_OTR)
    assert sent["sent"] == MESSAGES
    assert got["rc"] == 0, got
    assert got["received"] == MESSAGES
    assert got["gaps"] == got["duplicates"] == got["out_of_order"] == 0, got
    assert got["unrecoverable_loss"] == got["unrecoverable_loss_burst"] == 0, got
    assert got["recovered"] > 0.1 * MESSAGES, got  # about a fifth came back by OTR
    assert got["otr"]["msgs_recovered"] >= got["recovered"] and got["otr"]["msgs_unrecoverable"] == 0, got
    assert sent["late_join"]["retransmissions_sent"] >= got["recovered"], sent
    print(f"\nOTR recovered {got['recovered']} of {MESSAGES}; requests {got['otr']['rx_requests_sent']}")


def test_without_otr_the_loss_is_reported(netns: Namespace, procs: Processes) -> None:
    sent, got = _run(netns, procs, "faults/no-otr", "--option", "receiver use_otr 0")
    assert sent["sent"] == MESSAGES
    lost = got["unrecoverable_loss"] + got["unrecoverable_loss_burst"]
    assert got["received"] < MESSAGES and lost > 0, got
    assert got["recovered"] == 0 and "otr" not in got, got
    # Every message not delivered is reported (random loss of a fifth makes no burst).
    assert got["unrecoverable_loss_burst"] == 0 and got["received"] + got["unrecoverable_loss"] == MESSAGES, (
        got
    )
