"""The arq 0.28 internals ResearchWorker replaces or leans on are still the ones it was written
against: an arq upgrade that changes one fails here, loudly, before it can change a job's fate.

Each replaced method is pinned by a hash of arq's source (re-read our override against arq's new
code, then record the new hash), each override must keep arq's signature (arq's own code calls
them), and the helpers and attributes the worker uses must still have the shapes it uses.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import textwrap

import arq
import pytest
from arq import jobs, utils
from arq.worker import Function, Retry, Worker

from worker.runtime.worker import ResearchWorker

# arq 0.28's Worker methods that ResearchWorker replaces (its docstring at each says which arq
# behaviour it replaces and why), with the SHA-256 (first 16 hex digits) of arq's source of each.
REPLACED = {
    "main": "45ca1591c9717466",
    "_poll_iteration": "f8d39d823a0a59f2",
    "_release_sem_dec_counter_on_complete": "0ed101482e942c33",
    "record_health": "108f4b8686c9402d",
    "run_job": "589a19059ff84ee7",
}
# arq's methods that ResearchWorker calls or relies on without replacing: its start and stop
# (async_run, close: signals, the shutdown grace, on_shutdown), the heart beat and the burst
# count, and __init__ (the attributes below).
RELIED_ON = {
    "async_run": "f3434c3dd359b31b",
    "close": "5bcc9cb356680829",
    "heart_beat": "2e9959bea66dc551",
    "_jobs_started": "c5643370c110c7cd",
    "__init__": "edfb0cd7e05e77cf",
}
# What ResearchWorker reads or sets on arq's Worker (assigned in arq's __init__).
ATTRIBUTES = {
    "functions", "queue_name", "burst", "max_burst_jobs", "max_jobs", "sem", "job_counter", "tasks",
    "job_tasks", "allow_pick_jobs", "keep_result_s", "poll_delay_s", "max_tries", "job_timeout_s",
    "jobs_complete", "jobs_failed", "jobs_retried", "health_check_interval", "health_check_key",
    "_last_health_check", "_pool", "ctx", "on_startup", "on_shutdown", "loop", "allow_abort_jobs",
}  # fmt: skip
# The helpers the replaced run_job calls, with the signatures it was written against.
HELPERS = {
    jobs.deserialize_job_raw: (
        "(r: bytes, *, deserializer: Optional[Callable[[bytes], dict[str, Any]]] = None) -> "
        "tuple[str, tuple[typing.Any, ...], dict[str, typing.Any], int, int]"
    ),
    jobs.serialize_result: (
        "(function: str, args: tuple[typing.Any, ...], kwargs: dict[str, typing.Any], job_try: int, "
        "enqueue_time_ms: int, success: bool, result: Any, start_ms: int, finished_ms: int, ref: str, "
        "queue_name: str, job_id: str, *, serializer: Optional[Callable[[dict[str, Any]], bytes]] = None)"
        " -> Optional[bytes]"
    ),
    utils.ms_to_datetime: "(unix_ms: int) -> datetime.datetime",
    utils.timestamp_ms: "() -> int",
}


def source_hash(name: str) -> str:
    return hashlib.sha256(inspect.getsource(getattr(Worker, name)).encode()).hexdigest()[:16]


def test_arq_is_the_release_the_overrides_were_written_against() -> None:
    assert arq.VERSION.startswith("0.28."), f"arq {arq.VERSION}: re-read worker/runtime/worker.py's overrides"


@pytest.mark.parametrize("name", sorted({**REPLACED, **RELIED_ON}))
def test_arqs_code_under_each_override_is_unchanged(name: str) -> None:
    expected = {**REPLACED, **RELIED_ON}[name]
    assert source_hash(name) == expected, (
        f"arq changed Worker.{name}: compare its new code with what worker/runtime/worker.py "
        "replaces or relies on, then record the new hash here"
    )


@pytest.mark.parametrize("name", sorted(REPLACED))
def test_each_override_keeps_arqs_signature_and_says_what_it_replaces(name: str) -> None:
    ours = getattr(ResearchWorker, name)
    assert ours is not getattr(Worker, name), f"ResearchWorker no longer overrides {name}"
    assert (
        inspect.signature(ours).parameters.keys()
        == inspect.signature(getattr(Worker, name)).parameters.keys()
    )
    doc = inspect.getdoc(ours) or ""
    assert "arq 0.28" in doc, f"ResearchWorker.{name} must say which arq 0.28 behaviour it replaces and why"


def test_arqs_init_still_sets_every_attribute_the_worker_uses() -> None:
    tree = ast.parse(textwrap.dedent(inspect.getsource(Worker.__init__)))
    assigned = {
        target.attr
        for node in ast.walk(tree)
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id == "self"
    }
    assert ATTRIBUTES - assigned == set()


@pytest.mark.parametrize("helper", list(HELPERS), ids=lambda f: f.__name__)
def test_the_helpers_run_job_calls_keep_their_signatures(helper: object) -> None:
    assert str(inspect.signature(helper)) == HELPERS[helper]  # type: ignore[arg-type, index]


def test_the_job_and_retry_shapes_run_job_reads_are_arqs() -> None:
    fields = set(inspect.signature(Function).parameters)
    assert {"name", "coroutine", "timeout_s", "max_tries"} <= fields
    assert Retry(defer=2).defer_score == 2000
