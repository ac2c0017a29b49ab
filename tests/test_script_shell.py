"""The app-shell detector: a page its scripts build says ``script_shell``; an article never does."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.definitions import fetch_page_definition
from jobs.reader.document import build_document
from jobs.reader.html.reduce import reduce_all
from jobs.reader.script_shell import SHELL_MAX_CHARS, ShellSignals, is_script_shell, shown_chars
from tests.support.app_shells import NOT_SHELLS, SHELLS, SHORT_PAGES
from worker.config import RenderMode, Settings


async def _document(html: str) -> bool:
    document = await build_document(
        html.encode(),
        "text/html; charset=utf-8",
        "https://site.test/",
        extract="main",
        max_chars=40_000,
        cpu_budget_s=3.0,
        body_truncated=False,
    )
    return document.script_shell


@pytest.mark.parametrize("framework", sorted(SHELLS))
async def test_every_frameworks_starter_shell_is_a_script_shell(framework: str) -> None:
    assert await _document(SHELLS[framework])


@pytest.mark.parametrize("page", sorted(NOT_SHELLS))
async def test_a_short_page_without_shell_markup_or_with_its_text_is_not_a_shell(page: str) -> None:
    assert not await _document(NOT_SHELLS[page])


async def test_a_shell_whose_server_rendered_its_text_is_an_ordinary_page() -> None:
    filled = SHELLS["react-vite"].replace(
        '<div id="root" data-mount></div>',
        '<div id="root">' + "<p>Every word of the filing was rendered on the server. </p>" * 6 + "</div>",
    )
    assert not await _document(filled)


async def test_a_pdf_or_a_json_body_is_never_a_shell() -> None:
    document = await build_document(
        b'{"id": "root", "script": "<script src=x>"}',
        "application/json",
        "https://site.test/",
        extract="main",
        max_chars=1000,
        cpu_budget_s=1.0,
        body_truncated=False,
    )
    assert document.script_shell is False


def test_the_signals_are_counted_from_the_reducers_own_token_stream() -> None:
    shell = reduce_all(SHELLS["create-react-app"]).shell
    assert (shell.mounts, shell.bundles, shell.noscripts) == (1, 1, 1)
    assert reduce_all(SHELLS["nextjs-client"]).shell.markers == 1


def test_a_noscript_pixel_beside_an_inline_snippet_is_not_shell_markup() -> None:
    signals = ShellSignals(scripts=1, noscripts=1)
    assert not signals.looks_like_shell()
    assert ShellSignals(scripts=1, bundles=1, noscripts=1).looks_like_shell()


def test_markup_without_any_script_is_never_a_shell() -> None:
    assert not is_script_shell(ShellSignals(mounts=3, markers=2), 0)


_words = st.text(alphabet="abcdefghij klmnop", min_size=0, max_size=400)


@settings(max_examples=60, deadline=None)
@given(framework=st.sampled_from(sorted(SHELLS)), filler=_words)
def test_a_shell_stays_a_shell_exactly_while_its_text_is_short(framework: str, filler: str) -> None:
    html = SHELLS[framework].replace("</body>", f"<p>{filler}</p></body>", 1)
    reduction = reduce_all(html)
    chars = len(" ".join(filler.split()))
    shown = shown_chars(reduction.blocks)
    assert is_script_shell(reduction.shell, shown) == (shown < SHELL_MAX_CHARS)
    # The oracle outside the detector: the filler is the page's own text, all of it shown.
    assert shown >= chars or "loading" in filler


@settings(max_examples=60, deadline=None)
@given(
    tags=st.lists(
        st.sampled_from(["div", "p", "span", "section", "img", "a", "ul", "li", "noscript", "style"]),
        max_size=30,
    ),
    text=_words,
)
def test_markup_with_no_script_at_all_is_never_a_shell(tags: list[str], text: str) -> None:
    html = "<html><body>" + "".join(f"<{t} id=root>" for t in tags) + text + "</body></html>"
    reduction = reduce_all(html)
    assert not is_script_shell(reduction.shell, sum(len(b.text) for b in reduction.blocks))


@pytest.mark.parametrize("mode", list(RenderMode))
def test_the_tool_description_says_what_script_shell_means_and_offers_render_only_when_on(
    mode: RenderMode,
) -> None:
    definition = fetch_page_definition(Settings(render=mode))
    assert "script_shell: true means" in definition["description"]
    offered = "render" in definition["input_schema"]["properties"]
    assert offered == (mode is not RenderMode.OFF)
    assert ("render: true" in definition["description"]) == offered


# What a shell's server may write around its empty mount point: chrome, never the page's own text.
CHROME = {
    "nav": "<nav>{}</nav>",
    "header": "<header>{}</header>",
    "footer": "<footer>{}</footer>",
    "aside": "<aside>{}</aside>",
    "cookie": '<div class="cookie-banner"><p>{}</p></div>',
    "consent": '<div id="consent"><p>{}</p></div>',
    "role-nav": '<div role="navigation">{}</div>',
}


@settings(max_examples=60, deadline=None)
@given(
    framework=st.sampled_from(sorted(SHELLS)),
    parts=st.lists(st.tuples(st.sampled_from(sorted(CHROME)), _words), min_size=1, max_size=3),
)
def test_a_shell_stays_a_shell_however_much_chrome_its_server_wrote(
    framework: str, parts: list[tuple[str, str]]
) -> None:
    chrome = "".join(CHROME[kind].format(words) for kind, words in parts)
    html = SHELLS[framework].replace("<body>", "<body>" + chrome, 1)
    if "<body>" not in SHELLS[framework]:  # a body tag with attributes
        html = SHELLS[framework].replace("</body>", chrome + "</body>", 1)
    reduction = reduce_all(html)
    assert reduction.shell.looks_like_shell()
    assert is_script_shell(reduction.shell, shown_chars(reduction.blocks))


@settings(max_examples=60, deadline=None)
@given(
    mount=st.sampled_from(["root", "app", "__next", "__nuxt", "elm", "svelte"]),
    sentence=st.text(alphabet="abcdefghij klmnop", min_size=SHELL_MAX_CHARS, max_size=199).filter(
        lambda t: len(" ".join(t.split())) >= SHELL_MAX_CHARS  # as the reader collapses it
    ),
)
def test_a_short_real_page_with_a_mount_id_is_not_a_shell(mount: str, sentence: str) -> None:
    html = f"<html><body><div id={mount}><p>{sentence}</p></div><script src=/app.js></script></body></html>"
    reduction = reduce_all(html)
    assert reduction.shell.looks_like_shell()  # the markup alone would say shell
    assert not is_script_shell(reduction.shell, shown_chars(reduction.blocks))


def test_the_short_page_family_spans_the_lengths_once_called_shells() -> None:
    lengths = sorted(int(name.rsplit("-", 1)[1]) for name in SHORT_PAGES)
    assert lengths[0] <= 62 and lengths[-1] >= 78


@pytest.mark.parametrize("framework", ["flutter-web", "blazor-wasm", "elm-make", "custom-element-root"])
def test_each_new_frameworks_markup_is_recognised_without_the_generic_signals(framework: str) -> None:
    # No noscript in any of them: what makes them shells is the framework's own loader or root.
    signals = reduce_all(SHELLS[framework]).shell
    assert signals.noscripts == 0
    assert signals.mounts + signals.markers > 0
