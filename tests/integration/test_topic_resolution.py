"""Topic resolution between real processes on 127.0.0.1 (issue 4): multicast TR, unicast TR through one
lbmrd and through two with one killed mid-run, quiescent sources woken by a query, and tr-monitor."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import openum
from tests.helpers import wait_until
from tests.integration.pubsub import Ports
from tests.integration.test_lbmrd_process import LbmrdProcess, free_udp_port

ROOT = Path(__file__).resolve().parents[2]
WAIT = 20.0  # generous: a loaded 2-core machine still resolves well within this


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    for var in ("LBM_DEFAULT_CONFIG_FILE", "OPENUM_CONFIG_FILE", "LBM_XML_CONFIG_FILENAME"):
        env.pop(var, None)
    return env


class JsonProcess:
    """A child process printing one JSON object per line; lines are read by a thread."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
            cwd=ROOT,
        )
        self.events: list[dict[str, Any]] = []
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._read_out, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read_out(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            self.events.append(event)
            self._queue.put(event)
        self._queue.put(None)

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line.rstrip())

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = WAIT) -> dict[str, Any]:
        for event in list(self.events):
            if predicate(event):
                return event
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                event = self._queue.get(timeout=max(0.0, left))
            except queue.Empty:
                event = None
            if event is None:
                raise AssertionError(
                    f"no matching event within {timeout} s; events: {self.events}; stderr:\n"
                    + "\n".join(self.stderr)
                )
            if predicate(event):
                return event

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write("quit\n")
                self.proc.stdin.flush()
                self.proc.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(10)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def spawn() -> Iterator[Callable[..., JsonProcess]]:
    started: list[JsonProcess] = []

    def start(role: str, topic: str, options: list[str]) -> JsonProcess:
        argv = [sys.executable, "-m", "tests.integration.tr_peer", role, topic]
        for opt in options:
            argv += ["--option", opt]
        peer = JsonProcess(argv)
        started.append(peer)
        return peer

    yield start
    for peer in started:
        peer.close()


@pytest.fixture
def lbmrd() -> Iterator[Callable[[], LbmrdProcess]]:
    started: list[LbmrdProcess] = []

    def start() -> LbmrdProcess:
        daemon = LbmrdProcess()
        started.append(daemon)
        daemon.wait_started()
        return daemon

    yield start
    for daemon in started:
        daemon.close()


def multicast_options() -> list[str]:
    return [f"context resolver_multicast_port {free_udp_port()}"]


def is_create(source: str) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e.get("event") == "source_create" and e.get("source") == source


def test_two_processes_resolve_through_multicast(spawn: Callable[..., JsonProcess]) -> None:
    opts = multicast_options()
    pub = spawn("source", "md/NYSE/IBM", opts)
    source = pub.wait_for(lambda e: e["event"] == "ready")["source"]
    assert source.startswith("TCP:127.0.0.1:")
    sub = spawn("receiver", "md/NYSE/IBM", opts)
    event = sub.wait_for(is_create(source))
    assert event["clientd"] == "peer"
    wsub = spawn("wildcard", r"^md/NYSE/.*", opts)
    wsub.wait_for(is_create(source))
    other = spawn("receiver", "md/NYSE/IBM", [f"context resolver_multicast_port {free_udp_port()}"])
    other.wait_for(lambda e: e["event"] == "ready")
    assert not any(e.get("event") == "source_create" for e in other.events)  # another resolver domain


def test_two_processes_resolve_through_one_lbmrd(
    spawn: Callable[..., JsonProcess], lbmrd: Callable[[], LbmrdProcess]
) -> None:
    daemon = lbmrd()
    opts = [f"context resolver_unicast_daemon 127.0.0.1:{daemon.port}"]
    pub = spawn("source", "orders", opts)
    source = pub.wait_for(lambda e: e["event"] == "ready")["source"]
    sub = spawn("receiver", "orders", opts)
    sub.wait_for(is_create(source))
    daemon.wait_for(r"client .* added|new client", timeout=WAIT)


