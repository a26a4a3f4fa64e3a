"""``openum send --late-join`` and ``openum recv`` (issue 25): a receiver started only after the last
send receives every message, in order, as retransmissions, on each transport."""

from __future__ import annotations

import queue
import signal
import threading

import pytest

from tests.integration.pubsub import WAIT, Ports, Processes, last_json

COUNT = 10_000


@pytest.fixture
def ports() -> Ports:
    return Ports.allocate()


def _lines(stream: object) -> queue.Queue[str]:
    """The lines of a child's stream, read by a thread (so a test can wait on them with a timeout)."""
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for line in stream:  # type: ignore[attr-defined]
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def _wait_line(lines: queue.Queue[str], text: str, timeout: float) -> list[str]:
    seen: list[str] = []
    while True:
        line = lines.get(timeout=timeout)
        seen.append(line)
        if text in line:
            return seen


@pytest.mark.parametrize("transport", ["tcp", "lbtru", "lbtrm"])
def test_a_receiver_started_after_the_last_send_receives_all_10000_as_retransmissions(
    ports: Ports, procs: Processes, transport: str
) -> None:
    topic = f"ljcli/{transport}"
    sender = procs.openum(
        "send", topic, *ports.argv(), "--transport", transport, "--count", str(COUNT), "--size", "32",
        "--delay", "0", "--late-join", "--linger", "5", "--json",
    )  # fmt: skip
    assert sender.stderr is not None
    errors = _lines(sender.stderr)
    _wait_line(errors, "retained for late joiners; lingering", 3 * WAIT)
    receiver = procs.openum(
        "recv", topic, *ports.argv(), "--count", str(COUNT), "--verify", "--json", "--timeout", str(WAIT)
    )
    out, err = receiver.communicate(timeout=6 * WAIT)
    assert receiver.returncode == 0, (out, err)
    summary = last_json(out)
    assert summary["received"] == COUNT and summary["retransmitted"] == COUNT, summary
    assert summary["gaps"] == summary["duplicates"] == summary["out_of_order"] == 0
    assert summary["unrecoverable_loss"] == summary["unrecoverable_loss_burst"] == 0
    late = summary["late_join"]
    assert late["info_requests_sent"] >= 1 and late["msgs_unrecoverable"] == 0, summary
    if transport == "tcp":  # (LBT-RM and LBT-RU also repair their window by NAK: some come that way)
        assert late["msgs_recovered"] == COUNT <= late["rx_requests_sent"], summary
    sender.send_signal(signal.SIGTERM)
    sent_out, _ = sender.communicate(timeout=3 * WAIT)
    sent = last_json(sent_out)
    assert sent["sent"] == COUNT and sent["late_join"]["info_requests_rcved"] >= 1, sent
    assert sent["late_join"]["retransmissions_sent"] >= late["msgs_recovered"] > 0, (sent, summary)
