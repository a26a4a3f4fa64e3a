"""paced_batches: what a paced sender sends when, and when it flushes (a fake clock, no sleeping)."""

from __future__ import annotations

import pytest

from openum.cli._pacing import paced_batches


class FakeTime:
    """A clock that moves only when slept on, or when the test says so; records the flushes."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []
        self.flushes: list[int] = []
        self.sent = 0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds > 0
        self.sleeps.append(seconds)
        self.now += seconds

    def flush(self) -> None:
        self.flushes.append(self.sent)


def run(fake: FakeTime, count: int, rate: float, cost: float = 0.0, **kw: object) -> list[int]:
    """Drive the generator as a sender does; each message takes ``cost`` seconds to send."""
    dues = []
    for due in paced_batches(count, rate, fake.flush, clock=fake.clock, sleep=fake.sleep, **kw):  # type: ignore[arg-type]
        assert due > fake.sent
        dues.append(due)
        fake.now += (due - fake.sent) * cost
        fake.sent = due
    return dues


def test_a_sender_that_keeps_up_flushes_each_time_it_catches_up_and_sleeps_until_the_next_is_due() -> None:
    fake = FakeTime()
    dues = run(fake, 5, 1000.0)
    # Message i is due at i ms: one a batch, each flushed before the sleep to the next.
    assert dues == [1, 2, 3, 4, 5]
    assert fake.flushes == [1, 2, 3, 4]  # the last is the caller's to flush
    assert fake.sleeps == pytest.approx([0.001] * 4)


def test_a_sender_behind_its_rate_gets_everything_due_at_once_and_flushes_only_when_it_caught_up() -> None:
    fake = FakeTime()
    # 1000 msgs/s, but 3 ms pass before the sender starts: 4 messages are due at once.
    fake.now = 0.003
    dues = run(fake, 10, 1000.0, start=0.0)
    assert dues[0] == 4
    assert fake.flushes[0] == 4  # no flush before the first catch-up
    assert dues[-1] == 10
    assert fake.flushes == [4, 5, 6, 7, 8, 9]


def test_a_slow_sender_is_never_told_to_flush_while_it_stays_behind() -> None:
    fake = FakeTime()
    # Each send takes 2 ms at 1000 msgs/s: always behind, so batches only grow; never caught up.
    dues = run(fake, 50, 1000.0, cost=0.002)
    assert fake.flushes == []
    assert fake.sleeps == []
    assert dues[-1] == 50
    sizes = [b - a for a, b in zip([0, *dues], dues, strict=False)]
    assert sizes[:4] == [1, 2, 4, 8]  # each batch: what fell due while the last one was sent


def test_the_schedule_holds_on_average_whatever_the_sender_costs() -> None:
    for cost in (0.0, 0.0004, 0.0009):
        fake = FakeTime()
        run(fake, 1000, 1000.0, cost=cost)
        # 1000 messages at 1000 msgs/s: the last is due at 0.999 s and sent by about then.
        assert 0.998 <= fake.now <= 1.0 + cost, cost


def test_unlimited_sends_everything_in_chunks_without_a_flush_or_a_sleep() -> None:
    fake = FakeTime()
    assert run(fake, 2500, 0.0, chunk=1024) == [1024, 2048, 2500]
    assert fake.flushes == [] and fake.sleeps == []


def test_the_chunk_caps_a_batch_of_a_sender_far_behind() -> None:
    fake = FakeTime()
    fake.now = 10.0
    assert run(fake, 3000, 1000.0, start=0.0, chunk=1000) == [1000, 2000, 3000]


def test_a_sleep_that_returns_true_ends_the_batches() -> None:
    fake = FakeTime()
    stopped = []

    def stop_wait(seconds: float) -> bool:
        stopped.append(seconds)
        return True  # the stop event is set

    dues = list(paced_batches(100, 10.0, fake.flush, clock=fake.clock, sleep=stop_wait))
    assert dues == [1]  # the first message, then the wait for the second was stopped
    assert len(stopped) == 1


def test_no_flush_callable_for_a_sender_that_holds_nothing_back() -> None:
    fake = FakeTime()
    dues = []
    for due in paced_batches(3, 1000.0, None, clock=fake.clock, sleep=fake.sleep):
        dues.append(due)
    assert dues == [1, 2, 3]


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="count and quantum must be >= 0 and chunk >= 1"):
        list(paced_batches(-1, 1.0, None))
    with pytest.raises(ValueError, match=r"quantum=-0\.1"):
        list(paced_batches(1, 1.0, None, quantum=-0.1))
    with pytest.raises(ValueError, match="chunk=0"):
        list(paced_batches(1, 1.0, None, chunk=0))


def test_a_quantum_makes_a_sender_that_caught_up_wait_for_a_stretch_of_messages() -> None:
    fake = FakeTime()
    # 10,000 msgs/s with a 1 ms quantum: after catching up, the sender sleeps until 10 more are due.
    dues = run(fake, 35, 10_000.0, quantum=0.001)
    assert dues == [1, 11, 21, 31, 35]
    assert fake.flushes == [1, 11, 21, 31]
    assert fake.sleeps == pytest.approx([0.001] * 4)
    # Never early, late by less than a quantum: messages 31-34 (due at 3.1-3.4 ms) went at 4 ms.
    assert fake.now == pytest.approx(0.004)


def test_a_quantum_shorter_than_a_message_interval_is_one_message() -> None:
    fake = FakeTime()
    assert run(fake, 3, 10.0, quantum=0.001) == [1, 2, 3]