def test_resolution_survives_one_of_two_lbmrds_killed_mid_run(
    spawn: Callable[..., JsonProcess], lbmrd: Callable[[], LbmrdProcess]
) -> None:
    d1, d2 = lbmrd(), lbmrd()
    opts = [
        f"context resolver_unicast_daemon 127.0.0.1:{d1.port}",
        f"context resolver_unicast_daemon 127.0.0.1:{d2.port}",
        # keep advertising (sustaining forever) so a receiver created later finds the source
        "source resolver_advertisement_minimum_sustain_duration 0",
    ]
    pub = spawn("source", "quotes", opts)
    source = pub.wait_for(lambda e: e["event"] == "ready")["source"]
    first = spawn("receiver", "quotes", opts)
    first.wait_for(is_create(source))
    assert d1.stop(signal.SIGKILL) == -signal.SIGKILL
    later = spawn("receiver", "quotes", opts)
    later.wait_for(is_create(source))


def test_tr_monitor_shows_tirs_and_tqrs(spawn: Callable[..., JsonProcess]) -> None:
    opts = multicast_options()
    port = opts[0].split()[-1]
    monitor = JsonProcess(
        [
            sys.executable,
            "-m",
            "openum",
            "tr-monitor",
            "--json",
            "--duration",
            "60",
            "--option",
            f"context resolver_multicast_port {port}",
        ]
    )
    try:
        assert wait_until(lambda: any("listening" in line for line in monitor.stderr), WAIT), monitor.stderr
        pub = spawn("source", "monitored", opts)
        source = pub.wait_for(lambda e: e["event"] == "ready")["source"]
        spawn("receiver", "monitored", opts)
        tir = monitor.wait_for(lambda e: e.get("kind") == "TIR" and e.get("topic") == "monitored")
        assert tir["source"] == source and tir["transport"] == "tcp"
        monitor.wait_for(lambda e: e.get("kind") == "TQR" and e.get("topic") == "monitored")
    finally:
        monitor.proc.send_signal(signal.SIGINT)
        monitor.proc.wait(10)
        monitor.close()


def _sequential_pair(port: int, source_opts: list[str]) -> tuple[openum.Context, openum.Context]:
    base = [f"context resolver_multicast_port {port}"]
    a = openum.Context(options=base + source_opts)
    b = openum.Context(options=base)
    return a, b


def test_a_query_for_a_quiescent_source_makes_it_advertise_again() -> None:
    port = free_udp_port()
    quick = [
        f"context resolver_multicast_port {port}",
        "source resolver_advertisement_minimum_initial_duration 100",
        "source resolver_advertisement_sustain_interval 100",
        "source resolver_advertisement_minimum_sustain_duration 1",
    ]
    with openum.Context(options=quick) as a:
        src = a.create_source("sleepy")
        phase = lambda: a._on_loop_sync(lambda: a._resolver.engine.source_phase(src.id).value)  # noqa: E731
        assert wait_until(lambda: phase() == "quiescent", WAIT)
        sent_before = a.statistics().tirs_sent
        # A context created now has heard no advertisement: only its query can wake the source.
        with openum.Context(options=[f"context resolver_multicast_port {port}"]) as b:
            found = threading.Event()
            b.create_receiver(
                "sleepy",
                lambda m: None,
                attrs={"source_notification_function": (lambda s, c: found.set(), None, None)},
            )
            assert found.wait(WAIT)
            assert a.statistics().tqrs_rcved >= 1
            assert a.statistics().tirs_sent > sent_before
            assert phase() == "sustaining"  # the query restarted a full sustaining phase


