"""LBMC, UM's message layer: message header, extension headers, message properties.

Implements ``../shared/wire/lbmc-pdm-srs.md``:

* §1: carriers put several whole LBMC messages back to back in one datagram or TCP segment, each
  sized by its own ``msglen`` (:func:`decode_messages`, :func:`split_messages`);
* §2.1: the 12-byte data header (types 0, 2, 0xA) and the 4-byte control header (types 1, 8), with the
  ver/type byte (version nibble must be 0);
* §2.3: every extension-header type code; §2.4-§2.10: their byte layouts.  Every code Wireshark knows
  has a typed record; codes it does not know (and TGIDX 0x03) decode to :class:`UnknownHeader`, which
  keeps the bytes so that they round-trip;
* §2.5: APPHDR_CHAIN with its properties-length, hot-failover and gateway-info elements;
* §2.6: the message-properties block at the tail of the payload (:class:`PropertiesBlock`);
* §5: the gotchas (chain-element order, TGIDX, unknown codes are never emitted by openum's own code);
* §6.1: the verified hex (the unit tests decode it).

Two things the dissector does not define are openum conventions, marked as such where they live:
:class:`ResponseHeader` (a response's request index, carried in an EXTOPT header of openum's own
subtype) and the element order written in APPHDR_CHAIN (see :class:`AppHeaderChain`).

Two APIs.  The record API (:class:`LbmcMessage`, :func:`encode_message`, :func:`decode_message`) covers
every header.  The hot path (:func:`encode_data_into`, :func:`encode_data_topic_into`,
:func:`decode_data_fast`) builds no record: it packs/unpacks the 12-byte header of a plain data
message straight into/out of the caller's buffer and hands the payload back as a ``memoryview``.

Decoders raise :class:`~openum.wire._common.WireError` and nothing else (PRACTICES.md 6); records
validate on construction, so what can be built can be encoded.

The package's modules (private; import from :mod:`openum.wire.lbmc`):

* ``_base``: message/header type codes, limits, the header base, its registry and the layout table;
* ``_headers_core``, ``_headers_ume``, ``_headers_umq``, ``_headers_uim``: the extension headers
  (§2.4, §2.7, §2.10; §2.8; §2.9; §2.4/§2.10 UIM and routing); ``_chain``: APPHDR_CHAIN (§2.5);
* ``_properties``: message properties (§2.6); ``_message``: the record API; ``_fast``: the hot path.

Each module precompiles the ``struct.Struct`` objects it calls instead of importing them: CPython
3.11 compiles ``name.method()`` without LOAD_METHOD when ``name`` was imported (it assumes a
module), which costs a bound-method allocation per call on the encode and decode paths.
"""

from __future__ import annotations

from openum.wire.lbmc._base import (
    CONTROL_HEADER_LEN,
    DATA_HEADER_LEN,
    DATA_TYPES,
    LBMC_VERSION,
    MAX_HEADER_BODY_LEN,
    MAX_MESSAGE_LEN,
    MAX_TOPIC_NAME_LEN,
    Header,
    HeaderType,
    MessageType,
    UnknownHeader,
    header_class,
)
from openum.wire.lbmc._chain import (
    AppHeaderChain,
    AppHeaderElement,
    ChainElement,
    GatewayInfoElement,
    HotFailoverElement,
    PropertiesLengthElement,
)
from openum.wire.lbmc._fast import (
    data_message_packer,
    decode_data_fast,
    encode_data,
    encode_data_into,
    encode_data_topic_into,
    topic_name_block,
)
from openum.wire.lbmc._headers_core import (
    RESPONSE_EXTOPT_SUBTYPE,
    AppHeader,
    BatchHeader,
    DestinationContextInstanceHeader,
    ExtendedOptionHeader,
    FragmentHeader,
    LateJoinInfoHeader,
    LateJoinInfoRequestHeader,
    OtidHeader,
    RequestHeader,
    ResponseHeader,
    RetransmissionRequestHeader,
    ReturnContextInstanceHeader,
    SessionIdHeader,
    SourceIndexHeader,
    SsfControlRequestHeader,
    SsfInitHeader,
    TopicNameHeader,
    TsniHeader,
)
from openum.wire.lbmc._headers_uim import (
    AdvertisementHeader,
    AuthenticationHeader,
    ContextInfoHeader,
    ContextInstanceHeader,
    DestinationHeader,
    DomainHeader,
    GatewayCapabilitiesHeader,
    GatewayKeepaliveHeader,
    GatewayNameHeader,
    HmacHeader,
    OriginatingDomainHeader,
    PatternIndexHeader,
    PatternInterestHeader,
    PatternMultiDomainInterestHeader,
    RouteInfoHeader,
    RouteInfoNeighborHeader,
    StreamHeader,
    TopicIndexHeader,
    TopicInterestHeader,
    TopicMultiDomainInterestHeader,
    TopicSourceExtendedFunctionalityHeader,
    TopicSourceHeader,
)
from openum.wire.lbmc._headers_ume import (
    SourceRegistrationInfoHeader,
    SourceRegistrationInfoRequestHeader,
    StoreContextInstanceHeader,
    UmeAckHeader,
    UmeAckIdHeader,
    UmeCapabilityHeader,
    UmeClientLifetimeHeader,
    UmeKeepaliveHeader,
    UmeProxySourceElectionHeader,
    UmeProxySourceElectionTokenHeader,
    UmeProxySourceHeader,
    UmeRangedAckHeader,
    UmeReceiverKeepaliveHeader,
    UmeRegistrationHeader,
    UmeRegistrationResponseHeader,
    UmeSessionIdHeader,
    UmeStoreDomainHeader,
    UmeStoreGroupHeader,
    UmeStoreIdHeader,
    UmeStoreInfoExtHeader,
    UmeStoreInfoHeader,
    UmeStoreNameHeader,
)
from openum.wire.lbmc._headers_umq import (
    UmqAckHeader,
    UmqCommandHeader,
    UmqCommandResponseHeader,
    UmqIndexCommandHeader,
    UmqIndexCommandResponseHeader,
    UmqKeepaliveHeader,
    UmqLoadFactorHeader,
    UmqMessageIdHeader,
    UmqQueueManagementHeader,
    UmqRcrHeader,
    UmqRegistrationHeader,
    UmqRegistrationResponseHeader,
    UmqResubmissionHeader,
    UmqResubmitRequestHeader,
    UmqResubmitResponseHeader,
    UmqRetransmissionRequestHeader,
    UmqSessionIdHeader,
    UmqSqdReceiveHeader,
    UmqUlbMessageHeader,
    UmqUlbRcrHeader,
)
from openum.wire.lbmc._message import (
    LbmcMessage,
    control_message,
    data_message,
    decode_message,
    decode_message_at,
    decode_messages,
    encode_message,
    encode_message_into,
    message_length,
    split_messages,
)
from openum.wire.lbmc._properties import (
    PropertiesBlock,
    PropertiesInput,
    Property,
    PropertyType,
    PropertyValue,
    TypedValue,
    decode_properties,
    encode_properties,
)

