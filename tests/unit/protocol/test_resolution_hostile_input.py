"""Topic resolution fed by strangers, under a fake clock (issue 23, items 2, 4 and 9): remote wildcard
patterns cost a bounded number of steps (docs/topic-resolution.md), the resolver cache holds at most
``resolver_cache_maximum_entries`` sources learned from the network and forgets the ones not advertised
for ``resolver_cache_entry_timeout``, and every drop is a named counter."""

from __future__ import annotations

import re
import string
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openum.protocol.resolution import (
    MAX_PATTERN_LENGTH,
    MAX_PROGRAM_SIZE,
    WILDCARD_TQR_WORK_LIMIT,
    MatchBudget,
    PatternRefusedError,
    ResolverEngine,
    SourceDiscovered,
    SourceForgotten,
    WorkLimitExceededError,
    compile_remote_pattern,
)
from openum.wire.lbmr import (
    PATTERN_PCRE,
    TMR_LEAVE,
    ContextInstanceOption,
    LbmrPacket,
    TcpTransport,
    TopicInfo,
    TopicManagement,
    TopicManagementRecord,
    WildcardQuery,
    WildcardResolution,
    decode_packet,
    encode_packet,
    pack_records,
)
from tests.unit.protocol._trnet import MS, engine, receiver, source

STRANGER = ("127.0.0.2", 9999)
#: The attack of issue 23: 79 bytes on the wire, seconds to minutes of backtracking in Python's ``re``.
DOT_STARS = "(.*)" * 20 + "\x01"
TOPICS = ("a" * 200, "a" * 120 + "!", "Market/US/IBM")
#: Adversarial patterns (exponential or high-polynomial for a backtracking matcher) and what they match
#: of ``TOPICS``.
ADVERSARIAL = {
    DOT_STARS: set(),
    "(a+)+$": {TOPICS[0]},
    "(a|aa)*b": set(),
    "(a*)*$": set(TOPICS),
    "(.*a){12}x": set(),
}
#: One TQR's matching never takes more steps than this (the limit, plus one position's work at most).
TQR_BOUND = WILDCARD_TQR_WORK_LIMIT + 2 * MAX_PROGRAM_SIZE


def _wildcard_tqr(pattern: str, pattern_type: int = PATTERN_PCRE) -> bytes:
    return encode_packet(LbmrPacket(WildcardResolution((WildcardQuery(pattern, pattern_type),))))


def _publisher(*topics: str) -> ResolverEngine:
    """An engine advertising ``topics`` (no rate limit), past its first advertisements (nothing due at
    5 ms)."""
    eng = engine(1, initial_advertisements=(0, 0), sustain_advertisements=(0, 0))
    for i, topic in enumerate(topics, 1):
        eng.add_source(i, source(topic, index=i), 0)
    eng.poll(0)
    return eng


def _answers(eng: ResolverEngine, data: bytes, now: int = 5 * MS) -> set[str]:
    """The topics ``eng`` advertises in answer to ``data``."""
    eng.datagram_received(data, STRANGER, now)
    topics: set[str] = set()
    for out in eng.poll(now):
        topics |= {info.topic for info in getattr(decode_packet(out.data).body, "infos", ())}
    return topics


# -- remote wildcard patterns -------------------------------------------------------------------------


@pytest.mark.parametrize("pattern", ADVERSARIAL)
def test_an_adversarial_wildcard_tqr_costs_at_most_the_documented_bound(pattern: str) -> None:
    topics = TOPICS
    eng = _publisher(*topics)
    started = time.process_time()
    answered = _answers(eng, _wildcard_tqr(pattern))
    cpu = time.process_time() - started
    stats = eng.statistics()
    assert stats.wildcard_tqrs_rcved == 1
    assert 0 < stats.wildcard_match_steps <= TQR_BOUND
    # each topic costs at most 2 x program size x (characters + 1) steps: linear, whatever the pattern
    size = compile_remote_pattern(pattern).size
    assert stats.wildcard_match_steps <= sum(2 * size * (len(t) + 1) for t in topics)
    assert cpu < 2.0, f"{cpu:.3f} s of CPU for one TQR"  # generous: ~0.01 s; Python's re: minutes
    assert answered == ADVERSARIAL[pattern]


