"""``python -m worker.cli``: the same command line as the ``research-worker`` script."""

from worker.cli import main

raise SystemExit(main())
