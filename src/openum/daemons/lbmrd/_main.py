"""``lbmrd``: the command line and the I/O driver around :class:`Forwarder` (seed §15.1; spec 06 C.1).

:func:`add_arguments` defines the flags (UM's, plus openum's ``--dump-config`` and log rolling);
:func:`run` carries them out; :func:`main` is a standalone entry point.  ``openum lbmrd`` (in
:mod:`openum.cli`) registers the same flags and calls :func:`run`.

The driver is one UDP socket and a :mod:`selectors` loop: read every datagram that is ready, hand it to
the forwarder with the monotonic time, send what it returns, run the dead-client scan when it is due.
SIGTERM and SIGINT stop it cleanly (exit 0, after a final statistics line); SIGUSR1 logs the
statistics and carries on.

Exit status: 0 success; 1 the UDP port could not be bound; 2 bad usage, configuration, interface or
log file.
"""

from __future__ import annotations

import argparse
import logging
import logging.handlers
import os
import selectors
import signal
import socket
import sys
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Final

from openum._errors import ConfigError
from openum._version import __version__
from openum.daemons.lbmrd._config import DTD, LbmrdConfig, parse_config_file
from openum.daemons.lbmrd._forwarder import (
    DEFAULT_MAX_CLIENTS,
    DEFAULT_MAX_CLIENTS_PER_HOST,
    NS_PER_MS,
    NS_PER_S,
    Forwarder,
)
from openum.daemons.lbmrd._interface import InterfaceError, resolve_interface
from openum.daemons.lbmrd._settings import Settings, effective_settings, render_config
from openum.daemons.lbmrd._values import (
    DEFAULT_ACTIVITY_MS,
    DEFAULT_PORT,
    DEFAULT_SOCKET_BUFFER,
    DEFAULT_TTL_S,
    parse_interface,
    parse_limit,
    parse_log,
    parse_port,
    parse_positive,
)
from openum.runtime import MonotonicClock

__all__ = ["DESCRIPTION", "EPILOG", "add_arguments", "main", "run", "serve"]

EXIT_OK: Final = 0
EXIT_BIND: Final = 1
EXIT_USAGE: Final = 2

LOGGER_NAME: Final = "openum.lbmrd"
DEFAULT_LOG_MAX_BYTES: Final = 10 * 1024 * 1024
DEFAULT_LOG_BACKUPS: Final = 10
_MAX_DATAGRAM: Final = 65535
_BATCH: Final = 1000  # datagrams read per wake-up before the scan and the wake-up pipe get a turn
_LOG_FORMAT: Final = "%(asctime)s.%(msecs)03d %(levelname)s %(name)s: %(message)s"
_DATE_FORMAT: Final = "%Y-%m-%d %H:%M:%S"

DESCRIPTION: Final = (
    "UMResolver daemon: unicast UDP topic resolution for networks without multicast (UM's lbmrd). "
    "Contexts configured with 'context resolver_unicast_daemon ADDR:PORT' send their TIRs, TQRs and "
    "keepalives here; every TIR and TQR is forwarded to every other client, TIR addresses rewritten "
    "for NAT by the rules of the optional XML CONFIG file."
)
EPILOG: Final = (
    "The default interface is 127.0.0.1: UM's default 0.0.0.0 means 'the first interface found', and "
    "openum keeps everything on this machine. Give -i (an address, a CIDR network such as 10.0.0.0/8, "
    "a device name or a host name) to serve other hosts. Command-line flags override the XML <daemon> "
    "settings, which override the defaults; <ttl> is in seconds like -t. Exit status: 0 success, "
    "1 the UDP port could not be bound, 2 bad usage or configuration."
)


def _arg(parse: Callable[[str], object], name: str) -> Callable[[str], object]:
    def convert(text: str) -> object:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = name
    return convert


