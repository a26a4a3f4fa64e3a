"""Sources (seed 3.3): a publisher of one topic on a transport session.

Creating a source maps it onto a transport session of the context (seed 2.9), gives it a topic index
on that session and starts advertising it through topic resolution (seed 8.1).  The data path of each
transport lands with that transport; today's sources advertise the TCP transport (issue 4: "a source
may open its listening socket without carrying data yet").
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from openum._errors import NotSupportedError
from openum.config import Attributes
from openum.protocol.resolution import SourceSpec
from openum.runtime import forbid_in_callback
from openum.transport.tcp import TcpSourceSession
from openum.wire.lbmr import TcpTransport, TopicInfo

if TYPE_CHECKING:
    from openum._context import Context

__all__ = ["Source"]

_ids = itertools.count(1)

#: Transports whose sources this version of openum can create.
AVAILABLE_TRANSPORTS = ("tcp",)


class Source:
    """A source for one topic (``lbm_src_t``); create with :meth:`Context.create_source`."""

    def __init__(
        self, ctx: Context, topic: str, attrs: Attributes, event_callback: Any, clientd: Any
    ) -> None:
        self.id = next(_ids)
        self.ctx = ctx
        self.topic = topic
        self.attributes = attrs
        self.event_callback = event_callback
        self.clientd = clientd
        self.closed = False
        self.transport: str = attrs.get("transport")
        if self.transport not in AVAILABLE_TRANSPORTS:
            raise NotSupportedError(
                f"transport {self.transport!r} is not available in this version of openum (available: "
                f"{', '.join(AVAILABLE_TRANSPORTS)}); set 'source transport tcp'"
            )
        self.session: TcpSourceSession = ctx._tcp_session_for(attrs)
        self.topic_index = self.session.allocate_index(topic)
        transport = TcpTransport(self.session.interface, self.session.port, self.session.session_id)
        self.info = TopicInfo(topic, self.topic_index, transport)
        self.source_string: str = ctx._resolver_source_string(self.info)
        spec = SourceSpec(
            topic,
            transport,
            self.topic_index,
            ctx._advertisement_phases(attrs),
            attrs.get("resolver_advertisement_send_immediate_response"),
            attrs.get("resolver_send_final_advertisements"),
            attrs.get("resolver_send_initial_advertisement"),
        )
        ctx._add_child(self)
        ctx._on_loop(ctx._resolver.add_source, self.id, spec)

    def close(self) -> None:
        """Delete the source (``lbm_src_delete``): stop advertising; send final advertisements when
        ``resolver_send_final_advertisements`` asks for them; release the session when it is empty."""
        forbid_in_callback("Source.close()")
        if self.closed:
            return
        self.closed = True
        self.ctx._on_loop(self.ctx._resolver.remove_source, self.id)
        self.session.release_index(self.topic_index)
        self.ctx._release_tcp_session(self.session)
        self.ctx._remove_child(self)

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Source {self.topic!r} {self.source_string}{' closed' if self.closed else ''}>"
