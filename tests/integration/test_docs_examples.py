"""The runnable examples of the user docs run and print what the docs say (each in its own process, on
this test's own ports: ``LBM_DEFAULT_CONFIG_FILE`` points at a flat file with them)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.integration.pubsub import Ports, child_env

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _blocks(doc: Path, language: str) -> list[str]:
    """The fenced code blocks of ``doc`` opened with ```` ```language ```` ("" for plain ones)."""
    blocks: list[str] = []
    current: list[str] | None = None
    inside = False
    for line in doc.read_text().splitlines():
        if line.startswith("```"):
            if inside:
                if current is not None:
                    blocks.append("\n".join(current) + "\n")
                current, inside = None, False
            else:
                inside = True
                current = [] if line[3:].strip() == language else None
        elif current is not None:
            current.append(line)
    return blocks


def _run(code: str, tmp_path: Path) -> str:
    config = tmp_path / "ports.cfg"
    config.write_text("\n".join(Ports.allocate().options()) + "\n")
    env = {**child_env(), "LBM_DEFAULT_CONFIG_FILE": str(config)}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_the_request_response_example_prints_what_the_docs_show(tmp_path: Path) -> None:
    doc = DOCS / "request-response.md"
    example = _blocks(doc, "python")[0]
    shown = _blocks(doc, "")[0].splitlines()
    out = _run(example, tmp_path).splitlines()
    assert out[0] == shown[0]
    # The request port is the first free one of the range: the docs show UM's default range's first.
    port = re.escape(shown[1]).replace("14391", r"\d+")
    assert re.fullmatch(port, out[1]), (out, shown)


def test_the_late_join_example_prints_what_the_docs_show(tmp_path: Path) -> None:
    doc = DOCS / "late-join.md"
    example = _blocks(doc, "python")[0]
    shown = _blocks(doc, "")[0].splitlines()
    assert _run(example, tmp_path).splitlines() == shown


def test_the_otr_example_prints_what_the_docs_show(tmp_path: Path) -> None:
    doc = DOCS / "late-join.md"
    example = _blocks(doc, "python")[1]
    shown = _blocks(doc, "")[2].splitlines()
    assert _run(example, tmp_path).splitlines() == shown


def test_the_shared_memory_examples_run_and_print_what_the_docs_show(tmp_path: Path) -> None:
    doc = DOCS / "shared-memory.md"
    ipc, smx = _blocks(doc, "python")
    assert _run(ipc, tmp_path).splitlines() == _blocks(doc, "")[0].splitlines()
    assert _run(smx, tmp_path).splitlines() == ["64"]
