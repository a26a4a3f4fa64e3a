"""``openum resp``, ``openum req``, ``openum imsg`` and ``recv``'s immediate messages as real processes
(CLI.md "Request/response and immediate messages").

Each test has its own resolver port, TCP, UDP and request port ranges (``Ports``), so it never meets
another test's contexts.  Nothing here asserts a wall-clock time.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import threading
from typing import IO, Any

import pytest

import openum
from openum import MsgFlags
from openum.cli import main
from openum.wire.lbmc import (
    LbmcMessage,
    MessageType,
    RequestHeader,
    ReturnContextInstanceHeader,
    TopicNameHeader,
    encode_message,
)
from tests.helpers import wait_until
from tests.integration.pubsub import WAIT, Ports, Processes, last_json
from tests.integration.test_lbmrd_process import free_udp_port

TARGET_LINE = "Immediate messaging target: "


@pytest.fixture
def ports() -> Ports:
    return Ports.allocate()


class Stderr:
    """Reads a child's stderr in a thread, so a test can wait for a line while the child runs."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stderr is not None
        self.proc = proc
        self.lines: list[str] = []
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._read, args=(proc.stderr,), daemon=True)
        self.thread.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            with self.cond:
                self.lines.append(line)
                self.cond.notify_all()

    def wait_for(self, text: str, timeout: float = WAIT) -> str:
        """The first line containing ``text`` (fails the test after ``timeout``)."""

        def found() -> str | None:
            return next((line for line in self.lines if text in line), None)

        with self.cond:
            self.cond.wait_for(lambda: found() is not None or self.proc.poll() is not None, timeout)
            line = found()
        assert line is not None, f"no {text!r} on stderr: {self.text()!r}"
        return line

    def text(self) -> str:
        with self.cond:
            return "".join(self.lines)

    def finish(self, timeout: float = 60) -> tuple[int, dict[str, Any], str]:
        """Wait for the child; its exit status, the JSON summary on its stdout and all its stderr."""
        assert self.proc.stdout is not None
        out = self.proc.stdout.read()  # the child's output is one summary: it cannot fill the pipe
        rc = self.proc.wait(timeout)
        self.thread.join(timeout)
        return rc, last_json(out), self.text()


def immediate_target(proc: subprocess.Popen[str]) -> tuple[Stderr, str]:
    """The ``TCP:ip:port`` a ``recv``/``resp`` child prints at start, and its stderr reader."""
    err = Stderr(proc)
    line = err.wait_for(TARGET_LINE)
    target = line.split(TARGET_LINE, 1)[1].strip()
    assert target.startswith("TCP:127.0.0.1:"), line
    return err, target


def run(procs: Processes, *args: str, timeout: float = 60) -> tuple[int, dict[str, Any], str]:
    proc = procs.openum(*args)
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, last_json(out), err


def stop(
    proc: subprocess.Popen[str], err: Stderr, signum: int = signal.SIGTERM
) -> tuple[int, dict[str, Any], str]:
    """Stop a ``resp`` child as a user would; its exit status, summary and stderr."""
    proc.send_signal(signum)
    return err.finish()


# -- req / resp ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["tcp", "lbtru", "lbtrm"])
def test_req_gets_every_response_from_resp(ports: Ports, procs: Processes, transport: str) -> None:
    topic = f"bar/rr/{transport}"
    resp = procs.openum("resp", topic, "--json", *ports.argv())
    resp_err, _target = immediate_target(resp)
    rc, got, err = run(
        procs, "req", topic, "--count", "1000", "--transport", transport, "--json", *ports.argv()
    )
    assert rc == 0, err
    assert (got["requests"], got["responses"], got["missing"]) == (1000, 1000, 0)
    assert got["transport"] == transport
    assert got["sent"] == 1000 + got["retries"]
    rtt = got["rtt_us"]
    ordered = [rtt[k] for k in ("min", "p50", "p99", "max")]
    assert ordered == sorted(ordered)
    assert ordered[0] > 0
    assert rtt["min"] <= rtt["mean"] <= rtt["max"]
    rc, answered, err = stop(resp, resp_err)
    assert rc == 0, err
    # Every request that reached the responder was answered (copies of the first one included).
    assert 1000 <= answered["requests"] <= got["sent"]
    assert answered["responses"] == answered["requests"]
    assert answered["errors"] == answered["unreachable"] == answered["dropped"] == answered["pending"] == 0
    assert answered["requesters"] == 1
    assert answered["bytes"] == answered["responses"] * 8  # the default --size: the echoed counter


