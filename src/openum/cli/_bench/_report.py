"""The markdown report of ``openum bench`` (stdout) and the JSON document (``--json FILE``)."""

from __future__ import annotations

from typing import Any

from openum.cli._bench._harness import SLOW_THROUGHOUT

__all__ = ["markdown"]


def _num(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} x"


def _mb(value: int | None) -> str:
    return "-" if not value else f"{value / 1048576:.1f} MB"


def markdown(doc: dict[str, Any]) -> str:
    m = doc["machine"]
    s = doc["settings"]
    summary = doc["summary"]
    lines: list[str] = []
    add = lines.append
    add(f"# openum bench, {m['date']}")
    add("")
    peers = ", ".join(
        f"{name} {m.get(name)}" + (f" (libzmq {m.get('libzmq')})" if name == "pyzmq" else "")
        for name in ("pyzmq", "zenoh")
        if m.get(name)
    )
    add(
        f"Machine: {m['cpu_count']} CPUs ({m['cpu_model']}), Python {m['python']}, openum {m['openum']}"
        + (f" ({m['openum_build']})" if m.get("openum_build") else "")
        + (f", {peers}" if peers else "")
        + "."
    )
    add(
        f"Throughput: {s['count']:,} messages of {s['size']} B per run, publisher and subscriber in separate "
        f"processes, every message checked in order at the receiver, msgs/s at the receiver. Latency: "
        f"{s['pings']:,} round trips after {s['warmup']:,} warm-up ones, ping and pong "
        + ("on one CPU" if s["latency_cpus"] == "same" else "on any CPU")
        + f". Medians of {s['repeat']} throughput and {s.get('latency_repeat', s['repeat'])} round-trip "
        "runs, systems alternating."
    )
    add("")
    add(f"## Throughput and round-trip latency ({s['size']} B)")
    add("")
    add(
        "| system | transport | msgs/s | vs pyzmq tcp | RTT p50 us | RTT p99 us | RTT p99.9 us "
        "| p50 vs pyzmq tcp | p99 vs pyzmq tcp |"
    )
    add("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for row in summary["rows"]:
        rtt = row["rtt_us"]
        paced = f" (paced at {row['paced_at']:,.0f}/s)" if row.get("paced_at") else ""
        if row.get("throughput_runs_with_loss"):
            paced += f" ({row['throughput_runs_with_loss']} run(s) lost messages: not in the median)"
        add(
            f"| {row['system']} | {row['transport']}{' (busy-wait)' if row['busy'] else ''}{paced} "
            f"| {_num(row['msgs_per_sec'])} | {_x(row['throughput_ratio_pyzmq_tcp'])} "
            f"| {_num(rtt.get('p50'), 1)} | {_num(rtt.get('p99'), 1)} | {_num(rtt.get('p999'), 1)} "
            f"| {_x(row['rtt_p50_ratio'])} | {_x(row['rtt_p99_ratio'])} |"
        )
    slow = summary.get("latency_slow_runs") or []
    if slow:
        add("")
        add(
            f"Round-trip runs slow throughout (fastest round trip over {SLOW_THROUGHOUT} x the median run's "
            "fastest: the pair of processes ran at another speed from start to end, which depends on where "
            "the OS loaded both processes' code; counted in the medians like any run): "
            + "; ".join(
                f"{r['system']} {r['transport']}{' busy-wait' if r['busy'] else ''} #{r['repeat'] + 1} "
                f"(min {r['min']:.1f} us against {r['median_min']:.1f}, p50 {r['p50']:.1f}, "
                f"p99 {r['p99']:.1f})"
                for r in slow
            )
            + "."
        )
    if any(row.get("paced_at") for row in summary["rows"]):
        add("")
        add(
            "LBT-RU and LBT-RM have no flow control: their throughput runs send at the maximum sustainable "
            "rate found below (zero loss), so their msgs/s is that rate, verified over the whole count."
        )
    if summary.get("unthrottled"):
        add("")
        add(f"## UDP transports sending unthrottled ({s['count']:,} messages, one run)")
        add("")
        add("| transport | publisher msgs/s | delivered msgs/s | lost | unrecoverable loss events |")
        add("|---|---:|---:|---:|---:|")
        for u in summary["unthrottled"]:
            events = u["unrecoverable_loss"] + u["unrecoverable_loss_burst"]
            add(
                f"| openum {u['transport']} | {_num(u['publisher_msgs_per_sec'])} "
                f"| {_num(u['msgs_per_sec'])} | {u['lost'] * 100:.1f}% | {events:,}"
                + ("" if u["ok"] else " (check FAILED)")
                + " |"
            )
    if summary["sweep"]:
        labels = list(summary["sweep"][0]["msgs_per_sec"])
        ratio_labels = list(summary["sweep"][0]["ratio_vs_pyzmq_tcp"])
        add("")
        add(f"## Message size sweep (msgs/s at the receiver, median of {s['sweep_repeat']})")
        add("")
        add(
            "| size | messages | "
            + " | ".join(labels)
            + "".join(f" | {label} / pyzmq tcp" for label in ratio_labels)
            + " |"
        )
        add("|---:|---:|" + "---:|" * (len(labels) + len(ratio_labels)))
        for entry in summary["sweep"]:
            cells = [
                _num(entry["msgs_per_sec"][label])
                + (f" ({entry['lost'][label] * 100:.2g}% lost)" if entry["lost"].get(label) else "")
                for label in labels
            ]
            cells += [_x(entry["ratio_vs_pyzmq_tcp"][label]) for label in ratio_labels]
            add(f"| {entry['size']:,} B | {entry['count']:,} | " + " | ".join(cells) + " |")
    if summary["max_rate"]:
        add("")
        add(f"## Maximum sustainable rate (zero loss over {s['rate_duration']} s, {s['size']} B)")
        add("")
        add("| transport | highest rate with zero loss | probes (msgs/s: result) |")
        add("|---|---:|---|")
        for transport, res in summary["max_rate"].items():
            best = _num(res["max_sustained"]) if res["max_sustained"] else "none found"
            if res["lower_bound_only"]:
                best = ">= " + best + " (no probed rate failed)"
            probes = "; ".join(f"{p['rate']:,}: {p['why']}" for p in res["probes"])
            add(f"| openum {transport} | {best} | {probes} |")
    if summary["memory"]:
        add("")
        add("## Receiver memory (openum subscriber RSS)")
        add("")
        add(
            "| transport | RSS when subscribed | "
            + " | ".join(f"RSS at {_short(p)}" for p in _memory_points(summary["memory"]))
            + " | growth |"
        )
        add("|---|---:|" + "---:|" * len(_memory_points(summary["memory"])) + "---:|")
        for mem in summary["memory"]:
            rss = mem["rss_bytes"]
            cells = [_mb(rss.get(str(p))) for p in _memory_points(summary["memory"])]
            growth = "-" if mem["growth"] is None else f"{mem['growth'] * 100:+.1f}%"
            if mem.get("lost"):
                growth += f", {mem['lost'] * 100:.2g}% of the messages lost"
            paced = f" at {mem['rate']:,.0f} msgs/s" if mem.get("rate") else ""
            add(
                f"| openum {mem['transport']}{paced} | {_mb(rss.get('subscribed'))} | "
                + " | ".join(cells)
                + f" | {growth} (from {_short(mem['from'])} to {_short(mem['to'])}) |"
            )
    add("")
    add("## Targets (PERFORMANCE.md)")
    add("")
    add("```")
    for t in doc["targets"]:
        value = t["value"]
        shown = (
            ""
            if value is None
            else (
                f": {value * 100:.1f}%"
                if t["target"].startswith("memory")
                else f": {value:.1f} us"
                if t["target"].endswith(" us")
                else f": {value:.2f} x"
            )
        )
        add(f"{t['status']:<4}  {t['target']}{shown}" + (f"  ({t['why']})" if t["why"] else ""))
    add("```")
    notes = [
        *(f"openum {t}: not available in this build" for t in doc["not_available"]),
        *doc["missing_peers"].values(),
        *doc["notes"],
    ]
    failed = [r for r in doc["runs"] if not r["ok"]]
    if failed:
        notes.append(f"{len(failed)} run(s) failed their check (see the JSON for each):")
        for r in failed[:10]:
            notes.append(
                f"  {r['kind']} {r['system']} {r['transport']} {r['size']} B: {r.get('error', '')[:300]}"
            )
    if notes:
        add("")
        add("## Not measured, failed")
        add("")
        for note in notes:
            add(f"- {note}" if not note.startswith("  ") else f"  - {note.strip()}")
    add("")
    add(f"Total time {doc['total_seconds']:.0f} s.")
    return "\n".join(lines)


def _memory_points(memory: list[dict[str, Any]]) -> list[int]:
    points: set[int] = set()
    for mem in memory:
        points.update(int(k) for k in mem["rss_bytes"] if k.isdigit())
    return sorted(points)


def _short(n: int | None) -> str:
    if n is None:
        return "?"
    if n >= 1_000_000 and n % 100_000 == 0:
        return f"{n / 1_000_000:g} M"
    return f"{n:,}"
