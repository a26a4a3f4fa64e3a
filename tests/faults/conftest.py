"""The fault tests' network namespaces (only ``lo``, so nothing can leave the machine; needs root)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator

import pytest


class Namespace:
    """A network namespace with ``lo`` up, deleted at the end."""

    def __init__(self, name: str) -> None:
        self.name = name
        _run("ip", "netns", "add", name)
        try:
            self.run("ip", "link", "set", "lo", "up")
        except Exception:
            self.delete()
            raise

    def run(self, *argv: str) -> str:
        return _run("ip", "netns", "exec", self.name, *argv)

    @property
    def prefix(self) -> tuple[str, ...]:
        return ("ip", "netns", "exec", self.name)

    def dropped(self) -> int:
        """Packets the DROP rules of the INPUT chain have dropped so far."""
        return self._counted("DROP")

    def _counted(self, target: str) -> int:
        # Rule lines: pkts bytes target prot ... (the header line names the chain's policy, not a rule).
        rules = [line.split() for line in self.run("iptables", "-L", "INPUT", "-v", "-n", "-x").splitlines()]
        return sum(int(r[0]) for r in rules if len(r) > 2 and r[0].isdigit() and r[2] == target)

    def delete(self) -> None:
        subprocess.run(["ip", "netns", "delete", self.name], check=False, capture_output=True)


def _run(*argv: str) -> str:
    done = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


@pytest.fixture
def netns(request: pytest.FixtureRequest) -> Iterator[Namespace]:
    if os.geteuid() != 0:
        pytest.skip("network namespaces and iptables need root (CI runs as root; see README)")
    missing = [tool for tool in ("ip", "iptables") if shutil.which(tool) is None]
    if missing:
        pytest.fail(f"{', '.join(missing)} not installed: apt-get install iproute2 iptables (make test does)")
    ns = Namespace(f"openum-{os.getpid()}-{request.node.name[-12:].strip('[]')}"[:40])
    try:
        yield ns
    finally:
        ns.delete()