def test_req_without_a_responder_reports_every_request_missing(ports: Ports, procs: Processes) -> None:
    rc, got, err = run(
        procs,
        "req",
        "bar/rr/nobody",
        "--count",
        "5",
        "--timeout",
        "1.5",
        "--resend",
        "0.3",
        "--json",
        *ports.argv(),
    )
    assert rc == 1
    assert "request 0 got no response within 1.5 s" in err
    assert (got["responses"], got["missing"], got["requests"]) == (0, 5, 1)
    assert got["retries"] >= 1  # the first request was sent again while it waited
    assert got["seconds"] >= 1.5
    assert got["rtt_us"] == {}


def test_resp_reports_a_requester_that_cannot_be_reached_and_goes_on(ports: Ports, procs: Processes) -> None:
    topic = "bar/rr/dead"
    resp = procs.openum("resp", topic, "--json", *ports.argv())
    resp_err, target = immediate_target(resp)
    _, ip, port = target.split(":")
    # A requester that is gone: its request port is a bound socket that does not listen (connections to
    # it are refused), held until the end so that no other socket takes the port.
    with (
        socket.socket(socket.AF_INET, socket.SOCK_STREAM) as gone,
        socket.create_connection((ip, int(port)), timeout=WAIT) as conn,
    ):
        gone.bind(("127.0.0.1", 0))
        gone_port = gone.getsockname()[1]
        request = LbmcMessage(
            MessageType.DATA,
            0,
            0,
            (
                ReturnContextInstanceHeader(b"\x01" * 8),
                TopicNameHeader(topic),
                RequestHeader(1, gone_port, "127.0.0.1"),
            ),
            (7).to_bytes(8, "big"),
        )
        conn.sendall(encode_message(request))  # an immediate request to the topic: resp gets a REQUEST
        resp_err.wait_for(f"TCP:127.0.0.1:{gone_port}")  # named on stderr
        # The responder goes on: a live requester gets all its answers.
        rc, got, err = run(procs, "req", topic, "--count", "20", "--json", *ports.argv())
        assert rc == 0, err
        assert got["responses"] == 20
        rc, answered, err = stop(resp, resp_err, signal.SIGINT)  # Ctrl-C: a clean stop, with the summary
    assert rc == 1, err  # not every request could be answered
    assert answered["errors"] == 1
    assert answered["unreachable"] + answered["dropped"] == 1
    assert answered["requesters"] == 2
    assert answered["responses"] == answered["requests"] - 1 >= 20


def test_resp_stops_after_count_requests(ports: Ports, procs: Processes) -> None:
    topic = "bar/rr/count"
    resp = procs.openum("resp", topic, "--count", "10", "--size", "100", "--json", *ports.argv())
    resp_err, _target = immediate_target(resp)
    req = procs.openum("req", topic, "--count", "50", "--json", *ports.argv())
    rc, answered, err = resp_err.finish()  # resp ends by itself after 10 requests
    assert rc == 0, err
    assert answered["responses"] == answered["requests"] == 10
    assert answered["bytes"] == 10 * 100
    # The responder went away: req waits for the next response until it is stopped.
    req.send_signal(signal.SIGTERM)
    out, err = req.communicate(timeout=60)
    got = last_json(out)
    assert req.returncode == 1
    assert "stopped" in err
    # resp answered exactly 10 requests; copies of the first request may have taken some of the 10, whose
    # responses req counts as extra (or late, once that request was closed).
    assert got["responses"] >= 1
    assert got["responses"] + got["extra"] + got["late"] == 10
    assert got["requests"] == got["responses"] + 1
    assert got["missing"] == 50 - got["responses"]


# -- imsg and recv ------------------------------------------------------------------------------------


def test_imsg_with_a_topic_and_topicless_reach_recv_immediate(ports: Ports, procs: Processes) -> None:
    topic = "bar/im"
    recv = procs.openum(
        "recv", topic, "--immediate", "--count", "300", "--verify", "--json", "--timeout", "30", *ports.argv()
    )
    recv_err, target = immediate_target(recv)
    host_port = target.removeprefix("TCP:")
    rc, sent, err = run(
        procs, "imsg", topic, "--target", host_port, "--count", "200", "--json", *ports.argv()
    )
    assert rc == 0, err
    assert (sent["sent"], sent["dropped"], sent["target"], sent["topic"]) == (200, 0, target, topic)
    rc, sent, err = run(
        procs,
        "imsg",
        "--topicless",
        "--target",
        target,
        "--count",
        "100",
        "--size",
        "20",
        "--json",
        *ports.argv(),
    )
    assert rc == 0, err
    assert (sent["sent"], sent["bytes"], sent["topic"]) == (100, 2000, None)
    rc, got, err = recv_err.finish()
    assert rc == 0, err
    assert (got["received"], got["immediate"], got["topicless"]) == (300, 300, 100)
    assert got["bytes"] == 200 * 64 + 100 * 20
    assert got["sources"] == 2  # one connection per imsg process
    assert got["gaps"] == got["duplicates"] == got["out_of_order"] == 0
    assert got["dropped"]["immediate_msgs_dropped_no_receiver"] == 0


