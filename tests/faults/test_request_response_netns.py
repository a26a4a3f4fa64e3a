"""Request/response between real processes inside a network namespace (issue 24): ``openum resp`` answers
1000 requests of ``openum req`` over each source transport, with UM's default ports (the request ports
14391-14395 included) and nothing able to leave the machine (the namespace has only ``lo``).  Needs root."""

from __future__ import annotations

import signal

import pytest

from tests.faults.conftest import Namespace
from tests.integration.pubsub import Processes, last_json

pytestmark = [pytest.mark.root, pytest.mark.slow]

COUNT = 1000


@pytest.mark.parametrize("transport", ["tcp", "lbtru", "lbtrm"])
def test_1000_requests_get_1000_responses_between_processes(
    transport: str,
    netns: Namespace,
    procs: Processes,
) -> None:
    topic = "bar/rr"
    resp = procs.openum("resp", topic, "--json", prefix=netns.prefix)  # answers until stopped
    req = procs.openum(
        "req", topic, "--count", str(COUNT), "--transport", transport, "--timeout", "30", "--json",
        prefix=netns.prefix,
    )  # fmt: skip
    req_out, req_err = req.communicate(timeout=120)
    assert req.returncode == 0, (req_out[-2000:], req_err[-2000:])
    summary = last_json(req_out)
    assert (summary["requests"], summary["responses"], summary["missing"]) == (COUNT, COUNT, 0), summary
    assert summary["rtt_us"]["max"] >= summary["rtt_us"]["p50"] > 0
    resp.send_signal(signal.SIGTERM)  # a clean stop, with a summary
    resp_out, resp_err = resp.communicate(timeout=60)
    assert resp.returncode == 0, (resp_out[-2000:], resp_err[-2000:])
    served = last_json(resp_out)
    assert served["requests"] >= COUNT and served["responses"] >= COUNT and served["errors"] == 0, served