def test_a_pattern_that_needs_too_much_work_is_refused_and_counted() -> None:
    topics = [f"{i:03d}" + "a" * 240 for i in range(100)]
    eng = _publisher(*topics)
    assert _answers(eng, _wildcard_tqr(DOT_STARS)) == set()
    stats = eng.statistics()
    assert stats.wildcard_tqrs_dropped_work == 1
    assert WILDCARD_TQR_WORK_LIMIT < stats.wildcard_match_steps <= TQR_BOUND
    # an anchored pattern is cheap against the same topics, and answered
    before = stats.wildcard_match_steps
    assert _answers(eng, _wildcard_tqr("^0"), 6 * MS) == {t for t in topics if t.startswith("0")}
    after = eng.statistics()
    assert after.wildcard_tqrs_dropped_work == 1
    assert after.wildcard_match_steps - before <= sum(2 * 3 * (len(t) + 1) for t in topics)


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        (r"(a)\1", r"the escape \\1"),
        ("(?=a)a", r"'\(\?' group"),
        ("(?<!x)a", r"'\(\?' group"),
        ("(?i)a", r"'\(\?' group"),
        ("(?>a+)b", r"'\(\?' group"),
        ("a++b", "quantifier after a quantifier"),
        (r"\bW", r"the escape \\b"),
        ("[[:alpha:]]", "POSIX"),
        ("x{2", r"'\{'"),
        ("W" * (MAX_PATTERN_LENGTH + 1), "longer than the 255"),
        ("(W{100}){100}", f"more than {MAX_PROGRAM_SIZE} instructions"),
        ("(unclosed", r"missing '\)'"),
    ],
)
def test_patterns_outside_the_supported_syntax_are_refused_counted_and_not_answered(
    pattern: str, reason: str
) -> None:
    with pytest.raises(PatternRefusedError, match=reason):
        compile_remote_pattern(pattern)
    if len(pattern) > MAX_PATTERN_LENGTH:
        return  # the wire refuses it already (a TQR carries at most 255 bytes of pattern)
    eng = _publisher("W", "WW")
    assert _answers(eng, _wildcard_tqr(pattern)) == set()
    assert _answers(eng, _wildcard_tqr(pattern), 6 * MS) == set()  # the refusal is cached: no work
    stats = eng.statistics()
    assert stats.wildcard_tqrs_dropped_pattern == 2
    assert stats.wildcard_match_steps == 0


def test_a_budget_is_shared_by_the_topics_of_one_query() -> None:
    pattern = compile_remote_pattern("(a|aa)*b")
    budget = MatchBudget(1000)
    assert not pattern.search("a" * 10, budget)
    used = budget.used
    assert 0 < used < 1000
    with pytest.raises(WorkLimitExceededError):
        pattern.search("a" * 1000, budget)
    assert 1000 < budget.used <= 1000 + 2 * pattern.size


# Supported syntax, generated: the matcher answers as Python's re (ASCII classes) does.
_ALPHABET = "ab/.\n"
_atoms = st.sampled_from(
    ["a", "b", "/", r"\.", ".", "[ab]", "[^a]", "[a-b/]", r"\d", r"\w", r"\s", r"\W", "^", "$", r"\x61"]
)


def _quantified(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    quant = st.sampled_from(["", "", "*", "+", "?", "*?", "{2}", "{1,3}", "{0,}", "+?"])
    return st.tuples(inner, quant).map(lambda t: t[0] + t[1] if not (t[1] and t[0] in ("^", "$")) else t[0])


_patterns = st.recursive(
    _quantified(_atoms),
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=4).map("".join),
        st.lists(inner, min_size=2, max_size=3).map("|".join),
        _quantified(inner.map(lambda p: f"({p})")),
        _quantified(inner.map(lambda p: f"(?:{p})")),
    ),
    max_leaves=8,
)


@settings(max_examples=400, deadline=None)
@given(_patterns, st.lists(st.text(alphabet=_ALPHABET, max_size=12), min_size=1, max_size=5))
def test_the_matcher_answers_as_re_search_does(pattern: str, topics: list[str]) -> None:
    compiled = compile_remote_pattern(pattern)
    expected = re.compile(pattern, re.ASCII)
    for topic in topics:
        assert compiled.search(topic, MatchBudget(10**9)) == (expected.search(topic) is not None), topic


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=string.printable, max_size=40))
def test_any_pattern_text_compiles_or_is_refused_cleanly(pattern: str) -> None:
    try:
        compiled = compile_remote_pattern(pattern)
    except PatternRefusedError as exc:
        message = str(exc)
    else:
        message = ""
    if message:
        assert "remote wildcard" in message or "accepted from the network" in message
        return
    budget = MatchBudget(10**9)
    compiled.search("Market/US/IBM", budget)
    assert budget.used <= 2 * compiled.size * (len("Market/US/IBM") + 1)


# -- the resolver cache -------------------------------------------------------------------------------


def _forged(n: int, start: int = 0, topic: str = "forged/{i}") -> list[bytes]:
    infos = [
        TopicInfo(
            topic.format(i=i),
            i,
            TcpTransport("10.9.0.1", 1 + i % 60000, i),
            0,
            (ContextInstanceOption(b"evil\x00\x00\x00\x00"),),
        )
        for i in range(start, start + n)
    ]
    return pack_records((), infos, 65000)


