"""Handing LBMC messages to topic handlers, for every transport (seed 8.3.1, 2.9.1).

A transport session carries the messages of many topics; a receiving context subscribes to some of them.
:class:`LbmcDemux` walks a buffer of back-to-back LBMC messages (one TCP message, or a UDP datagram's
batch), hands each data message to the handler registered for its topic index (topics nobody subscribes
to are counted and dropped), and TSNI records likewise.  Plain data messages take a fast path without
building records; fragments, properties, retransmissions and control messages take the record path.
:meth:`LbmcDemux.dispatch_stream` does the same for a piece of a TCP stream, whose last message may be
incomplete.
"""

from __future__ import annotations

import abc
import struct
from dataclasses import dataclass
from typing import Any, Final

from openum.wire import WireError
from openum.wire.lbmc import (
    CONTROL_HEADER_LEN,
    DATA_HEADER_LEN,
    FRAGMENT_HEADER_LEN,
    AppHeaderChain,
    FragmentHeader,
    HeaderType,
    MessageType,
    PropertiesLengthElement,
    RequestHeader,
    TsniHeader,
    decode_fragment_fields,
    decode_message_at,
    decode_properties,
)

try:
    from mypy_extensions import mypyc_attr
except ImportError:  # installed without mypy: the attribute only matters to the compiler
    from openum._accel import mypyc_attr

__all__ = [
    "FLAG_RETRANSMIT",
    "LbmcDemux",
    "PropertiesLength",
    "RequestMark",
    "TopicHandler",
    "split_properties",
    "stream_frame_error",
]

FLAG_RETRANSMIT = 0x8  # LBM_MSG_FLAG_RETRANSMIT

# The plain data header (wire lbmc §2.1): ver/type, next header, msglen, topic index, sqn.
_unpack_data: Final = struct.Struct(">BBHII").unpack_from
_unpack_head: Final = struct.Struct(">BxH").unpack_from  # ver/type, msglen: every message starts so
_FRAG: Final = int(HeaderType.FRAG)
_DATA_TYPES: Final = frozenset({0x0, 0x2, 0xA})  # DATA, RETRANSMISSION, ... (wire lbtrm-lbtru-lbttcp §6.2)
_CONTROL_TYPES: Final = frozenset({0x1, 0x8})


def stream_frame_error(ver_type: int, msglen: int) -> str | None:
    """The LBT-TCP per-message header test (wire lbtrm-lbtru-lbttcp §6.2, as
    :class:`~openum.wire.lbttcp.StreamDecoder` applies it): what is wrong, or None."""
    mtype = ver_type & 0x0F
    if ver_type >> 4:
        return f"LBMC version {ver_type >> 4} in the TCP stream"
    if mtype in _DATA_TYPES:
        minimum = DATA_HEADER_LEN
    elif mtype in _CONTROL_TYPES:
        minimum = CONTROL_HEADER_LEN
    else:
        return f"invalid LBMC type {mtype:#x} in the TCP stream"
    if msglen < minimum:
        return f"impossible LBMC msglen {msglen} in the TCP stream"
    return None


@mypyc_attr(allow_interpreted_subclasses=True)
class TopicHandler(abc.ABC):
    """What the demultiplexer hands a topic's messages to; handlers subclass it and implement both.

    An abstract base class rather than a protocol: compiled, the demultiplexer calls a subclass's
    methods directly instead of looking them up by name for every message.
    """

    __slots__ = ()

    @abc.abstractmethod
    def on_data(
        self,
        sqn: int,
        payload: memoryview | bytes,
        now_ns: int,
        fragment: tuple[int, int, int] | None,
        flags: int,
        properties: Any,
    ) -> None:
        """A data message (or fragment) for the topic: ``payload`` is valid only during the call."""

    @abc.abstractmethod
    def on_tsni(self, sqn: int, now_ns: int) -> None:
        """A TSNI record for the topic: ``sqn`` is the last sequence number its source sent."""


