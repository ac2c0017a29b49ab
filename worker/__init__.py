"""research-worker: the runtime every job runs under (settings, queue, guardian, budgets, results)."""

__version__ = "0.1.0"
