"""What the delivery controller offers off-transport recovery (UM Concepts Guide 10.3): the gaps as they
open (OTR's initial delay runs from there) and ``fill``, which puts a recovered message back into the
stream in place while its gap is still open."""

from __future__ import annotations

from openum.protocol.delivery import Delivery, DeliveryController, DeliveryKind

MS = 1_000_000
DATA = DeliveryKind.DATA
LOSS = DeliveryKind.UNRECOVERABLE_LOSS
OTR = 0x100000


def shown(out: list[Delivery]) -> list[str]:
    return [
        f"{d.sqn}{'*' if d.flags & OTR else ''}" if d.kind is DATA else f"{d.kind.name}:{d.sqn}" for d in out
    ]


def test_gaps_are_reported_once_as_they_open() -> None:
    dc = DeliveryController(loss_timeout_ns=100 * MS, report_gaps=True)
    dc.on_message(1, b"a", 0)
    assert dc.take_new_gaps() == []
    dc.on_message(4, b"d", 0)  # 2..3 missing
    dc.on_message(3, b"c", 0)  # fills part of it: no new gap
    dc.on_message(7, b"g", 0)  # 5..6 missing
    assert dc.take_new_gaps() == [(2, 3), (5, 6)]
    assert dc.take_new_gaps() == []
    dc.on_tsni(9, MS)  # the source sent up to 9: 8..9 are missing too
    assert dc.take_new_gaps() == [(8, 9)]


def test_without_report_gaps_nothing_is_kept() -> None:
    dc = DeliveryController(loss_timeout_ns=100 * MS)
    dc.on_message(1, b"a", 0)
    dc.on_message(4, b"d", 0)
    assert dc.take_new_gaps() == []


def test_fill_delivers_in_place_with_the_flags_given_and_releases_what_was_held() -> None:
    dc = DeliveryController(loss_timeout_ns=100 * MS, report_gaps=True)
    dc.on_message(1, b"a", 0)
    assert shown(dc.on_message(3, b"c", 0)) == []  # held behind 2
    taken, out = dc.fill(2, b"b", MS, None, OTR, None)
    assert taken and shown(out) == ["2*", "3"]
    assert [d.payload for d in out] == [b"b", b"c"]
    assert dc.statistics().msgs_delivered == 3 and dc.next_deadline() is None


def test_fill_refuses_what_the_dc_has_resolved_or_never_knew() -> None:
    dc = DeliveryController(loss_timeout_ns=10 * MS)
    assert dc.fill(5, b"x", 0) == (False, [])  # nothing seen yet
    dc.on_message(1, b"a", 0)
    dc.on_message(4, b"d", 0)
    assert dc.fill(1, b"a", 0) == (False, [])  # delivered already
    assert dc.fill(4, b"d", 0) == (False, [])  # held already
    assert dc.fill(9, b"i", 0) == (False, [])  # beyond the highest sqn known: the transport's
    # The loss timer ran out: 2 and 3 are declared lost first, then 2 is no longer open.
    taken, out = dc.fill(2, b"b", 10 * MS)
    assert not taken and shown(out) == ["UNRECOVERABLE_LOSS:2", "UNRECOVERABLE_LOSS:3", "4"]


def test_fill_in_arrival_order_delivers_at_once() -> None:
    dc = DeliveryController(ordered=-1, loss_timeout_ns=100 * MS)
    dc.on_message(1, b"a", 0)
    assert shown(dc.on_message(4, b"d", 0)) == ["4"]
    taken, out = dc.fill(3, b"c", 0, None, OTR)
    assert taken and shown(out) == ["3*"]
    assert dc.fill(3, b"c", 0) == (False, [])


def test_fill_reassembles_a_recovered_fragment_with_the_rest() -> None:
    dc = DeliveryController(loss_timeout_ns=100 * MS)
    dc.on_message(1, b"a", 0)
    dc.on_message(2, b"he", 0, fragment=(2, 0, 6))
    dc.on_message(4, b"lo", 0, fragment=(2, 4, 6))
    taken, out = dc.fill(3, b"l ", 0, (2, 2, 6), OTR)
    assert taken and [(d.sqn, d.payload, d.first_sqn) for d in out] == [(4, b"hel lo", 2)]
