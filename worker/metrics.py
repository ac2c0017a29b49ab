"""Prometheus series for one worker process, served on ``RESEARCH_METRICS_PORT`` when it is set.

Each runtime owns its own registry (tests run several workers in one process). Labels are bounded
sets (tool, outcome kind, refusal reason, org id and usage source): never a URL or a report id,
which would grow the series without bound.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 90)
WAIT_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
BYTES_BUCKETS = (1024, 8192, 32768, 131072, 524288, 1048576, 2097152, 4194304)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.jobs = Counter(
            "research_jobs",
            "Jobs finished, by tool and outcome kind ('ok' or the error kind).",
            ["tool", "outcome"],
            registry=r,
        )
        self.job_duration = Histogram(
            "research_job_duration_seconds",
            "Time a job ran, from start to result written.",
            ["tool"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.queue_wait = Histogram(
            "research_queue_wait_seconds",
            "Time from enqueue to the job's start.",
            ["tool"],
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.bytes_read = Histogram(
            "research_fetch_bytes_read",
            "Body bytes read per fetch, after decompression.",
            buckets=BYTES_BUCKETS,
            registry=r,
        )
        self.guardian_refusals = Counter(
            "research_guardian_refusals",
            "Fetches the guardian refused, by reason.",
            ["reason"],
            registry=r,
        )
        self.budget_refusals = Counter(
            "research_budget_refusals",
            "Jobs refused because the report's budget was used up.",
            ["tool"],
            registry=r,
        )
        self.search_cost = Counter(
            "research_search_cost_usd",
            "Search spend reported by the provider, in USD.",
            ["org", "usage_source"],
            registry=r,
        )
        self.search_tokens = Counter(
            "research_search_tokens",
            "Tokens billed for searches.",
            ["org", "usage_source", "direction"],
            registry=r,
        )
        self.queue_depth = Gauge(
            "research_queue_depth",
            "Jobs waiting in the queue (sampled at each health beat).",
            registry=r,
        )
        self.in_progress = Gauge(
            "research_jobs_in_progress",
            "Jobs this worker is running now.",
            registry=r,
        )