def test_recv_without_immediate_counts_only_immediate_messages_with_its_topic(
    ports: Ports, procs: Processes
) -> None:
    topic = "bar/im/only"
    recv = procs.openum("recv", topic, "--count", "50", "--json", "--timeout", "30", *ports.argv())
    recv_err, target = immediate_target(recv)
    # From one context, so over one connection, in order: when recv has taken the 50 messages with its
    # topic, it has handled the 30 topicless ones sent before them.
    with openum.Context(options=ports.options()) as ctx:
        for i in range(30):
            ctx.unicast_immediate_message(target, i.to_bytes(8, "big"))
        for i in range(50):
            ctx.unicast_immediate_message(target, i.to_bytes(8, "big"), topic=topic)
        rc, got, err = recv_err.finish()
    assert rc == 0, err
    assert (got["received"], got["immediate"]) == (50, 50)
    assert "topicless" not in got
    assert got["dropped"]["immediate_msgs_dropped_no_receiver"] == 30


def test_imsg_to_a_source_target_reaches_the_context_hosting_the_source(
    ports: Ports, procs: Processes
) -> None:
    got: list[tuple[int, int, str]] = []
    lock = threading.Lock()

    def on_immediate(msg: openum.Message, _clientd: Any) -> None:
        with lock:
            got.append((int.from_bytes(msg.data[:8], "big"), int(msg.flags), msg.topic))

    with openum.Context(options=ports.options()) as ctx:
        ctx.receive_immediate_messages(on_immediate)
        src = ctx.create_source("bar/im/host")
        try:
            rc, sent, err = run(
                procs,
                "imsg",
                "--topicless",
                "--target",
                f"SOURCE:{src.source_string}",
                "--count",
                "20",
                "--json",
                *ports.argv(),
            )
            assert rc == 0, err
            assert sent["sent"] == 20
            assert wait_until(lambda: len(got) >= 20, WAIT)
        finally:
            src.close()
    immediate_topicless = int(MsgFlags.IMMEDIATE | MsgFlags.TOPICLESS)
    assert got == [(i, immediate_topicless, "") for i in range(20)]


def test_imsg_to_a_port_nobody_listens_on_fails_naming_it(ports: Ports, procs: Processes) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as closed:
        closed.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused
        port = closed.getsockname()[1]
        rc, sent, err = run(
            procs,
            "imsg",
            "bar/im/x",
            "--target",
            f"127.0.0.1:{port}",
            "--count",
            "5",
            "--json",
            *ports.argv(),
        )
    assert rc == 1
    assert f"TCP:127.0.0.1:{port}" in err
    assert sent["sent"] < 5 or sent["dropped"] > 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["imsg", "t", "--topicless", "--target", "127.0.0.1:1"], "either TOPIC or --topicless"),
        (["imsg", "--target", "127.0.0.1:1"], "either TOPIC or --topicless"),
        (["imsg", "t"], "--target HOST:PORT is required"),
        (["imsg", "t", "--multicast", "--target", "127.0.0.1:1"], "takes no --target"),
        (["imsg", "t", "--target", "127.0.0.1:70000"], "is not a target"),
        (["imsg", "t", "--target", "LBTRM:1.2.3.4:5"], "allowed: "),
        (["req", "t", "--size", "4"], "at least 8"),
        (["req", "t", "--timeout", "0"], "above 0"),
        (["resp", "t", "--size", "7"], "at least 8"),
        (["resp", "t", "--count", "0"], "at least 1"),
    ],
)
def test_bad_usage_exits_2_naming_what_is_wrong(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        rc: object = main(argv)
    except SystemExit as exc:  # argparse's own errors
        rc = exc.code
    assert rc == 2
    assert message in capsys.readouterr().err


def test_imsg_multicast_reaches_recv_in_another_process_with_mim_reception(
    ports: Ports, procs: Processes
) -> None:
    mim = ["--option", f"context mim_destination_port {free_udp_port()}"]
    mim += ["--option", "context mim_address 224.10.77.31"]
    topic = "bar/mim"
    recv = procs.openum(
        "recv", topic, "--immediate", "--count", "150", "--json", "--timeout", "30", *mim, *ports.argv()
    )
    recv_err, _target = immediate_target(recv)
    rc, sent, err = run(procs, "imsg", topic, "--multicast", "--count", "100", "--json", *mim, *ports.argv())
    assert rc == 0, err
    assert (sent["sent"], sent["target"]) == (100, "multicast")
    rc, sent, err = run(
        procs, "imsg", "--topicless", "--multicast", "--count", "50", "--json", *mim, *ports.argv()
    )
    assert rc == 0, err
    rc, got, err = recv_err.finish()
    assert rc == 0, err
    assert (got["received"], got["immediate"], got["topicless"]) == (150, 150, 50)
