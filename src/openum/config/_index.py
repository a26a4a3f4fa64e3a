"""The process-wide registry built from the option table."""

from __future__ import annotations

from typing import Final

from openum.config._implemented import IMPLEMENTED
from openum.config._options import OPTIONS
from openum.config._registry import Registry

__all__ = ["REGISTRY"]

#: Every option openum knows, indexed by (scope, name), with what openum implements of each.
REGISTRY: Final[Registry] = Registry(OPTIONS, IMPLEMENTED)
