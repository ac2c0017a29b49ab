"""The layout shows the architecture: imports flow one way, and there are no cycles.

worker/ is the runtime, jobs/ is what a job does; only the composition root (worker/settings.py)
reaches from the runtime into the tools, the reader never imports the tools, and no module
depends on itself through others. Imports under ``if TYPE_CHECKING:`` count too: a type that
points upward is a dependency that points upward.

The packages stand in layers (``LAYERS``, lowest first): a module imports only from its own layer
or the layers below it, so the state in Redis never reaches into the runtime, the runtime never
into the tools, and only the faces people use (client, command line, dashboard) sit on top.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("worker", "jobs")
COMPOSITION_ROOTS = frozenset({"worker.settings"})
TOOLS = ("jobs.fetch", "jobs.search", "jobs.providers", "jobs.definitions", "jobs.render", "jobs.cite")
# The tools' light facts (names, what a call is about, definitions, output schemas): the faces
# (client, MCP server, command line) read them here, never from the composition root.
LIGHT_FACTS = frozenset({"jobs.facts"})
FACES = ("worker.client", "worker.tool_calls", "worker.mcp", "worker.cli")
# What runs a tool: importing any of these is importing a tool's body.
TOOL_BODIES = (
    "jobs.fetch",
    "jobs.search",
    "jobs.providers",
    "jobs.reader",
    "jobs.reading",
    "jobs.fetcher",
    "jobs.render",
    "jobs.decoding",
    "jobs.robots",
    "jobs.cite",
)
MAX_MODULE_LINES = 600
# Each row may import itself and the rows above it. A name stands for the module or the package.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("worker", "worker.limits", "worker.serialization", "worker.page_metadata"),
    # The foundation every part stands on: settings, errors, logs, metrics and the guard. The Redis
    # connection is foundation too, though it lives with the state it connects to: it owns the
    # Redis URL's grammar, which the settings check at start-up, and imports nothing above row 0.
    (
        "worker.config",
        "worker.errors",
        "worker.logs",
        "worker.metrics",
        "worker.guardian",
        "worker.state.redis_conn",
        # HTTP parsed as a browser parses it: the guardian's connector is built on it; it imports
        # nothing of the project.
        "worker.net.browser_http",
    ),
    ("worker.net",),
    ("worker.state", "worker.embedded", "worker.archive"),
    ("worker.runtime",),
    ("jobs.decoding", "jobs.reader", "jobs.definitions", "jobs.output_schemas", "jobs.facts"),
    ("jobs.fetcher", "jobs.providers", "jobs.reading", "jobs.robots"),
    # fetch_page's rooms, in the order of a fetch: the request, the report's rule for hops, the
    # network side, the page, the hand-off to a render worker, and the tool that runs them.
    ("jobs.fetch.request", "jobs.fetch.hops"),
    ("jobs.fetch.network", "jobs.fetch.page"),
    ("jobs.fetch.handoff",),
    ("jobs.fetch", "jobs.search", "jobs.cite"),
    ("jobs.render",),  # the render worker's tool: a fetch read in a browser
    ("worker.settings",),
    (
        "worker.client",
        "worker.tool_calls",
        "worker.citations",
        "worker.shapes",
        "worker.mcp",
        "worker.dashboard",
        "worker.cli",
    ),
)
MAX_MODULES_PER_PACKAGE = 15


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    return {module_name(path): path for package in PACKAGES for path in (ROOT / package).rglob("*.py")}


def imports_of(path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules ``path`` imports, at any depth of the file (lazy imports included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name.split(".")[0] in PACKAGES:
                found.add(name)
    return found


def graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: imports_of(path, modules) - {name} for name, path in modules.items()}


def test_only_the_composition_root_imports_the_tools_from_the_runtime() -> None:
    upward = {
        (module, target)
        for module, targets in graph().items()
        if module.startswith("worker") and module not in COMPOSITION_ROOTS
        for target in targets
        if target.startswith("jobs") and not (module.startswith(FACES) and target in LIGHT_FACTS)
    }
    assert upward == set()


def reachable(start: str) -> set[str]:
    edges = graph()
    seen: set[str] = set()
    todo = [start]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(edges.get(module, ()))
    return seen


def test_the_light_facts_reach_no_tool_body() -> None:
    for facts in LIGHT_FACTS:
        assert sorted(m for m in reachable(facts) if m.startswith(TOOL_BODIES)) == []


def test_no_face_imports_the_composition_root() -> None:
    assert (
        sorted(
            (module, target)
            for module, targets in graph().items()
            if module.startswith(FACES) and module != "worker.cli.run"  # `run` builds the worker itself
            for target in targets
            if target in COMPOSITION_ROOTS
        )
        == []
    )


def test_importing_the_client_loads_no_tool_body() -> None:
    # A real import in a fresh interpreter: lazy imports and re-exports count, not only the AST.
    code = "import sys, worker.client; print('\\n'.join(sorted(sys.modules)))"
    loaded = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True, timeout=120
    ).stdout.split()
    assert "worker.client" in loaded
    assert [m for m in loaded if m.startswith(TOOL_BODIES) or m in COMPOSITION_ROOTS] == []


def test_the_reader_does_not_import_the_tools() -> None:
    reaching = {
        (module, target)
        for module, targets in graph().items()
        if module.startswith("jobs.reader")
        for target in targets
        if target.startswith(TOOLS)
    }
    assert reaching == set()


def test_there_are_no_import_cycles() -> None:
    edges = graph()
    # Package __init__ modules hold only docstrings here; an edge to a package is to its contents.
    cycles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for target in sorted(edges.get(node, ())):
            if state.get(target) == 1:
                cycles.append([*stack[stack.index(target) :], target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)
    assert cycles == []


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_reads_the_environment_except_configuration(package: str) -> None:
    readers = sorted(
        module_name(path)
        for path in (ROOT / package).rglob("*.py")
        if "os.environ" in path.read_text() or "getenv(" in path.read_text()
    )
    assert readers in ([], ["worker.config.record"])


def layer_of(module: str) -> int:
    """The row of the longest layer name that is ``module`` or a package holding it."""
    best: tuple[int, int] | None = None
    for row, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and (best is None or len(name) > best[1]):
                best = (row, len(name))
    assert best is not None, f"{module} is in no layer: add it to LAYERS"
    return best[0]


def test_every_import_points_to_its_own_layer_or_below() -> None:
    upward = sorted(
        (module, target)
        for module, targets in graph().items()
        for target in targets
        if layer_of(target) > layer_of(module)
    )
    assert upward == []


def packages() -> list[Path]:
    return sorted(init.parent for package in PACKAGES for init in (ROOT / package).rglob("__init__.py"))


@pytest.mark.parametrize("package", packages(), ids=lambda path: str(path.relative_to(ROOT)))
def test_no_package_holds_more_than_fifteen_modules(package: Path) -> None:
    modules = [path for path in package.glob("*.py") if path.name != "__init__.py"]
    assert len(modules) <= MAX_MODULES_PER_PACKAGE


@pytest.mark.parametrize("package", packages(), ids=lambda path: str(path.relative_to(ROOT)))
def test_every_package_says_in_its_first_line_what_it_is(package: Path) -> None:
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text()))
    assert doc, f"{package.relative_to(ROOT)}/__init__.py has no docstring"
    assert doc.splitlines()[0].strip()


@pytest.mark.parametrize(
    "path",
    sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py")),
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_no_module_in_worker_or_jobs_is_over_six_hundred_lines(path: Path) -> None:
    assert len(path.read_text().splitlines()) <= MAX_MODULE_LINES
