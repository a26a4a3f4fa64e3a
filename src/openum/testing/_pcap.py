"""Classic pcap files of simulated traffic: Ethernet/IPv4/UDP frames that tshark decodes (ARCHITECTURE.md 4).

Multicast destinations get their IPv4 multicast MAC (01:00:5e + the low 23 bits of the group);
unicast hosts get a locally administered MAC built from their IP (02:00:a.b.c.d).  Timestamps have
nanosecond resolution (pcap magic 0xa1b23c4d).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Final

__all__ = ["udp_frame", "write_pcap"]

_PCAP_NS_MAGIC: Final = 0xA1B23C4D
_LINKTYPE_ETHERNET: Final = 1
_SNAPLEN: Final = 262_144
_NS_PER_S: Final = 1_000_000_000
_IPV4_HDR = struct.Struct(">BBHHHBBH4s4s")
_UDP_HDR = struct.Struct(">HHHH")


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\x00"
    total: int = sum(struct.unpack(f">{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


@lru_cache(maxsize=4096)
def _ip(addr: str) -> bytes:
    octets = addr.split(".")
    if len(octets) != 4:
        raise ValueError(f"not an IPv4 address: {addr!r}")
    return bytes(int(part) for part in octets)


@lru_cache(maxsize=4096)
def _mac(addr: str) -> bytes:
    octets = _ip(addr)
    if 224 <= octets[0] <= 239:
        return bytes([0x01, 0x00, 0x5E, octets[1] & 0x7F, octets[2], octets[3]])
    return b"\x02\x00" + octets


def udp_frame(payload: bytes, src: tuple[str, int], dst: tuple[str, int], ident: int = 0) -> bytes:
    """One Ethernet/IPv4/UDP frame from ``src`` to ``dst`` with correct IPv4 and UDP checksums."""
    sip, dip = _ip(src[0]), _ip(dst[0])
    udp_len = 8 + len(payload)
    pseudo = sip + dip + struct.pack(">BBH", 0, 17, udp_len)
    udp = _UDP_HDR.pack(src[1], dst[1], udp_len, 0) + payload
    csum = _checksum(pseudo + udp) or 0xFFFF  # 0 means "no checksum" in UDP over IPv4
    udp = udp[:6] + struct.pack(">H", csum) + udp[8:]
    ttl = 1 if dip[0] >= 224 else 64
    header = _IPV4_HDR.pack(0x45, 0, 20 + udp_len, ident & 0xFFFF, 0x4000, ttl, 17, 0, sip, dip)
    header = header[:10] + struct.pack(">H", _checksum(header)) + header[12:]
    return _mac(dst[0]) + _mac(src[0]) + b"\x08\x00" + header + udp


def write_pcap(
    path: str | os.PathLike[str], frames: Iterable[tuple[int, bytes]], *, epoch_ns: int = 0
) -> Path:
    """Write ``(time_ns, frame)`` pairs as a nanosecond classic pcap; ``epoch_ns`` is added to times."""
    out = Path(path)
    with out.open("wb") as fh:
        fh.write(struct.pack("<IHHiIII", _PCAP_NS_MAGIC, 2, 4, 0, 0, _SNAPLEN, _LINKTYPE_ETHERNET))
        for time_ns, frame in frames:
            sec, nsec = divmod(epoch_ns + time_ns, _NS_PER_S)
            fh.write(struct.pack("<IIII", sec, nsec, len(frame), len(frame)))
            fh.write(frame)
    return out