def _non_negative(text: str) -> int:
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not valid; allowed: an integer >= 0")
    return int(text)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The lbmrd flags (seed §15.1) plus openum's ``--dump-config`` and log options."""
    parser.add_argument(
        "config", nargs="?", metavar="CONFIG.xml", help="lbmrd XML configuration file (optional)"
    )
    action = parser.add_mutually_exclusive_group()
    action.add_argument(
        "-d", "--dump-dtd", action="store_true", help="print the configuration DTD to stdout and exit"
    )
    action.add_argument(
        "-v", "--validate", action="store_true", help="validate CONFIG.xml (and the flags), then exit"
    )
    action.add_argument(
        "--dump-config",
        action="store_true",
        help="print the effective configuration (flags over CONFIG.xml over defaults) as XML and exit",
    )
    parser.add_argument(
        "-a",
        "--activity",
        metavar="IVL",
        type=_arg(lambda t: parse_positive(t, "activity", "milliseconds"), "activity"),
        help=f"interval between dead-client checks, in milliseconds (default {DEFAULT_ACTIVITY_MS})",
    )
    parser.add_argument(
        "-i",
        "--interface",
        metavar="ADDR",
        type=_arg(parse_interface, "interface"),
        help="listen on interface ADDR: an IPv4 address, a CIDR network (10.0.0.0/8), a device name "
        '("eth0") or a host name (host.example.com/24); default 127.0.0.1, because openum keeps '
        "everything on this machine (UM's 0.0.0.0 means the first interface found)",
    )
    parser.add_argument(
        "-L",
        "--logfile",
        metavar="FILE",
        type=_arg(parse_log, "logfile"),
        help="log to FILE (default: stderr)",
    )
    parser.add_argument(
        "-p",
        "--port",
        metavar="PORT",
        type=_arg(parse_port, "port"),
        help=f"UDP port for topic resolution messages (default {DEFAULT_PORT})",
    )
    parser.add_argument(
        "-t",
        "--ttl",
        metavar="TTL",
        type=_arg(lambda t: parse_positive(t, "ttl", "seconds"), "ttl"),
        help=f"client time-to-live, seconds: silent clients are dropped after it (default {DEFAULT_TTL_S})",
    )
    parser.add_argument(
        "-r",
        "--rcv-buf",
        metavar="SIZE",
        type=_arg(lambda t: parse_positive(t, "receive buffer", "bytes"), "rcv-buf"),
        help=f"receive socket buffer, bytes (default {DEFAULT_SOCKET_BUFFER})",
    )
    parser.add_argument(
        "-s",
        "--snd-buf",
        metavar="SIZE",
        type=_arg(lambda t: parse_positive(t, "send buffer", "bytes"), "snd-buf"),
        help=f"send socket buffer, bytes (default {DEFAULT_SOCKET_BUFFER})",
    )
    parser.add_argument(
        "--max-clients",
        metavar="N",
        type=_arg(lambda t: parse_limit(t, "max-clients"), "max-clients"),
        help="clients in the table at most; a new sender past it is neither forwarded nor answered, "
        f"and counted (0: no limit; default {DEFAULT_MAX_CLIENTS})",
    )
    parser.add_argument(
        "--max-clients-per-host",
        metavar="N",
        type=_arg(lambda t: parse_limit(t, "max-clients-per-host"), "max-clients-per-host"),
        help=f"clients from one IP address at most (0: no limit; default {DEFAULT_MAX_CLIENTS_PER_HOST})",
    )
    parser.add_argument(
        "--log-max-bytes",
        metavar="N",
        type=_non_negative,
        default=DEFAULT_LOG_MAX_BYTES,
        help=f"roll the log file over when it reaches N bytes; 0: never (default {DEFAULT_LOG_MAX_BYTES})",
    )
    parser.add_argument(
        "--log-backups",
        metavar="N",
        type=_non_negative,
        default=DEFAULT_LOG_BACKUPS,
        help=f"rolled log files to keep (FILE.1 ... FILE.N); 0: never roll (default {DEFAULT_LOG_BACKUPS})",
    )
    parser.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default="info",
        help="least severe level logged (default info; debug also logs every dropped datagram)",
    )


def _overrides(args: argparse.Namespace) -> dict[str, object | None]:
    return {
        "activity": args.activity,
        "interface": args.interface,
        "port": args.port,
        "ttl": args.ttl,
        "log": args.logfile,
        "receiver_socket_buffer": args.rcv_buf,
        "send_socket_buffer": args.snd_buf,
        "max_clients": args.max_clients,
        "max_clients_per_host": args.max_clients_per_host,
    }


def run(args: argparse.Namespace) -> int:
    """Carry out parsed lbmrd flags: ``-d``, ``-v``, ``--dump-config`` or run the daemon."""
    if args.dump_dtd:
        sys.stdout.write(DTD)
        return EXIT_OK
    config: LbmrdConfig | None = None
    if args.config:
        try:
            config = parse_config_file(args.config)
        except ConfigError as exc:
            for err in exc.errors:
                print(err.location_message(), file=sys.stderr)
            print(f"lbmrd: {args.config}: {len(exc.errors)} error(s); nothing was started", file=sys.stderr)
            return EXIT_USAGE
    settings = effective_settings(config, _overrides(args))
    if args.validate or args.dump_config:
        for warning in config.warnings if config else ():
            print(warning, file=sys.stderr)
    if args.validate:
        what = f"{args.config}: OK" if args.config else "lbmrd: no configuration file; the flags are valid"
        if config:
            what += f" ({len(config.domains)} domain(s), {len(config.transforms)} transform(s))"
        print(what)
        return EXIT_OK
    if args.dump_config:
        sys.stdout.write(render_config(settings, config))
        return EXIT_OK
    return serve(
        settings,
        config,
        log_max_bytes=args.log_max_bytes,
        log_backups=args.log_backups,
        log_level=args.log_level,
    )


