"""Simulated market data for the demo: the tick layout, its codec, the symbols and the random walk.

Topics are ``md/<venue>/<symbol>`` (e.g. ``md/NYSE/AAPL``).  Every message is one tick in a fixed
48-byte binary layout, big-endian (network byte order), version 1::

    offset  size  type   field
    0       1     u8     version     layout version, 1
    1       1     u8     flags       bit 0 (0x01) TRADE: this tick reports a trade of ``size`` at ``last``;
                                     otherwise a quote update (``size`` 0, ``last`` repeats the last trade)
                                     bits 1-7 reserved, 0
    2       2     u16    reserved    0
    4       4     u32    size        shares traded in this tick (0 for a quote update)
    8       8     u64    seq         tick number on this topic: 0, 1, 2, ... (equals the UM topic sequence
                                     number of the message, one message per tick)
    16      8     i64    time_ns     publisher's wall clock when the tick was made, ns since the Unix epoch
    24      8     i64    bid         best bid,            in units of 1/10,000 of the currency (PRICE_SCALE)
    32      8     i64    ask         best ask,            same units
    40      8     i64    last        last trade price,    same units

``struct`` format ``">BBHIQqqqq"``.  A decoder must reject a version it does not know and a payload
shorter than 48 bytes; bytes after the 48th are reserved for later versions and ignored by version 1.
About 1 % of the messages also carry UM message properties ``venue`` and ``symbol`` (strings) that
repeat what the topic says.

The prices follow one random walk per symbol (an instrument is traded on every venue around the same
mid price); ticks are spread over the topics with a popularity skew (the first symbols of
:data:`SYMBOLS` are the busiest, like real markets), and every topic gets an opening quote first.
"""

from __future__ import annotations

import random
import re
import struct
from collections.abc import Sequence
from itertools import accumulate
from typing import Final, NamedTuple

__all__ = [
    "DEFAULT_VENUES",
    "FLAG_TRADE",
    "PRICE_SCALE",
    "PROPERTY_FRACTION",
    "SYMBOLS",
    "TICK_SIZE",
    "TICK_STRUCT",
    "TICK_VERSION",
    "MarketSimulator",
    "Tick",
    "TickError",
    "check_universe",
    "decode_tick",
    "encode_tick",
    "parse_topic",
    "topic_for",
    "topics_for",
]

TICK_VERSION: Final = 1
TICK_STRUCT: Final = struct.Struct(">BBHIQqqqq")
TICK_SIZE: Final = TICK_STRUCT.size  # 48
FLAG_TRADE: Final = 0x01
PRICE_SCALE: Final = 10_000
PROPERTY_FRACTION: Final = 0.01

DEFAULT_VENUES: Final = ("NYSE", "NASDAQ", "ARCA")

#: US equity tickers, busiest first; ``--symbols N`` takes the first N.
SYMBOLS: Final = (
    "AAPL", "MSFT", "NVDA", "AMZN", "GOOGL", "META", "TSLA", "AVGO", "JPM", "V",
    "LLY", "UNH", "XOM", "MA", "JNJ", "PG", "HD", "COST", "MRK", "ABBV",
    "CVX", "KO", "PEP", "ADBE", "CRM", "WMT", "BAC", "NFLX", "AMD", "TMO",
    "MCD", "CSCO", "ACN", "LIN", "ABT", "ORCL", "DIS", "WFC", "INTC", "VZ",
    "CMCSA", "DHR", "TXN", "PFE", "NKE", "PM", "INTU", "QCOM", "IBM", "AMGN",
    "UNP", "CAT", "GE", "HON", "LOW", "SPGI", "BA", "GS", "RTX", "SBUX",
    "NEE", "T", "MS", "BLK", "ISRG", "ELV", "AMAT", "DE", "PLD", "MDT",
    "BKNG", "GILD", "ADP", "SYK", "LMT", "TJX", "MDLZ", "CVS", "C", "MMC",
    "ADI", "VRTX", "REGN", "CI", "SCHW", "AMT", "ZTS", "MO", "CB", "SO",
    "DUK", "BMY", "PYPL", "UBER", "NOW", "PANW", "SNPS", "CDNS", "MU", "F",
)  # fmt: skip

_VENUE_RE = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
_CENT = PRICE_SCALE // 100
_TRADE_SIZES = (100, 100, 100, 200, 200, 300, 400, 500, 500, 1000, 1500, 2500)


class TickError(ValueError):
    """A payload that is not a tick of a known layout version."""


class Tick(NamedTuple):
    """One decoded tick; prices in currency units (``bid``/``ask``/``last`` = wire value / PRICE_SCALE)."""

    seq: int
    time_ns: int
    bid: float
    ask: float
    last: float
    size: int
    trade: bool
    version: int = TICK_VERSION


def encode_tick(tick: Tick) -> bytes:
    """The 48-byte version-1 payload of ``tick`` (prices rounded to 1/PRICE_SCALE)."""
    if tick.version != TICK_VERSION:
        raise TickError(f"cannot encode tick layout version {tick.version}; this is version {TICK_VERSION}")
    return TICK_STRUCT.pack(
        TICK_VERSION,
        FLAG_TRADE if tick.trade else 0,
        0,
        tick.size,
        tick.seq,
        tick.time_ns,
        round(tick.bid * PRICE_SCALE),
        round(tick.ask * PRICE_SCALE),
        round(tick.last * PRICE_SCALE),
    )


