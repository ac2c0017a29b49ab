"""``research-worker dashboard``: a read-only monitoring page over arq's keys and ours.

``app`` serves it; ``data`` and ``history`` read the shared snapshot, ``job`` one job; ``views``
selects what each page shows, ``charts`` draws the last hour, ``templates/`` holds the pages.
See docs/dashboard.md.
"""

from worker.dashboard.app import build_app, serve, start

__all__ = ["build_app", "serve", "start"]
