"""The bench subscriber's in-order check (Verifier): counts, where the gaps were, CPU time and sleeps."""

from __future__ import annotations

from openum.cli._bench._common import HELLO, MAX_GAPS_LISTED, Verifier


def feed(verifier: Verifier, counters: list[int]) -> int:
    """The subscriber's fast path, as _openum_worker.sub runs it."""
    expected, checkpoint = -1, verifier.checkpoint
    for c in counters:
        if c == expected:
            expected += 1
            if expected == checkpoint:
                checkpoint = verifier.at_checkpoint(expected)
        else:
            expected = verifier.slow(c, expected)
            checkpoint = verifier.checkpoint
    return expected


def test_an_in_order_run_is_complete_with_no_gaps_listed() -> None:
    v = Verifier(100)
    expected = feed(v, [HELLO, HELLO, *range(100)])
    result = v.result(expected)
    assert result["complete"] and result["received"] == 100 and result["missing"] == 0
    assert result["gap_list"] == []
    assert v.synced.is_set() and v.done.is_set()
    assert result["cpu_seconds"] >= 0 and result["sleeps"] >= 0


def test_gaps_are_counted_and_listed_where_they_began() -> None:
    v = Verifier(100)
    counters = [c for c in range(100) if not (10 <= c < 13 or c == 50)]
    result = v.result(feed(v, counters))
    assert result["gaps"] == 2 and result["missing"] == 4 and result["received"] == 96
    assert result["gap_list"] == [[10, 3], [50, 1]]
    assert not result["complete"]


def test_only_the_first_gaps_are_listed() -> None:
    v = Verifier(1000)
    counters = [c for c in range(1000) if c % 10]  # a gap at every multiple of 10 after 0
    result = v.result(feed(v, [0, *counters]))
    assert result["gaps"] == 99
    assert len(result["gap_list"]) == MAX_GAPS_LISTED
    assert result["gap_list"][0] == [10, 1]
