"""Conformance harness: build classic pcaps from encoded bytes and check tshark's decode.

Every conformance test follows the same recipe (ARCHITECTURE.md 4, ../shared/wire/):
1. encode records with ``openum.wire``;
2. wrap them in Ethernet/IPv4/UDP or TCP frames built here and write a classic pcap;
3. decode with tshark (one run per capture: the checks, the expert tap and the test's own fields)
   and require: no ``_ws.malformed``, no expert item of severity warning or error
   (except the ones a healthy flow is documented to produce, passed as ``allowed_expert``), no
   "Errors"/"Warnings" section from the expert tap, and decoded fields equal to what was encoded.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SEVERITY_WARNING = 0x00600000
SEVERITY_ERROR = 0x00800000

# The kernel's own TCP at work on loopback (flow control, a spurious retransmission answered by a
# D-SACK on a loaded machine): warnings of Wireshark's TCP analysis about the connection, never about
# the bytes LBT-TCP put into it (those are checked by the lbttcp/lbmc dissectors).
TCP_ANALYSIS_EXPERT = (
    r"^TCP window specified by the receiver is now completely full$",
    r"^TCP Zero ?Window",
    r"^D-SACK Sequence$",
    r"^This frame is a \(suspected\) (spurious |fast )?retransmission$",
)

# Decode-as rules for UM's default ports (ARCHITECTURE.md 4), so heuristics of other protocols
# (SMPP, WireGuard) never steal a test packet (../shared/wire/lbtrm-lbtru-lbttcp-transports.md 1.5).
DEFAULT_DECODE_AS: tuple[str, ...] = (
    "udp.port==14400,lbtrm",
    "udp.port==14390,lbtrm",
    "udp.port==14380,lbtru",
    "tcp.port==14371,lbttcp",
)


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\x00"
    total = sum(struct.unpack(f">{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _ip(addr: str) -> bytes:
    return bytes(int(part) for part in addr.split("."))


def _mac_for(addr: str) -> bytes:
    octets = _ip(addr)
    if 224 <= octets[0] <= 239:  # IPv4 multicast MAC 01:00:5e + low 23 bits
        return bytes([0x01, 0x00, 0x5E, octets[1] & 0x7F, octets[2], octets[3]])
    return b"\x02\x00" + octets


def ipv4_packet(proto: int, payload: bytes, src: str, dst: str, ident: int = 1) -> bytes:
    """An IPv4 header (with a correct checksum) followed by ``payload``."""
    header = struct.pack(
        ">BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), ident & 0xFFFF, 0, 64, proto, 0, _ip(src), _ip(dst)
    )
    header = header[:10] + struct.pack(">H", _checksum(header)) + header[12:]
    return header + payload


def ethernet(ip_packet: bytes, src: str, dst: str) -> bytes:
    return _mac_for(dst) + _mac_for(src) + b"\x08\x00" + ip_packet


def udp_frame(
    payload: bytes, *, src: str = "127.0.0.1", dst: str = "127.0.0.1", sport: int, dport: int, ident: int = 1
) -> bytes:
    """An Ethernet/IPv4/UDP frame carrying ``payload`` (UDP checksum left at 0: allowed by IPv4)."""
    udp = struct.pack(">HHHH", sport, dport, 8 + len(payload), 0) + payload
    return ethernet(ipv4_packet(17, udp, src, dst, ident), src, dst)


@dataclass
class TcpFlow:
    """Builds the frames of one TCP connection (handshake, data segments both ways)."""

    client: str
    cport: int
    server: str
    sport: int
    frames: list[bytes] = field(default_factory=list)
    _cseq: int = 1000
    _sseq: int = 5000
    _ident: int = 1

    def _segment(self, from_client: bool, flags: int, payload: bytes = b"") -> None:
        if from_client:
            src, dst, sp, dp, seq, ack = (
                self.client,
                self.server,
                self.cport,
                self.sport,
                self._cseq,
                self._sseq,
            )
        else:
            src, dst, sp, dp, seq, ack = (
                self.server,
                self.client,
                self.sport,
                self.cport,
                self._sseq,
                self._cseq,
            )
        tcp = struct.pack(">HHIIBBHHH", sp, dp, seq, ack, 5 << 4, flags, 65535, 0, 0) + payload
        pseudo = _ip(src) + _ip(dst) + struct.pack(">BBH", 0, 6, len(tcp))
        tcp = tcp[:16] + struct.pack(">H", _checksum(pseudo + tcp)) + tcp[18:]
        self.frames.append(ethernet(ipv4_packet(6, tcp, src, dst, self._ident), src, dst))
        self._ident += 1
        advance = len(payload) + (1 if flags & 0x03 else 0)  # SYN/FIN take one sequence number
        if from_client:
            self._cseq += advance
        else:
            self._sseq += advance

    def handshake(self) -> TcpFlow:
        self._segment(True, 0x02)  # SYN
        self._segment(False, 0x12)  # SYN-ACK
        self._segment(True, 0x10)  # ACK
        return self

    def send(self, payload: bytes, *, from_client: bool = False) -> TcpFlow:
        """One segment of data (PSH|ACK); by default from the server (the UM source)."""
        self._segment(from_client, 0x18, payload)
        return self


def write_pcap(path: str | os.PathLike[str], frames: Iterable[bytes], linktype: int = 1) -> Path:
    """Write a classic (microsecond) pcap; one millisecond between frames."""
    out = Path(path)
    with out.open("wb") as fh:
        fh.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, linktype))
        for i, frame in enumerate(frames):
            fh.write(struct.pack("<IIII", 1_700_000_000, i * 1000, len(frame), len(frame)))
            fh.write(frame)
    return out


_SECTION = re.compile(r"^(Errors|Warns|Warnings|Notes|Chats|Comments) \((\d+)\)$")


def expert_tap_sections(text: str) -> dict[str, list[str]]:
    """Parse ``tshark -q -z expert`` output: section name -> the Summary column of each row.

    tshark 4.0 titles its sections ``Errors (N)``, ``Warns (N)``, ``Notes (N)``, ``Chats (N)``; each is
    followed by a ``====`` rule and a ``Frequency Group Protocol Summary`` header.
    """
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        match = _SECTION.match(line)
        if match:
            current = sections.setdefault(match.group(1), [])
            continue
        if current is None or not line or line.startswith(("===", "Frequency")):
            continue
        # Columns: Frequency, Group, Protocol, Summary (the summary may contain single spaces).
        current.append(re.split(r"\s{2,}", line, maxsplit=3)[-1])
    return sections


class TsharkMissingError(RuntimeError):
    pass


def tshark_path() -> str:
    path = shutil.which("tshark")
    if path is None:
        raise TsharkMissingError(
            "tshark is not installed, so the wire-conformance suite cannot run. Install it with "
            "'apt-get install -y tshark' (Debian; 'make test' does this when run as root), or set "
            "OPENUM_SKIP_TSHARK=1 to skip these tests knowingly."
        )
    return path


@dataclass(frozen=True)
class Tshark:
    """Runs tshark on a pcap with decode-as rules and preferences."""

    decode_as: Sequence[str] = DEFAULT_DECODE_AS
    prefs: Mapping[str, str] = field(default_factory=dict)
    two_pass: bool = False
    disable_heuristics: Sequence[str] = ()

    def _base(self, pcap: Path) -> list[str]:
        args = [tshark_path(), "-n", "-r", str(pcap)]
        if self.two_pass:
            args.append("-2")
        for rule in self.decode_as:
            args += ["-d", rule]
        for key, value in self.prefs.items():
            args += ["-o", f"{key}:{value}"]
        for heur in self.disable_heuristics:
            args += ["--disable-heuristic", heur]
        return args

    def run(self, pcap: Path, *extra: str) -> str:
        proc = subprocess.run(
            [*self._base(pcap), *extra], capture_output=True, text=True, timeout=120, check=False
        )
        if proc.returncode != 0:
            raise AssertionError(f"tshark failed ({proc.returncode}): {proc.stderr.strip()}")
        return proc.stdout

    def fields(self, pcap: Path, names: Sequence[str]) -> list[dict[str, list[str]]]:
        """Per frame, each requested field's values (every occurrence, in order)."""
        return _json_rows(self.run(pcap, *_json_args(names)))[0]

    def protocols(self, pcap: Path) -> list[str]:
        return [f.get("frame.protocols", [""])[0] for f in self.fields(pcap, ["frame.protocols"])]

    def assert_clean(
        self, pcap: Path, *, allowed_expert: Sequence[str] = (), fields: Sequence[str] = ()
    ) -> list[dict[str, list[str]]]:
        """No malformed frame, no warning/error expert item except the allowed messages (regexes).

        One tshark run checks every frame and the expert tap, and extracts ``fields`` on the way:
        returned per frame as :meth:`fields` returns them (each field's values, in order).
        """
        names = list(dict.fromkeys([*CHECK_FIELDS, *fields]))
        rows, tap = _json_rows(self.run(pcap, *_json_args(names), "-z", "expert"))
        checks = [
            _FrameCheck(
                row.get("frame.number", ["?"])[0],
                bool(row.get("_ws.malformed")),
                row.get("_ws.expert.severity", []),
                row.get("_ws.expert.message", []),
                row.get("frame.protocols", [""])[0],
            )
            for row in rows
        ]
        _raise_problems(pcap, checks, tap, allowed_expert)
        return [{k: v for k, v in row.items() if k in fields} for row in rows]

    def assert_clean_pdml(
        self, pcap: Path, *, allowed_expert: Sequence[str] = ()
    ) -> dict[int, list[PdmlItem]]:
        """:meth:`assert_clean` with the whole decode returned: frame number -> its PDML fields.

        PDML carries what ``-e`` cannot: FT_NONE items (their label) and every item's raw bytes.
        """
        out = self.run(pcap, "-T", "pdml", "-z", "expert")
        xml, _, tap = out.partition("</pdml>")
        frames: dict[int, list[PdmlItem]] = {}
        checks = []
        for number, packet in enumerate(ET.fromstring(xml + "</pdml>").findall("packet"), start=1):
            items = [
                PdmlItem(f.get("name", ""), f.get("show", ""), f.get("showname", ""), f.get("value", ""))
                for f in packet.iter("field")
            ]
            frames[number] = items
            checks.append(
                _FrameCheck(
                    str(number),
                    any(p.get("name") == "_ws.malformed" for p in packet.iter("proto")),
                    [i.show for i in items if i.name == "_ws.expert.severity"],
                    [i.show for i in items if i.name == "_ws.expert.message"],
                    next((i.show for i in items if i.name == "frame.protocols"), ""),
                )
            )
        _raise_problems(pcap, checks, tap, allowed_expert)
        return frames


