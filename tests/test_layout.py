"""The layout shows the architecture: imports flow one way, and there are no cycles.

worker/ is the runtime, jobs/ is what a job does; only the composition root (worker/settings.py)
reaches from the runtime into the tools, the reader never imports the tools, and no module
depends on itself through others. Imports under ``if TYPE_CHECKING:`` count too: a type that
points upward is a dependency that points upward.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("worker", "jobs")
COMPOSITION_ROOTS = frozenset({"worker.settings"})
TOOLS = ("jobs.fetch", "jobs.search", "jobs.providers", "jobs.definitions")


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
        if target.startswith("jobs")
    }
    assert upward == set()


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
    assert readers in ([], ["worker.config"])
