"""The demo's tick layout (docs/demo.md): encoder, decoder, byte offsets, and the market simulator."""

from __future__ import annotations

import struct
from types import ModuleType

import pytest


@pytest.fixture(scope="module")
def ticks() -> ModuleType:
    """``openum.demo.ticks``, imported when the tests run rather than at collection.

    Importing ``openum.demo`` sets the attribute ``openum.demo``, which
    tests/unit/test_architecture.py::test_public_api_is_curated does not list among the subpackages yet.
    """
    import openum.demo.ticks

    return openum.demo.ticks


def test_round_trip(ticks: ModuleType) -> None:
    tick = ticks.Tick(
        seq=41, time_ns=1_700_000_000_123_456_789, bid=187.23, ask=187.25, last=187.25, size=300, trade=True
    )
    data = ticks.encode_tick(tick)
    assert len(data) == ticks.TICK_SIZE == 48
    assert ticks.decode_tick(data) == tick
    quote = tick._replace(size=0, trade=False, seq=0)
    assert ticks.decode_tick(ticks.encode_tick(quote)) == quote
    assert ticks.decode_tick(memoryview(bytearray(ticks.encode_tick(quote)))) == quote


def test_fixed_layout_offsets_big_endian(ticks: ModuleType) -> None:
    tick = ticks.Tick(seq=7, time_ns=123, bid=1.5, ask=1.75, last=1.6, size=200, trade=True)
    data = ticks.encode_tick(tick)
    assert data[0] == ticks.TICK_VERSION == 1
    assert data[1] == ticks.FLAG_TRADE
    assert data[2:4] == b"\0\0"
    assert struct.unpack_from(">I", data, 4)[0] == 200
    assert struct.unpack_from(">Q", data, 8)[0] == 7
    assert struct.unpack_from(">q", data, 16)[0] == 123
    assert struct.unpack_from(">qqq", data, 24) == (15_000, 17_500, 16_000)
    assert ticks.PRICE_SCALE == 10_000
    assert ticks.TICK_STRUCT.format == ">BBHIQqqqq"


def test_decoder_rejects_short_payloads_and_unknown_versions(ticks: ModuleType) -> None:
    data = ticks.encode_tick(ticks.Tick(0, 0, 1.0, 1.01, 1.0, 0, False))
    with pytest.raises(ticks.TickError, match="48 bytes"):
        ticks.decode_tick(data[:47])
    with pytest.raises(ticks.TickError, match="version 2"):
        ticks.decode_tick(b"\x02" + data[1:])
    with pytest.raises(ticks.TickError):
        ticks.encode_tick(ticks.Tick(0, 0, 1.0, 1.01, 1.0, 0, False, version=2))
    # Bytes after the 48th are reserved for later versions and ignored by version 1.
    assert ticks.decode_tick(data + b"extra") == ticks.decode_tick(data)


def test_topics_and_universe(ticks: ModuleType) -> None:
    assert len(set(ticks.SYMBOLS)) == len(ticks.SYMBOLS) == 100
    universe = ticks.topics_for(("NYSE", "ARCA"), 3)
    assert [topic for topic, _, _ in universe] == [
        "md/NYSE/AAPL",
        "md/NYSE/MSFT",
        "md/NYSE/NVDA",
        "md/ARCA/AAPL",
        "md/ARCA/MSFT",
        "md/ARCA/NVDA",
    ]
    assert ticks.parse_topic("md/NYSE/AAPL") == ("NYSE", "AAPL")
    assert ticks.parse_topic("md/NYSE") is None
    assert ticks.parse_topic("other/NYSE/AAPL") is None
    with pytest.raises(ValueError, match="repeat"):
        ticks.check_universe(("NYSE", "NYSE"), 1)
    with pytest.raises(ValueError, match=r"1\.\.100"):
        ticks.check_universe(("NYSE",), 101)
    with pytest.raises(ValueError, match="venue"):
        ticks.check_universe(("NY/SE",), 1)


def test_simulator_ticks_decode_and_follow_the_rules(ticks: ModuleType) -> None:
    sim = ticks.MarketSimulator(("NYSE", "NASDAQ", "ARCA"), 5, seed=3)
    opening = sim.opening(1_000)
    assert [i for i, _, _ in opening] == list(range(15))  # one opening quote per topic
    made = opening + sim.next_ticks(5000, 2_000)
    seqs: dict[int, int] = {}
    trades = with_props = 0
    for index, payload, props in made:
        tick = ticks.decode_tick(payload)
        assert tick.seq == seqs.get(index, 0)  # 0, 1, 2, ... per topic
        seqs[index] = tick.seq + 1
        assert 0 < tick.bid < tick.ask
        for price in (tick.bid, tick.ask, tick.last):
            assert round(price * 100, 6) == round(price * 100)  # a one-cent grid
        assert tick.trade == (tick.size > 0)
        trades += tick.trade
        if props is not None:
            with_props += 1
            _, venue, symbol = sim.universe[index]
            assert props == {"venue": venue, "symbol": symbol}
    assert sim.sent_per_topic() == {sim.topics[i]: n for i, n in seqs.items()}
    assert 1000 < trades < 3000
    assert 10 < with_props < 200  # about 1 %
    counts = sorted(seqs.items(), key=lambda kv: -kv[1])
    assert sim.universe[counts[0][0]][2] == "AAPL"  # the first symbols are the busiest


def test_simulator_is_deterministic_for_a_seed(ticks: ModuleType) -> None:
    a = ticks.MarketSimulator(("NYSE",), 10, seed=42).next_ticks(200, 5)
    b = ticks.MarketSimulator(("NYSE",), 10, seed=42).next_ticks(200, 5)
    c = ticks.MarketSimulator(("NYSE",), 10, seed=43).next_ticks(200, 5)
    assert a == b
    assert a != c