def decode_tick(data: bytes | bytearray | memoryview) -> Tick:
    """Decode a tick payload; :class:`TickError` for a short payload or an unknown version."""
    if len(data) < TICK_SIZE:
        raise TickError(f"a tick is {TICK_SIZE} bytes, this payload has {len(data)}")
    version, flags, _reserved, size, seq, time_ns, bid, ask, last = TICK_STRUCT.unpack_from(data, 0)
    if version != TICK_VERSION:
        raise TickError(f"unknown tick layout version {version} (this decoder knows {TICK_VERSION})")
    return Tick(
        seq,
        time_ns,
        bid / PRICE_SCALE,
        ask / PRICE_SCALE,
        last / PRICE_SCALE,
        size,
        bool(flags & FLAG_TRADE),
        version,
    )


def topic_for(venue: str, symbol: str) -> str:
    return f"md/{venue}/{symbol}"


def topics_for(venues: Sequence[str], symbols: int) -> list[tuple[str, str, str]]:
    """``(topic, venue, symbol)`` for every venue and the first ``symbols`` of :data:`SYMBOLS`."""
    check_universe(venues, symbols)
    return [(topic_for(v, s), v, s) for v in venues for s in SYMBOLS[:symbols]]


def parse_topic(topic: str) -> tuple[str, str] | None:
    """``(venue, symbol)`` of an ``md/<venue>/<symbol>`` topic, else None."""
    parts = topic.split("/")
    if len(parts) != 3 or parts[0] != "md" or not parts[1] or not parts[2]:
        return None
    return parts[1], parts[2]


def check_universe(venues: Sequence[str], symbols: int) -> None:
    """ValueError naming what is wrong with a venue list or a symbol count."""
    if not venues:
        raise ValueError("at least one venue is needed")
    for venue in venues:
        if not _VENUE_RE.match(venue):
            raise ValueError(f"venue {venue!r}: use 1-32 letters, digits, '_' or '-'")
    if len(set(venues)) != len(venues):
        raise ValueError(f"venues repeat: {','.join(venues)}")
    if not 1 <= symbols <= len(SYMBOLS):
        raise ValueError(f"symbols per venue must be 1..{len(SYMBOLS)}, not {symbols}")


class MarketSimulator:
    """Ticks for every ``md/<venue>/<symbol>`` topic: one random walk per symbol, skewed popularity.

    ``next_ticks(n, now_ns)`` returns ``n`` ``(topic_index, payload, properties)`` triples (properties
    is None for most); ``opening(now_ns)`` one quote per topic.  Deterministic for a given seed.
    """

    def __init__(self, venues: Sequence[str], symbols: int, seed: int | None = None) -> None:
        self.rng = random.Random(seed)
        self.universe = topics_for(venues, symbols)
        self.topics = [t for t, _, _ in self.universe]
        self.venues = tuple(venues)
        self.symbols = SYMBOLS[:symbols]
        nsym = len(self.symbols)
        rng = self.rng
        # State per symbol (shared by its venues), in 1/PRICE_SCALE units on a one-cent grid.
        self._mid = [rng.randrange(20_00, 600_00) * _CENT for _ in range(nsym)]
        self._last = list(self._mid)
        self._vol = [max(1, m // 20000) for m in self._mid]  # ~0.5 bp per tick (moves in whole cents)
        self._symbol_of = [i % nsym for i in range(len(self.topics))]
        self._seq = [0] * len(self.topics)
        self._props = [{"venue": v, "symbol": s} for _, v, s in self.universe]
        weights = [1.0 / (i % nsym + 1) ** 0.8 for i in range(len(self.topics))]
        self._cum = list(accumulate(weights))

    def sent_per_topic(self) -> dict[str, int]:
        """Ticks made so far, per topic."""
        return dict(zip(self.topics, self._seq, strict=True))

    def opening(self, now_ns: int) -> list[tuple[int, bytes, dict[str, str] | None]]:
        return [self._tick(i, now_ns, trade=False) for i in range(len(self.topics))]

    def next_ticks(self, count: int, now_ns: int) -> list[tuple[int, bytes, dict[str, str] | None]]:
        rng = self.rng
        picks = rng.choices(range(len(self.topics)), cum_weights=self._cum, k=count)
        return [self._tick(i, now_ns, trade=rng.random() < 0.4) for i in picks]

    def _tick(self, index: int, now_ns: int, *, trade: bool) -> tuple[int, bytes, dict[str, str] | None]:
        rng = self.rng
        s = self._symbol_of[index]
        mid = self._mid[s] + round(rng.gauss(0.0, 1.0) * self._vol[s] / _CENT) * _CENT
        mid = max(mid, 1_00 * _CENT)
        self._mid[s] = mid
        half = max(_CENT, (mid // 20000) // _CENT * _CENT)  # ~1 bp half-spread, whole cents
        bid, ask = mid - half, mid + half
        size = 0
        if trade:
            size = rng.choice(_TRADE_SIZES)
            self._last[s] = ask if rng.random() < 0.5 else bid
        seq = self._seq[index]
        self._seq[index] = seq + 1
        payload = TICK_STRUCT.pack(
            TICK_VERSION, FLAG_TRADE if trade else 0, 0, size, seq, now_ns, bid, ask, self._last[s]
        )
        props = self._props[index] if rng.random() < PROPERTY_FRACTION else None
        return index, payload, props
