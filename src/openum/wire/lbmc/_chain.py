"""LBMC APPHDR_CHAIN (0x07): the application-header chain and its elements.

Implements ``../shared/wire/lbmc-pdm-srs.md`` §2.5 (the chain layout and its element types:
properties length, hot-failover sequence number, gateway info) and §5.2 (the element-order gotcha,
explained on :class:`AppHeaderChain`).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import ClassVar, Final

from openum.wire._common import WireError
from openum.wire.lbmc._base import (
    _NHDR_NONE,
    MAX_HEADER_BODY_LEN,
    Header,
    HeaderType,
    _check_int,
    _register,
)

_CHAIN_HF_SQN: Final = 0x02
_CHAIN_GATEWAY_INFO: Final = 0x03
_CHAIN_PROPERTIES_LENGTH: Final = 0x06
_CHAIN_ELEMENT_HEADER: Final = 4
_CHAIN_MAX_DATA: Final = MAX_HEADER_BODY_LEN - 2 - _CHAIN_ELEMENT_HEADER
# Precompiled in the module that calls them, never imported (see the package docstring).
_ELEM_HDR: Final = struct.Struct(">BBH")
_U32: Final = struct.Struct(">I")
_U64: Final = struct.Struct(">Q")


@dataclass(frozen=True, slots=True)
class PropertiesLengthElement:
    """Chain element 0x06: the length of the message-properties block at the payload's tail.

    The message encoder writes it; build one yourself only for fragments (the block belongs to the
    reassembled message, §2.6)."""

    kind: ClassVar[int] = _CHAIN_PROPERTIES_LENGTH
    length: int

    def __post_init__(self) -> None:
        _check_int("PropertiesLengthElement", "length", self.length, 0xFFFFFFFF)

    def data(self) -> bytes:
        return _U32.pack(self.length)


@dataclass(frozen=True, slots=True)
class HotFailoverElement:
    """Chain element 0x02: the hot-failover sequence number, 32- or 64-bit big-endian (§2.5; the
    width real UM uses is [inferred], both decode cleanly)."""

    kind: ClassVar[int] = _CHAIN_HF_SQN
    sqn: int
    width: int = 32

    def __post_init__(self) -> None:
        if self.width not in (32, 64):
            raise WireError(f"HotFailoverElement.width must be 32 or 64, got {self.width!r}")
        _check_int("HotFailoverElement", "sqn", self.sqn, (1 << self.width) - 1)

    def data(self) -> bytes:
        return (_U32 if self.width == 32 else _U64).pack(self.sqn)


@dataclass(frozen=True, slots=True)
class GatewayInfoElement:
    """Chain element 0x03: gateway (DRO) information, opaque as far as the dissector documents."""

    kind: ClassVar[int] = _CHAIN_GATEWAY_INFO
    info: bytes

    def __post_init__(self) -> None:
        if not isinstance(self.info, bytes) or not 1 <= len(self.info) <= _CHAIN_MAX_DATA:
            raise WireError(f"GatewayInfoElement.info must be 1..{_CHAIN_MAX_DATA} bytes")

    def data(self) -> bytes:
        return self.info


@dataclass(frozen=True, slots=True)
class ChainElement:
    """Any other chain element (0x01 channel, 0x04 non-chained apphdr, 0x05 user data, ...)."""

    kind: int
    payload: bytes

    def __post_init__(self) -> None:
        _check_int("ChainElement", "kind", self.kind, 0xFE)
        if self.kind in (_CHAIN_HF_SQN, _CHAIN_GATEWAY_INFO, _CHAIN_PROPERTIES_LENGTH):
            raise WireError(f"ChainElement: kind {self.kind} has its own element class")
        if not isinstance(self.payload, bytes) or not 1 <= len(self.payload) <= _CHAIN_MAX_DATA:
            raise WireError(f"ChainElement.payload must be 1..{_CHAIN_MAX_DATA} bytes")

    def data(self) -> bytes:
        return self.payload


AppHeaderElement = PropertiesLengthElement | HotFailoverElement | GatewayInfoElement | ChainElement
_ELEMENT_TYPES: Final = (PropertiesLengthElement, HotFailoverElement, GatewayInfoElement, ChainElement)


def _decode_element(kind: int, data: bytes) -> AppHeaderElement:
    if kind == _CHAIN_PROPERTIES_LENGTH:
        if len(data) != 4:
            raise WireError(f"properties-length chain element has {len(data)} data bytes, not 4")
        return PropertiesLengthElement(_U32.unpack(data)[0])
    if kind == _CHAIN_HF_SQN:
        if len(data) == 4:
            return HotFailoverElement(_U32.unpack(data)[0], 32)
        if len(data) == 8:
            return HotFailoverElement(_U64.unpack(data)[0], 64)
        raise WireError(f"hot-failover chain element has {len(data)} data bytes, not 4 or 8")
    if kind == _CHAIN_GATEWAY_INFO:
        return GatewayInfoElement(data)
    if kind == _NHDR_NONE:
        raise WireError("chain element of type 0xFF (none)")
    return ChainElement(kind, data)


@dataclass(frozen=True, slots=True)
class AppHeaderChain(Header):
    """APPHDR_CHAIN 0x07: ``u8 res, u8 first_chain_hdr`` then elements ``[b0][len][u16 res][data]``.

    Element order on the wire (spec §2.5 and §5.2): Wireshark takes element 1's type from
    ``first_chain_hdr`` and every later element's type from *its own* first byte.  openum writes
    each later element's own type there (so Wireshark labels every element right) and, in element 1,
    the type of element 2 (0xFF when alone), so a reader following LBMC's usual "next" convention
    also reads chains of up to two elements right.  The message encoder puts the properties-length
    element first, as the spec recommends.  Decoding follows Wireshark, except that a 0xFF own-type
    byte (never a valid type) falls back to the previous element's "next" byte.
    """

    code: ClassVar[int] = HeaderType.APPHDR_CHAIN
    elements: tuple[AppHeaderElement, ...]
    res: int = 0

    def __post_init__(self) -> None:
        _check_int("AppHeaderChain", "res", self.res, 0xFF)
        if not isinstance(self.elements, tuple) or not self.elements:
            raise WireError("AppHeaderChain needs a non-empty tuple of elements")
        if not all(isinstance(e, _ELEMENT_TYPES) for e in self.elements):
            raise WireError("AppHeaderChain.elements must be chain element records")
        size = 2 + sum(_CHAIN_ELEMENT_HEADER + len(e.data()) for e in self.elements)
        if size > MAX_HEADER_BODY_LEN:
            raise WireError(f"AppHeaderChain is {size + 2} bytes; at most 255 fit a one-byte length")

    def encode_body(self) -> bytes:
        elems = self.elements
        parts = [bytes((self.res, elems[0].kind))]
        for i, elem in enumerate(elems):
            data = elem.data()
            lead = elem.kind
            if i == 0:
                lead = elems[1].kind if len(elems) > 1 else _NHDR_NONE
            parts.append(_ELEM_HDR.pack(lead, _CHAIN_ELEMENT_HEADER + len(data), 0))
            parts.append(data)
        return b"".join(parts)

    @classmethod
    def decode_body(cls, body: memoryview) -> Header:
        size = len(body)
        if size < 2:
            raise WireError("AppHeaderChain: header too short")
        res, kind = body[0], body[1]
        pos = 2
        prev_lead = kind
        elements: list[AppHeaderElement] = []
        while pos < size:
            if pos + _CHAIN_ELEMENT_HEADER > size:
                raise WireError("AppHeaderChain: truncated chain element", offset=pos)
            lead, elen = body[pos], body[pos + 1]
            if elen < _CHAIN_ELEMENT_HEADER or pos + elen > size:
                raise WireError(f"AppHeaderChain: element length {elen} is invalid", offset=pos)
            if elements:
                kind = lead if lead != _NHDR_NONE else prev_lead
            elements.append(_decode_element(kind, bytes(body[pos + _CHAIN_ELEMENT_HEADER : pos + elen])))
            prev_lead = lead
            pos += elen
        return cls(tuple(elements), res)


_register(HeaderType.APPHDR_CHAIN, AppHeaderChain.decode_body, AppHeaderChain)
