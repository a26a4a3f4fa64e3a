"""Bad input at the API is refused with an error naming the problem (issue 23, item 6): topic names and
wildcard patterns that could not go on the wire as UM sends names, and send flags that are not
SendFlags.  One bad name never reaches topic resolution, where it would spoil the datagram it shares
with the context's other topics."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import openum
from openum import ConfigError, MsgType, SendFlags
from tests.helpers import wait_until
from tests.integration.pubsub import WAIT, Ports

BAD_NAMES = [
    ("a\x00b", "contains a NUL character at index 1"),
    ("\udcff", "cannot be encoded as UTF-8 (character '\\udcff' at index 0"),
    ("t" * 247, "is 247 bytes long in UTF-8; UM allows at most 246"),
    ("é" * 124, "is 248 bytes long in UTF-8"),  # 124 characters, 248 bytes
    ("", "must be a non-empty string"),
]


@pytest.fixture
def ctx() -> Any:
    with openum.Context(options=Ports.allocate().options()) as context:
        yield context


@pytest.mark.parametrize(("topic", "reason"), BAD_NAMES)
def test_bad_topics_are_refused_for_sources_and_receivers(
    ctx: openum.Context, topic: str, reason: str
) -> None:
    with pytest.raises(ConfigError, match="topic") as info:
        ctx.create_source(topic)
    assert reason in str(info.value)
    with pytest.raises(ConfigError) as info:
        ctx.create_receiver(topic, lambda m: None)
    assert reason in str(info.value)
    assert ctx.statistics().sources == 0 and ctx.statistics().receivers == 0


def test_the_longest_topic_is_accepted(ctx: openum.Context) -> None:
    ctx.create_source("t" * 246).close()
    ctx.create_source("é" * 123).close()  # 246 bytes


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("^a\x00", "contains a NUL character at index 2"),
        ("\ud800", "cannot be encoded as UTF-8"),
        ("x" * 256, "is 256 bytes long in UTF-8; UM allows at most 255"),
    ],
)
def test_bad_wildcard_patterns_are_refused(ctx: openum.Context, pattern: str, reason: str) -> None:
    with pytest.raises(ConfigError, match="wildcard pattern") as info:
        ctx.create_wildcard_receiver(pattern, lambda m: None)
    assert reason in str(info.value)


def test_a_refused_topic_leaves_resolution_working_for_the_others() -> None:
    options = Ports.allocate().options()
    got = threading.Event()
    with openum.Context(options=options) as pub, openum.Context(options=options) as sub:
        with pytest.raises(ConfigError):
            pub.create_source("bad\x00topic")
        src = pub.create_source("good/topic")
        sub.create_receiver("good/topic", lambda m: got.set() if m.type is MsgType.DATA else None)
        # Resolution works: the receiver joins and data flows.

        def delivered() -> bool:
            src.send(b"x", SendFlags.FLUSH)
            return got.is_set()

        assert wait_until(delivered, WAIT, interval=0.05)
        assert pub.statistics().tr_dgrams_send_failed == 0


@pytest.mark.parametrize("flags", [-1, 0x10, 0x7FFFFFFF])
def test_send_flags_that_are_not_sendflags_are_refused(ctx: openum.Context, flags: int) -> None:
    src = ctx.create_source("flags/t")
    with pytest.raises(ValueError, match=f"send\\(\\) flags {flags:#x} are not SendFlags; allowed: ") as info:
        src.send(b"x", flags)
    assert "FLUSH (0x4)" in str(info.value) and "NONBLOCK (0x8)" in str(info.value)
    assert src.sequence_number == 0  # nothing was sent


def test_send_flags_of_another_type_are_refused(ctx: openum.Context) -> None:
    src = ctx.create_source("flags/type")
    with pytest.raises(TypeError):
        src.send(b"x", "FLUSH")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        src.send(b"x", None)  # type: ignore[arg-type]
    assert src.send(b"x", SendFlags.FLUSH | SendFlags.NONBLOCK) == 0
