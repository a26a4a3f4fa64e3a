from openum.cli import main

raise SystemExit(main())
