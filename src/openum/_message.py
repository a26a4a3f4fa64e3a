"""Messages and receiver events (seed 2.11, 3.6): what a receiver callback is given.

A :class:`Message` is valid during its callback.  Its payload may be a view into a receive buffer
that is reused afterwards, so code that keeps a message past the callback calls :meth:`Message.retain`
(UM's ``lbm_msg_retain``), which copies what must outlive it; :meth:`Message.release` ends a retained
message's life (``lbm_msg_delete``).  Reading the payload of a message that was neither retained nor is
inside its callback raises :class:`~openum.InvalidStateError` instead of returning stale bytes.
"""

from __future__ import annotations

import builtins
import enum
from typing import Any

from openum._errors import InvalidStateError

__all__ = ["Message", "MsgFlags", "MsgType", "SourceEvent"]


class MsgType(enum.IntEnum):
    """``lbm_msg_t.type`` values (``LBM_MSG_*``, UM's numbers)."""

    DATA = 0
    EOS = 1
    REQUEST = 2
    RESPONSE = 3
    UNRECOVERABLE_LOSS = 4
    UNRECOVERABLE_LOSS_BURST = 5
    NO_SOURCE_NOTIFICATION = 6
    BOS = 20
    HF_RESET = 27


class MsgFlags(enum.IntFlag):
    """``lbm_msg_t.flags`` (``LBM_MSG_FLAG_*``)."""

    START_BATCH = 0x1
    END_BATCH = 0x2
    HF_PASS_THROUGH = 0x4
    RETRANSMIT = 0x8
    HF_DUPLICATE = 0x10
    IMMEDIATE = 0x20
    TOPICLESS = 0x40
    OTR = 0x100000


class SourceEvent(enum.IntEnum):
    """Source events (``LBM_SRC_EVENT_*``) given to a source's event callback."""

    CONNECT = 1
    DISCONNECT = 2
    WAKEUP = 3
    FLIGHT_SIZE_NOTIFICATION = 31


class Message:
    """One message or event delivered to a receiver callback (``lbm_msg_t``)."""

    __slots__ = (
        "_data",
        "_flags",
        "_valid",
        "properties",
        "receiver_clientd",
        "response",
        "retained",
        "sequence_number",
        "source",
        "source_clientd",
        "topic",
        "type",
    )

    def __init__(
        self,
        type: MsgType,
        topic: str,
        source: str = "",
        data: bytes | memoryview = b"",
        sequence_number: int = 0,
        flags: int = 0,
        properties: dict[str, Any] | None = None,
        source_clientd: Any = None,
        receiver_clientd: Any = None,
    ) -> None:
        self.type = type
        self.topic = topic
        self.source = source
        self._data = data
        self.sequence_number = sequence_number
        self._flags = flags
        self.properties = properties
        self.source_clientd = source_clientd
        self.receiver_clientd = receiver_clientd
        self.retained = False
        self._valid = True
        #: A ``REQUEST`` message's return address (:class:`~openum.Response`, UM's ``msg->response``):
        #: alive while the message is (its callback, or until :meth:`release` when retained); None for
        #: every other message.
        self.response: Any = None

    @property
    def flags(self) -> MsgFlags:
        """``LBM_MSG_FLAG_*`` bits of the message."""
        return MsgFlags(self._flags)

    @property
    def data(self) -> bytes | memoryview:
        """The payload: a zero-copy view during the callback, bytes once retained."""
        if not self._valid:
            raise InvalidStateError(
                "this message's payload was only valid during its callback; call msg.retain() inside the "
                "callback to keep it (seed 3.6.2)"
            )
        return self._data

    def __len__(self) -> int:
        return len(self._data)

    def bytes(self) -> bytes:
        """A copy of the payload as ``bytes``."""
        return bytes(self.data)

    def retain(self) -> Message:
        """Keep this message past its callback (``lbm_msg_retain``); copies a borrowed payload."""
        if not self._valid:
            raise InvalidStateError("retain() must be called inside the callback that received the message")
        if isinstance(self._data, memoryview):
            self._data = bytes(self._data)
        self.retained = True
        return self

    def release(self) -> None:
        """End the life of a retained message (``lbm_msg_delete``); a request's response object goes
        with it (unless :meth:`detach_response` took it)."""
        self.retained = False
        self._valid = False
        self._data = b""
        if self.response is not None:
            self.response._message_done()

    def respond(self, data: builtins.bytes | bytearray | memoryview) -> None:
        """Answer this ``REQUEST`` (``lbm_send_response``, seed 10.12.2); call it as often as needed, while
        the message lives (inside its callback, or until :meth:`release` once retained).

        The response goes over TCP to the requester's request port and reaches the callback of the
        request it answers as a ``RESPONSE`` message.  Raises :class:`~openum.InvalidStateError` for a
        message that is not a request or is no longer alive, :class:`~openum.WouldBlock` when the
        connection to the requester holds ``response_session_maximum_buffer`` bytes already, and
        ``openum.UimConnectionError`` when the requester cannot be reached (it went away)."""
        response = self.response
        if response is None:
            raise InvalidStateError(
                f"only a REQUEST message can be answered; this is a {self.type.name} message"
                if self.type is not MsgType.REQUEST
                else "this request's response object was detached (detach_response): respond through it"
            )
        if not self._valid:
            raise InvalidStateError(
                "this request's message is no longer alive: respond inside its callback, or call "
                "msg.retain() there and respond until msg.release() (seed 10.12.4)"
            )
        response.respond(data)

    def detach_response(self) -> Any:
        """Take this request's response object out of the message (seed 10.12.4): it then lives until
        its own ``close()``, whatever happens to the message."""
        response = self.response
        if response is None:
            raise InvalidStateError(f"a {self.type.name} message has no response object to detach")
        self.response = None
        return response

    def _callback_done(self) -> None:
        """Called by the library when the callback returns: a borrowed payload becomes invalid, and a
        request's response object is deleted with its message (seed 10.12.4)."""
        if not self.retained:
            self._valid = False
            if self.response is not None:
                self.response._message_done()

    def __repr__(self) -> str:
        return (
            f"<Message {self.type.name} topic={self.topic!r} source={self.source!r} "
            f"sqn={self.sequence_number} len={len(self._data)}>"
        )