def _json_args(names: Sequence[str]) -> list[str]:
    args = ["-T", "json"]
    for name in names:
        args += ["-e", name]
    return args


def _json_rows(out: str) -> tuple[list[dict[str, list[str]]], str]:
    """``-T json -e ...`` output: per frame, each field's values; and any text after the array (a tap's)."""
    out = out.lstrip()
    frames: list[dict[str, Any]] = []
    if out.startswith("["):  # no array at all when the capture has no frames
        frames, end = json.JSONDecoder().raw_decode(out)
        out = out[end:]
    return [{k: list(v) for k, v in f["_source"]["layers"].items()} for f in frames], out


# The fields assert_clean reads to judge each frame.
CHECK_FIELDS = (
    "frame.number",
    "_ws.malformed",
    "_ws.expert.severity",
    "_ws.expert.message",
    "frame.protocols",
)


@dataclass(frozen=True)
class PdmlItem:
    """One PDML field: its filter name, shown value, label and raw bytes (hex)."""

    name: str
    show: str
    showname: str
    value: str


@dataclass(frozen=True)
class _FrameCheck:
    number: str
    malformed: bool
    severities: Sequence[str]
    messages: Sequence[str]
    protocols: str


def _raise_problems(
    pcap: Path, frames: Sequence[_FrameCheck], tap: str, allowed_expert: Sequence[str]
) -> None:
    """The clean-decode gate: ``frames`` as tshark judged them, ``tap`` the expert tap's text."""
    allowed = [re.compile(p) for p in allowed_expert]
    problems: list[str] = []
    for frame in frames:
        if frame.malformed:
            problems.append(f"frame {frame.number}: malformed ({frame.protocols})")
        for i, sev in enumerate(frame.severities):
            level = int(sev, 0)
            msg = frame.messages[i] if i < len(frame.messages) else "?"
            if level >= SEVERITY_WARNING and not any(p.search(msg) for p in allowed):
                problems.append(f"frame {frame.number}: expert {hex(level)}: {msg}")
    for section, summaries in expert_tap_sections(tap).items():
        if section not in ("Errors", "Warns", "Warnings"):
            continue
        bad = [line for line in summaries if not any(p.search(line) for p in allowed)]
        if bad:
            problems.append(f"expert tap {section}: " + " | ".join(bad))
    if problems:
        raise AssertionError(f"{pcap}: tshark reports problems:\n  " + "\n  ".join(problems))
