"""Which Redis the tests use: RESEARCH_TEST_REDIS_URL, else 127.0.0.1:6379 db 9, else an embedded one."""

from __future__ import annotations

import os

from worker.embedded import EmbeddedRedis, redis_answers

DEFAULT_TEST_URL = "redis://127.0.0.1:6379/9"


def test_redis_url() -> tuple[str, EmbeddedRedis | None]:
    configured = os.environ.get("RESEARCH_TEST_REDIS_URL")
    if configured:
        return configured, None
    if redis_answers():
        return DEFAULT_TEST_URL, None
    embedded = EmbeddedRedis()
    embedded.start()
    return embedded.url, embedded
