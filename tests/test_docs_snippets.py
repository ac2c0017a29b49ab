"""What a newcomer pastes works: every Python block in the README and docs/ is valid Python whose
names are all defined (no top-level await, no placeholder names), and the tour says to activate the
venv; what a model reads never invites it to send report_id, and a refusal never says clamped."""

from __future__ import annotations

import ast
import builtins
import re
from pathlib import Path

import pytest

from jobs.search import SearchRequest
from tests.support.processes import ROOT
from worker.errors import InvalidRequest
from worker.runtime.envelope import check_known

BLOCK = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SNIPPETS = [
    pytest.param(doc, block, id=f"{doc.name}:{number}")
    for doc in DOCS
    for number, block in enumerate(BLOCK.findall(doc.read_text(encoding="utf-8")), start=1)
]


def undefined_names(tree: ast.Module) -> set[str]:
    """Names read somewhere in the snippet that nothing in it (or Python) defines."""
    defined = set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            defined.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
            defined.update(a.arg for a in [*node.args.args, *node.args.kwonlyargs, *node.args.posonlyargs])
            if node.args.vararg:
                defined.add(node.args.vararg.arg)
            if node.args.kwarg:
                defined.add(node.args.kwarg.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        elif isinstance(node, ast.arg):
            defined.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            defined.add(node.name)
    read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return read - defined


def test_the_readme_has_a_python_snippet() -> None:
    assert any(doc.name == "README.md" for doc, _ in (p.values for p in SNIPPETS))


@pytest.mark.parametrize(("doc", "block"), SNIPPETS)
def test_every_python_snippet_is_valid_python_with_every_name_defined(doc: Path, block: str) -> None:
    tree = ast.parse(block)  # a top-level await or `async with` is a SyntaxError here
    assert not undefined_names(tree), f"{doc.name}: names nothing defines: {sorted(undefined_names(tree))}"
    compile(tree, str(doc), "exec")


def test_the_readmes_async_snippet_runs_its_coroutine() -> None:
    [block] = [b for doc, b in (p.values for p in SNIPPETS) if doc.name == "README.md"]  # type: ignore[misc]
    assert "asyncio.run(" in block


def test_the_tour_says_to_activate_the_venv_before_its_first_command() -> None:
    tour = (ROOT / "docs" / "tour.md").read_text(encoding="utf-8")
    first_block = tour.index("```sh")
    assert ".venv/bin/activate" in tour[:first_block]


class Tool:
    def __init__(self, name: str, params: tuple[str, ...]) -> None:
        self.name, self.params = name, params


@pytest.mark.parametrize(
    ("name", "params"),
    [("fetch_page", ("url", "extract", "fresh")), ("web_search", ("query", "max_results"))],
)
@pytest.mark.parametrize("unknown", ["admin", "reportid", "x" * 50, "orgid", "REPORT"])
def test_an_unknown_argument_message_never_names_the_orchestrators_arguments(
    name: str, params: tuple[str, ...], unknown: str
) -> None:
    with pytest.raises(InvalidRequest) as refused:
        check_known(Tool(name, params), {unknown: 1})  # type: ignore[arg-type]
    message = refused.value.message
    assert "report_id" not in message and "org_id" not in message
    assert all(param in message for param in params)


@pytest.mark.parametrize("value", [2**63, -(2**63), 2**100, float(2**70), -float(2**80)])
def test_a_refused_max_results_is_not_called_clamped(value: float) -> None:
    with pytest.raises(InvalidRequest) as refused:
        SearchRequest.parse({"query": "q", "max_results": value})
    assert "clamped" not in refused.value.message and "refused" in refused.value.message