__all__ = [
    "CONTROL_HEADER_LEN",
    "DATA_HEADER_LEN",
    "DATA_TYPES",
    "LBMC_VERSION",
    "MAX_HEADER_BODY_LEN",
    "MAX_MESSAGE_LEN",
    "MAX_TOPIC_NAME_LEN",
    "RESPONSE_EXTOPT_SUBTYPE",
    "AdvertisementHeader",
    "AppHeader",
    "AppHeaderChain",
    "AppHeaderElement",
    "AuthenticationHeader",
    "BatchHeader",
    "ChainElement",
    "ContextInfoHeader",
    "ContextInstanceHeader",
    "DestinationContextInstanceHeader",
    "DestinationHeader",
    "DomainHeader",
    "ExtendedOptionHeader",
    "FragmentHeader",
    "GatewayCapabilitiesHeader",
    "GatewayInfoElement",
    "GatewayKeepaliveHeader",
    "GatewayNameHeader",
    "Header",
    "HeaderType",
    "HmacHeader",
    "HotFailoverElement",
    "LateJoinInfoHeader",
    "LateJoinInfoRequestHeader",
    "LbmcMessage",
    "MessageType",
    "OriginatingDomainHeader",
    "OtidHeader",
    "PatternIndexHeader",
    "PatternInterestHeader",
    "PatternMultiDomainInterestHeader",
    "PropertiesBlock",
    "PropertiesInput",
    "PropertiesLengthElement",
    "Property",
    "PropertyType",
    "PropertyValue",
    "RequestHeader",
    "ResponseHeader",
    "RetransmissionRequestHeader",
    "ReturnContextInstanceHeader",
    "RouteInfoHeader",
    "RouteInfoNeighborHeader",
    "SessionIdHeader",
    "SourceIndexHeader",
    "SourceRegistrationInfoHeader",
    "SourceRegistrationInfoRequestHeader",
    "SsfControlRequestHeader",
    "SsfInitHeader",
    "StoreContextInstanceHeader",
    "StreamHeader",
    "TopicIndexHeader",
    "TopicInterestHeader",
    "TopicMultiDomainInterestHeader",
    "TopicNameHeader",
    "TopicSourceExtendedFunctionalityHeader",
    "TopicSourceHeader",
    "TsniHeader",
    "TypedValue",
    "UmeAckHeader",
    "UmeAckIdHeader",
    "UmeCapabilityHeader",
    "UmeClientLifetimeHeader",
    "UmeKeepaliveHeader",
    "UmeProxySourceElectionHeader",
    "UmeProxySourceElectionTokenHeader",
    "UmeProxySourceHeader",
    "UmeRangedAckHeader",
    "UmeReceiverKeepaliveHeader",
    "UmeRegistrationHeader",
    "UmeRegistrationResponseHeader",
    "UmeSessionIdHeader",
    "UmeStoreDomainHeader",
    "UmeStoreGroupHeader",
    "UmeStoreIdHeader",
    "UmeStoreInfoExtHeader",
    "UmeStoreInfoHeader",
    "UmeStoreNameHeader",
    "UmqAckHeader",
    "UmqCommandHeader",
    "UmqCommandResponseHeader",
    "UmqIndexCommandHeader",
    "UmqIndexCommandResponseHeader",
    "UmqKeepaliveHeader",
    "UmqLoadFactorHeader",
    "UmqMessageIdHeader",
    "UmqQueueManagementHeader",
    "UmqRcrHeader",
    "UmqRegistrationHeader",
    "UmqRegistrationResponseHeader",
    "UmqResubmissionHeader",
    "UmqResubmitRequestHeader",
    "UmqResubmitResponseHeader",
    "UmqRetransmissionRequestHeader",
    "UmqSessionIdHeader",
    "UmqSqdReceiveHeader",
    "UmqUlbMessageHeader",
    "UmqUlbRcrHeader",
    "UnknownHeader",
    "control_message",
    "data_message",
    "data_message_packer",
    "decode_data_fast",
    "decode_message",
    "decode_message_at",
    "decode_messages",
    "decode_properties",
    "encode_data",
    "encode_data_into",
    "encode_data_topic_into",
    "encode_message",
    "encode_message_into",
    "encode_properties",
    "header_class",
    "message_length",
    "split_messages",
    "topic_name_block",
]