class LbmcDemux:
    """Topic index -> handler, and the message counters of one received transport session."""

    __slots__ = ("lbm_msgs_no_topic_rcved", "lbm_msgs_rcved", "msgs_malformed", "topics", "tsnis_rcved")

    def __init__(self) -> None:
        self.topics: dict[int, TopicHandler] = {}
        self.lbm_msgs_rcved = 0
        self.lbm_msgs_no_topic_rcved = 0
        self.tsnis_rcved = 0
        self.msgs_malformed = 0

    def dispatch(self, view: memoryview, now_ns: int, flags: int = 0, start: int = 0) -> bool:
        """Deliver every message in ``view`` from ``start`` on; False (and counted) when one is malformed."""
        topics = self.topics
        offset = start
        end = len(view)
        # Declared so that, compiled, the header's fields are native integers (arithmetic and tests
        # without boxed objects), not what struct's unpack returns (typed Any).
        ver_type: int
        first: int
        msglen: int
        tidx: int
        sqn: int
        while offset < end:
            # Plain data messages (wire lbmc §2.1, no extension headers) inline, as decode_data_fast
            # would decode them: no function call or result tuple per message.
            if end - offset >= DATA_HEADER_LEN:
                ver_type, first, msglen, tidx, sqn = _unpack_data(view, offset)
                nxt = offset + msglen
                if not (ver_type or first) and msglen >= DATA_HEADER_LEN and nxt <= end:
                    self.lbm_msgs_rcved += 1
                    handler = topics.get(tidx)
                    if handler is None:
                        self.lbm_msgs_no_topic_rcved += 1
                    else:
                        handler.on_data(sqn, view[offset + DATA_HEADER_LEN : nxt], now_ns, None, flags, None)
                    offset = nxt
                    continue
                # A fragment of a large message as sources write them (FRAG the only extension header),
                # also without building a record.
                if not ver_type and first == _FRAG and nxt <= end:
                    fragment = decode_fragment_fields(view, offset, msglen)
                    if fragment is not None:
                        self.lbm_msgs_rcved += 1
                        handler = topics.get(tidx)
                        if handler is None:
                            self.lbm_msgs_no_topic_rcved += 1
                        else:
                            payload = view[offset + FRAGMENT_HEADER_LEN : nxt]
                            handler.on_data(sqn, payload, now_ns, fragment, flags, None)
                        offset = nxt
                        continue
            try:
                msg, offset = decode_message_at(view, offset)
            except WireError:
                self.msgs_malformed += 1
                return False
            if msg.is_data:
                self._data(msg, now_ns, flags)
            else:
                tsni = msg.header(TsniHeader)
                if tsni is not None:
                    for tidx, sqn in tsni.records:
                        self.tsnis_rcved += 1
                        handler = topics.get(tidx)
                        if handler is not None:
                            handler.on_tsni(sqn, now_ns)
        return True

    def dispatch_stream(self, view: memoryview, now_ns: int) -> int:
        """Deliver the whole messages at the start of ``view``, a piece of an LBT-TCP stream.

        LBT-TCP (wire lbtrm-lbtru-lbttcp §5.1) is LBMC messages back to back, framed by their own
        ``msglen``; a read may end inside one.  Returns the offset where the incomplete message at the
        end starts (``len(view)`` when there is none), or -1 when a message is malformed (counted in
        ``msgs_malformed``; a TCP stream cannot be resynchronised, so the caller drops the connection).

        The hot path, for one read of many plain data messages: one header unpack, one payload slice
        and one handler call per message, with no intermediate list of per-message views.
        """
        topics = self.topics
        get = topics.get
        end = len(view)
        offset = 0
        received = 0
        no_topic = 0
        ver_type: int  # native integers when compiled, as in dispatch()
        first: int
        msglen: int
        tidx: int
        sqn: int
        try:
            while True:
                remaining = end - offset
                if remaining >= DATA_HEADER_LEN:
                    ver_type, first, msglen, tidx, sqn = _unpack_data(view, offset)
                    if not (ver_type or first) and msglen >= DATA_HEADER_LEN:
                        if msglen > remaining:
                            return offset
                        received += 1
                        handler = get(tidx)
                        nxt = offset + msglen
                        if handler is None:
                            no_topic += 1
                        else:
                            handler.on_data(sqn, view[offset + DATA_HEADER_LEN : nxt], now_ns, None, 0, None)
                        offset = nxt
                        continue
                elif remaining >= CONTROL_HEADER_LEN:
                    ver_type, msglen = _unpack_head(view, offset)
                else:
                    return offset
                # Anything else: check the frame, then the record path (one message at a time).
                if stream_frame_error(ver_type, msglen) is not None:
                    self.msgs_malformed += 1
                    return -1
                if msglen > remaining:
                    return offset
                nxt = offset + msglen
                if not self.dispatch(view[offset:nxt], now_ns):
                    return -1
                offset = nxt
        finally:
            self.lbm_msgs_rcved += received
            self.lbm_msgs_no_topic_rcved += no_topic

    def _data(self, msg: Any, now_ns: int, flags: int) -> None:
        self.lbm_msgs_rcved += 1
        handler = self.topics.get(msg.topic_index)
        if handler is None:
            self.lbm_msgs_no_topic_rcved += 1
            return
        if msg.type is MessageType.RETRANSMISSION:
            flags |= FLAG_RETRANSMIT
        frag_hdr = msg.header(FragmentHeader)
        fragment = None if frag_hdr is None else (frag_hdr.first_sqn, frag_hdr.offset, frag_hdr.total_length)
        properties: Any = None
        if msg.properties is not None:
            properties = msg.properties.to_dict()
        elif fragment is not None:
            chain = msg.header(AppHeaderChain)
            if chain is not None:
                for element in chain.elements:
                    if isinstance(element, PropertiesLengthElement):
                        properties = PropertiesLength(element.length)
        request = msg.header(RequestHeader)
        if request is not None:
            properties = RequestMark(request.request_index, request.ip, request.port, properties)
        handler.on_data(msg.sqn, msg.payload, now_ns, fragment, flags, properties)


@dataclass(frozen=True, slots=True)
class RequestMark:
    """A data message that is a request (REQUEST header, seed 10.12): the requester's request index and
    request port, and what the message's own properties are (a dict, a properties length, or None).

    It travels where the properties of a message do (through the delivery controller), so that the
    receiving side can give the message a response object."""

    request_index: int
    ip: str
    port: int
    properties: Any


@dataclass(frozen=True, slots=True)
class PropertiesLength:
    """A fragmented message with properties: the last ``length`` bytes of the whole are the block."""

    length: int

    def split(self, whole: bytes) -> tuple[bytes, dict[str, Any]]:
        if self.length <= 0 or self.length > len(whole):
            return whole, {}
        try:
            props = decode_properties(whole[-self.length :]).to_dict()
        except WireError:
            return whole, {}
        return whole[: -self.length], props


def split_properties(payload: bytes, properties: Any) -> tuple[bytes, Any]:
    """For a reassembled message: separate the properties block announced by its fragments."""
    if isinstance(properties, PropertiesLength):
        return properties.split(payload)
    return payload, properties