def _handler(settings: Settings, max_bytes: int, backups: int) -> logging.Handler:
    handler: logging.Handler
    if settings.log is None:
        handler = logging.StreamHandler(sys.stderr)
    else:
        handler = logging.handlers.RotatingFileHandler(
            settings.log, maxBytes=max_bytes, backupCount=backups, encoding="utf-8"
        )
    handler.setFormatter(logging.Formatter(_LOG_FORMAT, _DATE_FORMAT))
    return handler


def serve(
    settings: Settings,
    config: LbmrdConfig | None = None,
    *,
    log_max_bytes: int = DEFAULT_LOG_MAX_BYTES,
    log_backups: int = DEFAULT_LOG_BACKUPS,
    log_level: str = "info",
) -> int:
    """Run the daemon until SIGTERM/SIGINT; the exit status."""
    try:
        handler = _handler(settings, log_max_bytes, log_backups)
    except OSError as exc:
        print(f"lbmrd: cannot open the log file {settings.log}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    log = logging.getLogger(LOGGER_NAME)
    log.addHandler(handler)
    log.setLevel(log_level.upper())
    log.propagate = False
    if settings.log is not None:
        print(f"lbmrd: logging to {settings.log}", file=sys.stderr)

    def fatal(message: str) -> None:
        log.error("%s", message)
        if settings.log is not None:
            print(f"lbmrd: {message}", file=sys.stderr)

    try:
        try:
            address = resolve_interface(settings.interface)
        except InterfaceError as exc:
            fatal(f"{exc} (from {settings.origin('interface')})")
            return EXIT_USAGE
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            granted = _socket_buffers(sock, settings, log)
            sock.bind((address, settings.port))
        except OSError as exc:
            sock.close()
            fatal(f"cannot bind UDP {address}:{settings.port}: {exc.strerror or exc} (errno {exc.errno})")
            return EXIT_BIND
        with sock:
            return _loop(
                sock,
                settings,
                config,
                (address, settings.port),
                log,
                announce=lambda: _log_start(log, settings, config, address, granted),
            )
    finally:
        log.removeHandler(handler)
        handler.close()


def _socket_buffers(sock: socket.socket, settings: Settings, log: logging.Logger) -> tuple[int, int]:
    for opt, size, what in (
        (socket.SO_RCVBUF, settings.receiver_socket_buffer, "receive"),
        (socket.SO_SNDBUF, settings.send_socket_buffer, "send"),
    ):
        try:
            sock.setsockopt(socket.SOL_SOCKET, opt, size)
        except OSError as exc:
            log.warning("could not set the %s socket buffer to %d bytes: %s", what, size, exc)
    # Linux reports twice what it grants (the kernel's bookkeeping) and caps at net.core.[rw]mem_max
    return (
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
    )


def _log_start(
    log: logging.Logger,
    settings: Settings,
    config: LbmrdConfig | None,
    address: str,
    granted: tuple[int, int],
) -> None:
    log.info(
        "openum lbmrd %s (UMResolver daemon) started: listening on %s:%d (interface %s, %s), ttl %d s, "
        "activity %d ms, config %s, receive buffer %d bytes (granted %d), send buffer %d bytes (granted %d), "
        "clients at most %s (%s per host), pid %d",
        __version__,
        address,
        settings.port,
        settings.interface,
        settings.origin("interface"),
        settings.ttl,
        settings.activity,
        config.source if config else "none",
        settings.receiver_socket_buffer,
        granted[0],
        settings.send_socket_buffer,
        granted[1],
        settings.max_clients or "unlimited",
        settings.max_clients_per_host or "unlimited",
        os.getpid(),
    )
    for warning in config.warnings if config else ():
        log.warning("%s", warning)
    if settings.activity > settings.ttl * 1000:
        log.warning(
            "activity %d ms is longer than ttl %d s: dead clients may stay up to %d ms (seed 15.1: activity "
            "should be at most ttl x 1000)",
            settings.activity,
            settings.ttl,
            settings.activity + settings.ttl * 1000,
        )
    if config and config.transforms:
        domains = "; ".join(f"{d.name} {', '.join(map(str, d.networks))}" for d in config.domains)
        transforms = "; ".join(
            f"{t.source} -> {t.destination}: {len(t.rules)} rule(s)" for t in config.transforms
        )
        log.info("NAT domains: %s; transforms: %s", domains, transforms)


def _loop(
    sock: socket.socket,
    settings: Settings,
    config: LbmrdConfig | None,
    own: tuple[str, int],
    log: logging.Logger,
    announce: Callable[[], None],
) -> int:
    """Forward until SIGTERM/SIGINT.  ``announce`` logs the start-up line once the signal handlers are
    in place: whoever waits for that line may signal the daemon at once (SIGUSR1 would kill it before)."""
    clock = MonotonicClock()
    forwarder = Forwarder(
        ttl_ns=settings.ttl * NS_PER_S,
        activity_ns=settings.activity * NS_PER_MS,
        domains=config.domains if config else (),
        transforms=config.transforms if config else (),
        own_address=own,
        start_ns=clock.now_ns(),
        log=log,
        max_clients=settings.max_clients,
        max_clients_per_host=settings.max_clients_per_host,
    )
    received: list[int] = []  # signals, in order

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)

    sock.setblocking(False)
    wake_r, wake_w = socket.socketpair()
    wake_r.setblocking(False)
    wake_w.setblocking(False)
    restore = _install_signals(on_signal, wake_w, log)
    announce()
    try:
        with selectors.DefaultSelector() as sel, wake_r, wake_w:
            sel.register(sock, selectors.EVENT_READ, "udp")
            sel.register(wake_r, selectors.EVENT_READ, "wake")
            stop = 0
            while not stop:
                forwarder.poll(clock.now_ns())
                timeout = max(0.0, (forwarder.next_scan_ns - clock.now_ns()) / NS_PER_S)
                for key, _ in sel.select(timeout):
                    if key.data == "wake":
                        _drain_wake(wake_r)
                    else:
                        _drain_udp(sock, forwarder, clock, log)
                while received:
                    signum = received.pop(0)
                    if signum == getattr(signal, "SIGUSR1", None):
                        log.info("statistics: %s", forwarder.statistics().summary())
                    else:
                        stop = signum
            log.info("stopping on %s", signal.Signals(stop).name)
    finally:
        restore()
    log.info("statistics: %s", forwarder.statistics().summary())
    log.info("stopped")
    return EXIT_OK