def test_receiver_created_after_caching_joins_at_once_and_statistics_count() -> None:
    port = free_udp_port()
    a, b = _sequential_pair(port, [])
    try:
        a.create_source("cached")
        first = threading.Event()
        b.create_receiver(
            "cached",
            lambda m: None,
            attrs={"source_notification_function": (lambda s, c: first.set(), None, None)},
        )
        assert first.wait(WAIT)
        tirs = b.statistics().tirs_rcved
        second: list[str] = []
        b.create_receiver(
            "cached",
            lambda m: None,
            attrs={"source_notification_function": (lambda s, c: second.append(s), None, None)},
        )
        assert wait_until(lambda: len(second) == 1, WAIT)
        assert b.resolver_cache("cached") == second
        stats = b.statistics()
        assert stats.tr_rcv_topics == 1 and stats.tr_rcv_unresolved_topics == 0
        assert stats.tirs_rcved >= tirs and stats.tr_dgrams_dropped_malformed == 0
    finally:
        b.__exit__(None, None, None)
        a.__exit__(None, None, None)


def test_garbage_on_the_resolver_port_is_counted_not_fatal() -> None:
    import socket

    port = free_udp_port()
    with openum.Context(options=[f"context resolver_multicast_port {port}"]) as ctx:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
        for data in (b"\x00\x01\x00\x00no-nul", b"\xf0\x00\x00\x00", b"\x05\x00\x00\x00"):
            sock.sendto(data, ("224.9.10.11", port))
        sock.close()
        assert wait_until(lambda: ctx.statistics().tr_dgrams_dropped_malformed == 1, WAIT)
        stats = ctx.statistics()
        assert (stats.tr_dgrams_dropped_ver, stats.tr_dgrams_dropped_type) == (1, 1)
        ctx.create_source("still-alive")
        assert wait_until(lambda: ctx.statistics().tirs_sent > 0, WAIT)


def test_a_contexts_source_notification_function_is_the_default_of_its_receivers() -> None:
    port = free_udp_port()
    found: queue.Queue[tuple[str, str]] = queue.Queue()
    own = threading.Event()
    with openum.Context(options=[f"context resolver_multicast_port {port}"]) as pub:
        pub.create_source("notified/a")
        pub.create_source("notified/b")
        notify = (lambda s, c: found.put((s, c)), None, "context's")
        with openum.Context(
            options=[f"context resolver_multicast_port {port}"],
            attrs={"source_notification_function": notify},
        ) as sub:
            sub.create_receiver("notified/a", lambda m: None)
            source, clientd = found.get(timeout=WAIT)
            assert clientd == "context's" and source.startswith("TCP:")
            # A receiver's own callback wins over the context's.
            sub.create_receiver(
                "notified/b",
                lambda m: None,
                attrs={"source_notification_function": (lambda s, c: own.set(), None, None)},
            )
            assert own.wait(WAIT)
            assert found.empty()


def test_the_contexts_resolver_notification_hears_of_each_source_found_and_of_its_end() -> None:
    """resolver_source_notification_function (context): create when a source is resolved, delete when
    it leaves the resolver cache: here its session ends (EOS) when the publisher deletes it."""
    options = Ports.allocate().options()
    heard: queue.Queue[tuple[str, str, str, object]] = queue.Queue()
    notify = (
        lambda t, s, c: heard.put(("create", t, s, c)),
        lambda t, s, c: heard.put(("delete", t, s, c)),
        "mine",
    )
    with (
        openum.Context(
            options=options,
            attrs={"resolver_source_notification_function": notify},
        ) as sub,
        openum.Context(options=options) as pub,
    ):
        bos, eos = threading.Event(), threading.Event()

        def on_message(m: openum.Message) -> None:
            {openum.MsgType.BOS: bos, openum.MsgType.EOS: eos}.get(m.type, threading.Event()).set()

        sub.create_receiver("notified/ends", on_message)
        src = pub.create_source("notified/ends")
        kind, topic, source, clientd = heard.get(timeout=WAIT)
        assert (kind, topic, clientd) == ("create", "notified/ends", "mine")
        assert source == src.source_string
        assert bos.wait(WAIT)  # joined: the session's end is the source's end for this context
        src.close()
        assert eos.wait(WAIT)
        assert heard.get(timeout=WAIT) == ("delete", "notified/ends", source, "mine")
