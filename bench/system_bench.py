"""openum against pyzmq and zenoh, side by side: the same as ``openum bench`` (PERFORMANCE.md).

The harness is part of the package (``src/openum/cli/_bench/``) so that the installed ``openum bench``
command has it; this script runs it from a source checkout, with the same flags::

    python bench/system_bench.py --json out.json            # the full run (about 7 minutes on 2 cores)
    python bench/system_bench.py --count 200000 --repeat 1  # a quick look

See docs/performance.md for what each number measures and what limits it.
"""

from __future__ import annotations

import sys

from openum.cli import main

if __name__ == "__main__":
    raise SystemExit(main(["bench", *sys.argv[1:]]))