def _install_signals(
    handler: Callable[[int, FrameType | None], None], wake_w: socket.socket, log: logging.Logger
) -> Callable[[], None]:
    """SIGTERM, SIGINT (and SIGUSR1) call ``handler`` and wake the selector; returns the undo."""
    signums = [signal.SIGTERM, signal.SIGINT]
    if hasattr(signal, "SIGUSR1"):
        signums.append(signal.SIGUSR1)
    try:
        previous = {s: signal.signal(s, handler) for s in signums}
        old_fd = signal.set_wakeup_fd(wake_w.fileno(), warn_on_full_buffer=False)
    except ValueError:  # not the main thread: the caller stops the daemon another way
        log.debug("not in the main thread: no signal handlers installed")
        return lambda: None

    def restore() -> None:
        signal.set_wakeup_fd(old_fd)
        for s, h in previous.items():
            signal.signal(s, h)

    return restore


def _drain_wake(wake_r: socket.socket) -> None:
    try:
        while wake_r.recv(512):
            pass
    except (BlockingIOError, InterruptedError):
        pass


def _drain_udp(sock: socket.socket, forwarder: Forwarder, clock: MonotonicClock, log: logging.Logger) -> None:
    for _ in range(_BATCH):
        try:
            data, addr = sock.recvfrom(_MAX_DATAGRAM)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:  # e.g. an ICMP error queued on the socket: not fatal
            log.debug("recvfrom: %s", exc)
            continue
        now = clock.now_ns()
        for payload, dest in forwarder.datagram_received(data, (addr[0], addr[1]), now):
            try:
                sock.sendto(payload, dest)
            except OSError as exc:
                forwarder.send_failed(dest, exc, now)


def main(argv: Sequence[str] | None = None) -> int:
    """``lbmrd [options] [config-file]`` as a standalone program (argparse exits 2 on bad usage)."""
    parser = argparse.ArgumentParser(prog="lbmrd", description=DESCRIPTION, epilog=EPILOG)
    add_arguments(parser)
    return run(parser.parse_args(argv))
