"""UDP topic resolution sockets for one context (seed 8.1, 8.1.9): binds a sans-I/O
:class:`~openum.protocol.resolution.ResolverEngine` to real sockets and the context's event loop.

- **Multicast** (no ``resolver_unicast_daemon``): a receiving socket bound to the resolver group and port
  (shared with other contexts on the host through ``SO_REUSEPORT``) joined on the resolver interface, and
  a sending socket bound to that interface with ``IP_MULTICAST_IF`` and loopback on, so that contexts on
  the same host hear each other.  The interface defaults to 127.0.0.1: nothing leaves the machine until
  a deployment sets ``default_interface`` or ``resolver_multicast_interface``.
- **Unicast**: one socket bound to the interface and the first free port of
  ``resolver_unicast_port_low..high``; datagrams go to the engine's current lbmrd.

The link runs on the context's loop thread only; the context marshals calls onto it.

Closing: :meth:`ResolverLink.finish` brings the final advertisements of deleted sources forward so the
last is due within a bound and reports when none is left; :meth:`ResolverLink.send_remaining` sends
what is still left at once, right before :meth:`ResolverLink.close`.
"""

from __future__ import annotations

import errno
import random
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from openum._errors import ConfigError, SystemCallError
from openum.config import ContextAttributes
from openum.protocol.resolution import (
    NoSourceNotification,
    Outgoing,
    ResolverEngine,
    ResolverSettings,
)
from openum.protocol.resolution._engine import Event
from openum.runtime import NS_PER_MS, EventLoop, FdEvent
from openum.transport._interfaces import InterfaceError, resolve_interface

__all__ = ["LinkStatistics", "ResolverLink", "resolver_settings"]

_MAX_DRAIN = 64  # datagrams read per readiness event before letting timers run


def _daemon_address(entry: str) -> tuple[str | None, tuple[str, int]]:
    """``[iface->]ip:port`` -> (interface or None, (ip, port))."""
    iface: str | None = None
    if "->" in entry:
        iface, entry = entry.split("->", 1)
    ip, _, port = entry.rpartition(":")
    return iface, (ip, int(port))


def resolver_settings(
    attrs: ContextAttributes, context_instance: bytes, source_options: tuple[Any, ...] = ()
) -> ResolverSettings:
    """Engine settings from a context's effective attributes (``source_options``: topic options for the
    TIRs of the context's sources, beyond its instance)."""
    daemons = attrs.get("resolver_unicast_daemon") or ()
    return ResolverSettings(
        context_instance=context_instance,
        initial_advertisements=(
            attrs.get("resolver_initial_advertisements_per_second"),
            attrs.get("resolver_initial_advertisement_bps"),
        ),
        sustain_advertisements=(
            attrs.get("resolver_sustain_advertisements_per_second"),
            attrs.get("resolver_sustain_advertisement_bps"),
        ),
        initial_queries=(
            attrs.get("resolver_initial_queries_per_second"),
            attrs.get("resolver_initial_query_bps"),
        ),
        sustain_queries=(
            attrs.get("resolver_sustain_queries_per_second"),
            attrs.get("resolver_sustain_query_bps"),
        ),
        wildcard_queries=(
            attrs.get("resolver_wildcard_queries_per_second"),
            attrs.get("resolver_wildcard_query_bps"),
        ),
        datagram_max_size=attrs.get("resolver_datagram_max_size"),
        unicast_daemons=tuple(_daemon_address(d)[1] for d in daemons),
        unicast_change_interval_ms=attrs.get("resolver_unicast_change_interval"),
        unicast_activity_timeout_ms=attrs.get("resolver_unicast_activity_timeout"),
        unicast_keepalive_interval_ms=attrs.get("resolver_unicast_keepalive_interval"),
        unicast_force_alive=attrs.get("resolver_unicast_force_alive"),
        unicast_ignore_unknown_source=attrs.get("resolver_unicast_ignore_unknown_source"),
        disable_udp=attrs.get("resolver_disable_udp_topic_resolution"),
        cache_max_entries=attrs.get("resolver_cache_maximum_entries"),
        cache_entry_timeout_ms=attrs.get("resolver_cache_entry_timeout"),
        source_options=source_options,
    )


@dataclass(frozen=True, slots=True)
class LinkStatistics:
    """Socket-level counters of the resolver link.

    ``tr_dgrams_send_failed``: datagrams the socket refused (UM's counter of that name).
    """

    tr_dgrams_send_failed: int


