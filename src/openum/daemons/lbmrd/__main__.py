"""``python -m openum.daemons.lbmrd [options] [config-file]``: the daemon without the ``openum`` command."""

from openum.daemons.lbmrd import main

raise SystemExit(main())
