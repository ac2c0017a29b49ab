"""The template engine: Jinja with escaping on for every template, and the page's own filters.

Every ``{{ value }}`` is first made visible (``formatting.visible``: control and bidi characters
shown as code points) and then escaped; only markup the templates themselves build (macros) passes
as markup. Templates are loaded when the app is built, so a missing one stops start-up, not a page.
"""

from __future__ import annotations

from collections.abc import Callable

import aiohttp_jinja2
import jinja2
from aiohttp import web

import worker.dashboard.formatting as formatting
from worker.dashboard.charts import color
from worker.dashboard.filters import job_href

TEMPLATES = ("base.html", "index.html", "job.html", "message.html", "_macros.html", "_charts.html")
FILTERS: dict[str, Callable[..., str]] = {
    "age": formatting.age,
    "ms": formatting.duration_ms,
    "timestamp": formatting.timestamp,
    "share": formatting.share,
    "dollars": formatting.dollars,
    "n1": lambda value: f"{value:.1f}",
    "job_href": job_href,
    "outcome_color": color,
    "breakable": formatting.breakable,  # type: ignore[dict-item]
}


def setup(app: web.Application) -> jinja2.Environment:
    env = aiohttp_jinja2.setup(
        app,
        loader=jinja2.PackageLoader("worker.dashboard", "templates"),
        autoescape=True,
        finalize=formatting.visible,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        default_helpers=False,
        filters=FILTERS,
    )
    for name in TEMPLATES:
        env.get_template(name)
    return env