class ResolverLink:
    """The sockets of UDP topic resolution, driven by the context's loop."""

    def __init__(
        self,
        loop: EventLoop,
        attrs: ContextAttributes,
        context_instance: bytes,
        on_events: Callable[[list[Event]], None],
        on_no_source: Callable[[list[NoSourceNotification]], None],
        log: Any,
        rng: random.Random | None = None,
        source_options: tuple[Any, ...] = (),
    ) -> None:
        self.loop = loop
        self.log = log
        self.on_events = on_events
        self.on_no_source = on_no_source
        self.engine = ResolverEngine(
            resolver_settings(attrs, context_instance, source_options), rng or random.Random()
        )
        self._timer: int | None = None
        self._timer_deadline: int | None = None
        self._send_failed = 0
        self._finished: Callable[[], None] | None = None  # finish(): told when no final advertisement is left
        self._sockets: list[socket.socket] = []
        self._closed = False
        settings = self.engine.settings
        iface_spec = attrs.get("resolver_multicast_interface") or attrs.get("default_interface")
        try:
            self.interface = resolve_interface(iface_spec)
        except InterfaceError as exc:
            raise SystemCallError(f"topic resolution: {exc}") from None
        self.group = attrs.get("resolver_multicast_outgoing_address") or attrs.get(
            "resolver_multicast_address"
        )
        self.port = attrs.get("resolver_multicast_outgoing_port") or attrs.get("resolver_multicast_port")
        in_group = attrs.get("resolver_multicast_incoming_address") or attrs.get("resolver_multicast_address")
        in_port = attrs.get("resolver_multicast_incoming_port") or attrs.get("resolver_multicast_port")
        try:
            if settings.disable_udp:
                self._tx: socket.socket | None = None
            elif settings.unicast:
                uc_spec = attrs.get("resolver_unicast_interface") or attrs.get("default_interface")
                self.interface = resolve_interface(uc_spec)
                self._check_daemon_interfaces(attrs.get("resolver_unicast_daemon") or ())
                self._tx = self._bind_unicast(attrs)
                self._watch(self._tx)
            else:
                rx = self._bind_multicast_rx(
                    in_group, in_port, attrs.get("resolver_multicast_receiver_socket_buffer")
                )
                self._watch(rx)
                self._tx = self._bind_multicast_tx(attrs.get("resolver_multicast_ttl"))
                self._watch(self._tx)  # lbmrd-style unicast answers and errors arrive here too
        except OSError as exc:
            self.close()
            raise SystemCallError(f"topic resolution sockets: {exc.strerror or exc}") from exc
        except InterfaceError as exc:
            self.close()
            raise SystemCallError(f"topic resolution: {exc}") from None

    def _check_daemon_interfaces(self, daemons: tuple[str, ...]) -> None:
        """One socket talks to every lbmrd: a daemon's ``iface->`` must name its interface, not another."""
        for entry in daemons:
            iface, _address = _daemon_address(entry)
            if iface is not None and resolve_interface(iface) != self.interface:
                self.close()
                raise ConfigError(
                    f"context option resolver_unicast_daemon {entry}: openum talks to every lbmrd from one "
                    f"socket on resolver_unicast_interface (else default_interface), {self.interface}; a "
                    f"daemon reached through another interface ({iface}) is not implemented",
                    option="resolver_unicast_daemon",
                    scope="context",
                    value=entry,
                    allowed=f"no interface, or {self.interface}->IP:PORT",
                )

    # -- sockets ------------------------------------------------------------------------------------
    def _new_socket(self) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sockets.append(sock)
        sock.setblocking(False)
        return sock

    def _set_rcvbuf(self, sock: socket.socket, rcvbuf: int, option: str) -> None:
        if rcvbuf:
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            except OSError:
                self.log.warning("could not set the resolver receive buffer to %d bytes (%s)", rcvbuf, option)

    def _bind_multicast_rx(self, group: str, port: int, rcvbuf: int) -> socket.socket:
        sock = self._new_socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if hasattr(socket, "SO_REUSEPORT"):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        self._set_rcvbuf(sock, rcvbuf, "resolver_multicast_receiver_socket_buffer")
        sock.bind((group, port))
        mreq = socket.inet_aton(group) + socket.inet_aton(self.interface)
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
        return sock

    def _bind_multicast_tx(self, ttl: int) -> socket.socket:
        sock = self._new_socket()
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(self.interface))
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, struct.pack("B", ttl))
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
        sock.bind((self.interface, 0))
        return sock

    def _bind_unicast(self, attrs: ContextAttributes) -> socket.socket:
        sock = self._new_socket()
        option = "resolver_unicast_receiver_socket_buffer"
        self._set_rcvbuf(sock, attrs.get("resolver_unicast_receiver_socket_buffer"), option)
        low, high = attrs.get("resolver_unicast_port_low"), attrs.get("resolver_unicast_port_high")
        fixed = attrs.get("resolver_unicast_port")
        ports = [fixed] if fixed else list(range(low, high + 1))
        last: OSError | None = None
        for port in ports:
            try:
                sock.bind((self.interface, port))
                return sock
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE:
                    raise
                last = exc
        raise OSError(
            errno.EADDRINUSE,
            f"no free port for unicast topic resolution in {self.interface}:{ports[0]}-{ports[-1]} "
            f"(resolver_unicast_port_low/high): {last.strerror if last else 'all in use'}",
        )

    def _watch(self, sock: socket.socket) -> None:
        self.loop.register_fd(sock.fileno(), FdEvent.READ, self._readable, sock)

    @property
    def local_address(self) -> tuple[str, int] | None:
        if self._tx is None:
            return None
        host, port = self._tx.getsockname()
        return host, port

    # -- receiving ----------------------------------------------------------------------------------
    def _readable(self, _fd: int, _events: FdEvent, sock: socket.socket) -> None:
        events: list[Event] = []
        for _ in range(_MAX_DRAIN):
            try:
                # 65,536 bytes hold any UDP datagram over IPv4 (at most 65,507 bytes): none is truncated.
                data, addr = sock.recvfrom(65536)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:  # e.g. ICMP port unreachable reported on the unicast socket
                self.log.debug("topic resolution socket error: %s", exc)
                break
            events += self.engine.datagram_received(data, (addr[0], addr[1]), self.loop.clock.now_ns())
        if events:
            self.on_events(events)
        self.reschedule()

    # -- sending ------------------------------------------------------------------------------------
    def _send(self, datagrams: list[Outgoing]) -> bool:
        """Send ``datagrams``; False when the socket refused one (counted and logged)."""
        ok = True
        for out in datagrams:
            destination = out.destination or (self.group, self.port)
            try:
                if self._tx is not None:
                    self._tx.sendto(out.data, destination)
            except OSError as exc:
                ok = False
                self._send_failed += 1
                self.log.warning(
                    "topic resolution: sending %d bytes to %s:%d failed: %s",
                    len(out.data),
                    destination[0],
                    destination[1],
                    exc.strerror or exc,
                )
        return ok

    def _send_due(self, _clientd: Any) -> None:
        self._timer = None
        self._timer_deadline = None
        if self._closed:
            return
        ok = self._send(self.engine.poll(self.loop.clock.now_ns()))
        forgotten = self.engine.take_events()  # sources the resolver cache's expiry forgot
        if forgotten:
            self.on_events(forgotten)
        notes = self.engine.no_source_notifications()
        if notes:
            self.on_no_source(notes)
        self.reschedule()
        self._check_finished(ok)

    # -- closing ------------------------------------------------------------------------------------
    def finish(self, done: Callable[[], None], within_ns: int) -> None:
        """The context is closing: send the final advertisements left (spread as the engine spreads them,
        the last due within ``within_ns``) and call ``done()`` once none is left: at once when there is
        none, and as soon as the socket refuses a datagram (waiting longer would not help; what is left
        then goes at once from :meth:`send_remaining`)."""
        self._finished = done
        if not self._closed:
            self.engine.hasten_final_advertisements(self.loop.clock.now_ns(), within_ns)
            self.reschedule()
        self._check_finished(not self._closed)

    def _check_finished(self, ok: bool) -> None:
        done = self._finished
        if done is None or (ok and self._tx is not None and self.engine.final_advertisements_pending()):
            return
        self._finished = None
        done()

    def send_remaining(self) -> None:
        """Send what is due and every final advertisement left, at once (the context closes now)."""
        if self._closed:
            return
        now = self.loop.clock.now_ns()
        self._send(self.engine.poll(now) + self.engine.flush_final_advertisements(now))

    def reschedule(self) -> None:
        """(Re)arm the timer for the engine's next deadline; call after every engine change."""
        if self._closed:
            return
        deadline = self.engine.next_deadline()
        if deadline == self._timer_deadline:
            return
        if self._timer is not None:
            self.loop.cancel_timer(self._timer)
            self._timer = None
            self._timer_deadline = None
        if deadline is None:
            return
        delay_ms = max(0.0, (deadline - self.loop.clock.now_ns()) / NS_PER_MS)
        self._timer = self.loop.schedule_timer(delay_ms, self._send_due)
        self._timer_deadline = deadline

    def statistics(self) -> LinkStatistics:
        return LinkStatistics(self._send_failed)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._timer is not None:
            self.loop.cancel_timer(self._timer)
        for sock in self._sockets:
            try:
                self.loop.unregister_fd(sock.fileno())
            except Exception:  # the loop may already be closed
                pass
            sock.close()
        self._sockets.clear()
