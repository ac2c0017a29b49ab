"""What every command-line process under test gets: the loopback guard and, when a test asks, a
default Redis address where nothing answers (a machine with no Redis on 127.0.0.1:6379), without
stopping the shared Redis the other tests use.

``write_sitecustomize`` puts both under commands a test runs exactly as a person would type them
(the tour): every Python process started with that directory first on PYTHONPATH installs them.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.support import loopback

DEFAULT_REDIS_VARIABLE = "RESEARCH_TEST_DEFAULT_REDIS_URL"


def install() -> None:
    loopback.install()
    default = os.environ.get(DEFAULT_REDIS_VARIABLE)
    if default:
        from worker.config import values

        values.DEFAULT_REDIS_URL = default


def write_sitecustomize(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sitecustomize.py").write_text(
        "from tests.support.run_cli_site import install\n\ninstall()\n", encoding="utf-8"
    )
    return directory