@pytest.mark.slow  # ~5 s: 200,000 TIRs decoded in Python
def test_200000_forged_tirs_leave_the_cache_within_its_limit_and_count_evictions() -> None:
    eng = engine(2)  # default settings: resolver_cache_maximum_entries 100,000
    limit = eng.settings.cache_max_entries
    assert limit == 100_000
    eng.add_source(1, source("mine"), 0)
    discovered = forgotten = 0
    for k, data in enumerate(_forged(200_000)):
        for ev in eng.datagram_received(data, STRANGER, k * MS):
            discovered += isinstance(ev, SourceDiscovered)
            forgotten += isinstance(ev, SourceForgotten) and ev.reason == "evicted"
    stats = eng.statistics()
    assert stats.tirs_rcved == 200_000
    assert stats.cache_entries == limit + 1  # the local source is never evicted
    assert stats.cache_entries_evicted == forgotten == 100_000
    assert discovered == 200_000
    assert [i.topic for i in eng.cached_sources("mine")] == ["mine"]
    assert eng.cached_sources("forged/99999") == []  # the least recently heard went first
    assert len(eng.cached_sources("forged/100000")) == 1


def test_the_least_recently_heard_source_is_evicted_a_readvertised_one_stays() -> None:
    eng = engine(2, cache_max_entries=3)
    for i in range(3):
        eng.datagram_received(_forged(1, i)[0], STRANGER, i * MS)
    eng.datagram_received(_forged(1, 0)[0], STRANGER, 10 * MS)  # source 0 advertises again
    events = eng.datagram_received(_forged(1, 3)[0], STRANGER, 11 * MS)
    assert [(type(e).__name__, e.topic) for e in events] == [
        ("SourceForgotten", "forged/1"),
        ("SourceDiscovered", "forged/3"),
    ]
    assert {i.topic for i in eng.cached_sources()} == {"forged/0", "forged/2", "forged/3"}
    assert eng.statistics().cache_entries_evicted == 1


def test_a_source_that_stops_advertising_expires_under_the_fake_clock() -> None:
    eng = engine(2, cache_entry_timeout_ms=60_000)
    eng.add_receiver(1, receiver("forged/0"), 0)
    eng.datagram_received(_forged(1, 0)[0], STRANGER, 0)
    eng.datagram_received(_forged(1, 1)[0], STRANGER, 0)
    eng.datagram_received(_forged(1, 1)[0], STRANGER, 30_000 * MS)  # source 1 keeps advertising
    deadline = eng.next_deadline()
    assert deadline is not None and deadline <= 60_000 * MS
    eng.poll(60_000 * MS - 1)
    assert eng.take_events() == []
    assert len(eng.cached_sources()) == 2
    eng.poll(60_000 * MS)
    events = eng.take_events()
    assert [(type(e).__name__, e.topic, getattr(e, "reason", "")) for e in events] == [
        ("SourceForgotten", "forged/0", "expired")
    ]
    assert [i.topic for i in eng.cached_sources()] == ["forged/1"]
    assert eng.statistics().cache_entries_expired == 1
    eng.poll(90_000 * MS)
    assert eng.cached_sources() == [] and eng.statistics().cache_entries_expired == 2
    # a later TIR puts it back, discovered again
    events = eng.datagram_received(_forged(1, 0)[0], STRANGER, 91_000 * MS)
    assert [type(e).__name__ for e in events] == ["SourceDiscovered"]


def test_local_sources_never_expire_and_timeout_zero_keeps_everything() -> None:
    eng = engine(2, cache_entry_timeout_ms=1000)
    eng.add_source(1, source("mine"), 0)
    eng.poll(10_000_000 * MS)
    assert [i.topic for i in eng.cached_sources()] == ["mine"]
    keep = engine(3, cache_entry_timeout_ms=0, cache_max_entries=0)
    for data in _forged(5000):
        keep.datagram_received(data, STRANGER, 0)
    keep.poll(10**18)
    assert keep.statistics().cache_entries == 5000
    assert keep.statistics().cache_entries_expired == keep.statistics().cache_entries_evicted == 0


def test_topic_management_records_that_are_not_attributable_are_counted() -> None:
    eng = engine(2)
    other_type = TopicManagementRecord("forged/0", 0x7, 0)
    eng.datagram_received(encode_packet(LbmrPacket(TopicManagement((other_type,)))), STRANGER, 0)
    assert eng.statistics().tmr_records_ignored == 1
    leave_without_sender = TopicManagementRecord("forged/0", TMR_LEAVE, 0x80)
    eng.datagram_received(encode_packet(LbmrPacket(TopicManagement((leave_without_sender,)))), STRANGER, 0)
    stats = eng.statistics()
    assert stats.tmr_records_ignored == 2
    assert stats.final_advertisements_rcved == 0
