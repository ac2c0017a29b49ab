"""Prometheus series for one worker process, served on ``RESEARCH_METRICS_PORT`` when it is set.

Each runtime owns its own registry (tests run several workers in one process), with the process,
platform and garbage-collector collectors registered on it beside ours, so one scrape shows the
process's memory, CPU time and open files next to its jobs. Names carry their unit (``_seconds``,
``_bytes``, ``_usd``) and counters end in ``_total``; ``research_queue_depth`` keeps its name,
because the HPA reads it (deploy/k8s). No ``_created`` series: they double the series count of
every counter and histogram and no rule or dashboard reads them.

Labels are bounded sets (tool, outcome kind, refusal reason, search provider, usage source, and
org: an org of the key file by its id, any other as ``(other)``): never a URL, a report id or a
caller's free choice, which would grow the series without bound. ``research_jobs_total`` counts every
job that got a result, including the ones arq could not run: an unreadable payload or an unknown
job name is counted as ``tool="unknown", outcome="invalid_request"`` (``tool`` is the job's name
when this worker runs a tool of that name, so a junk name cannot add series).
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.gc_collector import GCCollector
from prometheus_client.metrics_core import Metric
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 90)
WAIT_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
BYTES_BUCKETS = (1024, 8192, 32768, 131072, 524288, 1048576, 2097152, 4194304)

# The tool label of a job arq could not hand to a tool (unreadable payload, unknown job name).
UNKNOWN_TOOL = "unknown"

_CREATED = "_created"


class WorkerRegistry(CollectorRegistry):
    """A registry whose collection leaves out ``*_created`` samples.

    prometheus_client's own switch (``disable_created_metrics``) is one process-wide flag that any
    import can flip back; filtering here holds for this registry whatever else the process does.
    """

    def collect(self) -> Iterable[Metric]:
        for family in super().collect():
            if any(sample.name.endswith(_CREATED) for sample in family.samples):
                family.samples = [s for s in family.samples if not s.name.endswith(_CREATED)]
            yield family


class Metrics:
    def __init__(self) -> None:
        self.registry = WorkerRegistry(auto_describe=True)
        r = self.registry
        # process_resident_memory_bytes, process_cpu_seconds_total, process_open_fds, ... (Linux);
        # python_info; python_gc_* per generation.
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        GCCollector(registry=r)
        self.jobs = Counter(
            "research_jobs",
            "Jobs that got a result, by tool and outcome kind ('ok' or the error kind); jobs arq "
            f"could not run (unreadable payload, unknown job name) count as tool={UNKNOWN_TOOL!r}.",
            ["tool", "outcome"],
            registry=r,
        )
        # Exported at 0 from start-up: the first refused payload is then an increase an alert sees,
        # not the birth of a series that increase() would miss.
        self.jobs.labels(UNKNOWN_TOOL, "invalid_request")
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
            "research_fetch_read_bytes",
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
        self.provider_searches = Counter(
            "research_search_provider_searches",
            "Searches asked of each search provider, by provider and outcome ('ok' or the error "
            "kind); a search that fell back counts once on each provider it asked.",
            ["provider", "outcome"],
            registry=r,
        )
        self.queue_depth = Gauge(
            "research_queue_depth",
            "Jobs in the queue, waiting or running (sampled at each health beat).",
            registry=r,
        )
        self.in_progress = Gauge(
            "research_jobs_in_progress",
            "Jobs this worker is running now.",
            registry=r,
        )
        self.page_cache_hits = Counter(
            "research_page_cache_hits",
            "Fetches served from the shared page cache.",
            registry=r,
        )
        self.page_cache_misses = Counter(
            "research_page_cache_misses",
            "Fetches that found no fresh page in the shared cache and fetched it (fresh=true excluded).",
            registry=r,
        )
        self.page_flight_joins = Counter(
            "research_page_flight_joins",
            "Fetches that waited for another job's fetch of the same page instead of fetching it.",
            registry=r,
        )
        self.host_waits = Counter(
            "research_host_waits",
            "Fetches that waited for their host: for a free slot ('slot') or a Retry-After ('backoff').",
            ["reason"],
            registry=r,
        )
        self.host_wait = Histogram(
            "research_host_wait_seconds",
            "Time a fetch that waited for its host spent waiting.",
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.hosts_backing_off = Gauge(
            "research_hosts_backing_off",
            "Hosts every worker of the queue holds off after a 429 or 503 with Retry-After (sampled).",
            registry=r,
        )
        self.archive_records = Counter(
            "research_archive_records",
            "Evidence archive writes by outcome: 'written', 'revisit' (a payload stored before), "
            "'dropped' (the writer's queue was full, or the store is known to be down), 'failed', "
            "'lost' (accepted and never written: a failed write, or swept from a stopped worker).",
            ["outcome"],
            registry=r,
        )
        self.archive_bytes = Counter(
            "research_archive_bytes",
            "Bytes written to the evidence archive (compressed WARC files).",
            registry=r,
        )
        self.archive_queue = Gauge(
            "research_archive_queue",
            "Archive writes waiting in this worker's queue.",
            registry=r,
        )
        self.render_warm = Gauge(
            "research_render_browsers_warm",
            "Browsers this render worker holds launched ahead, ready for a render (RESEARCH_RENDER_WARM).",
            registry=r,
        )
        self.render_launch = Histogram(
            "research_render_launch_seconds",
            "Browser launches (fresh profile included) by when: 'ahead' (warm, off a render's clock) or "
            "'on_clock' (no warm browser: the render waited for it).",
            ["when"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.render_warm_retired = Counter(
            "research_render_warm_retired",
            "Warm browsers replaced instead of handed out, by reason: 'dead' or 'stale'.",
            ["reason"],
            registry=r,
        )
        self.archive_up = Gauge(
            "research_archive_up",
            "1 while this worker's last archive write succeeded (or none was tried), 0 after a failure.",
            registry=r,
        )
