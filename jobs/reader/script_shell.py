"""Is this page an app shell, built by its scripts in the browser?

A single-page app's HTML is a mount point (``<div id="root"></div>``), a bundle and perhaps a
``<noscript>`` asking for JavaScript: the reader finds a few words, and an agent told "the page
says nothing" would take that as evidence. So the reducer counts the shell's signals while the
tokens stream (``ShellSignals.start``, one call per start tag, a few dict lookups), and the
document says ``script_shell`` when the readable text is nearly empty *and* the markup has them:

- a mount point: an element whose id is one the frameworks mount on (``root``, ``app``,
  ``__next``, ``__nuxt``, ``___gatsby``, ``svelte``, Elm's ``elm``...), a framework's own root
  element (Angular's ``<app-root>``, Blazor's ``<app>``, Flutter's ``<flt-glass-pane>`` and
  ``<flutter-view>``), or any custom element (``<my-app>``: a name with a hyphen);
- framework markers: attributes a framework writes (``data-reactroot``, ``ng-version``,
  ``data-server-rendered``, ``data-v-app``, ``ng-app``, ``data-sveltekit-*``), the Next.js data
  island ``<script id="__NEXT_DATA__">``, Ember's config meta, a framework's loader by its file
  name (Flutter's ``flutter_bootstrap.js``, ``flutter.js``, ``main.dart.js``; Blazor's
  ``blazor.webassembly.js``, ``blazor.web.js``, ``blazor.server.js``; Elm's ``elm.js``), Blazor's
  ``#blazor-error-ui``;
- script bundles: ``<script src>`` or ``<script type="module">``;
- a ``<noscript>`` (its text is skipped unread, as a browser with scripting on skips it).

A shell needs a script and one of a mount point, a marker, or a noscript beside a bundle. A
page of little text with none of them (an image gallery, a redirect stub) is just a short page;
an article whose framework rendered it on the server has its text, so it is not a shell, however
many markers it has.

"Nearly empty" is judged by what the page would show as its own (``shown_chars``): its text
less the chrome around it (navigation, header, footer, aside, a cookie notice: the reducer's
context bits) and less an app's placeholders ("Loading...", Blazor's "An unhandled error has
occurred"). So a shell whose server wrote 345 characters of menu, cookie notice and footer around
an empty mount is a shell, and a real page of one short paragraph (60 characters and more) is not.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from jobs.reader.html.vocabulary import ASIDE, BOILERPLATE_HINT, CONSENT, FOOTER, HEADER, NAV

# Characters of its own text below which a page with shell markup is a shell: a few words (a
# title, a stray label) but not a sentence: the shortest real pages say something in 60.
SHELL_MAX_CHARS = 50
# The context bits of a page's chrome: text there is not what the page itself says.
CHROME = NAV | ASIDE | FOOTER | HEADER | BOILERPLATE_HINT | CONSENT
# An app's own placeholder while its scripts load, or its error banner: short, and said by a shell.
PLACEHOLDER = re.compile(
    r"loading|please wait|an unhandled error has occurred|enable javascript|javascript is required"
)
PLACEHOLDER_MAX_CHARS = 60
# All of its readable text, chrome included, below which that judgement is made: a shell's server
# writes a menu, a notice and a footer, not pages of them; an article a site wrapped in classes
# the chrome bits misread has far more.
SHELL_MAX_READABLE = 1500
MOUNT_IDS = frozenset(
    {
        "root",
        "app",
        "__next",
        "__nuxt",
        "___gatsby",
        "svelte",
        "app-root",
        "main-app",
        "react-root",
        "q-app",
        "elm",
        "elm-app",
        "elm-root",
    }
)
ROOT_ELEMENTS = frozenset({"app", "flt-glass-pane", "flutter-view"})
# Hyphenated names that are SVG or MathML's own, not custom elements.
FOREIGN_HYPHENATED = frozenset(
    {
        "annotation-xml",
        "color-profile",
        "font-face",
        "font-face-src",
        "font-face-uri",
        "font-face-format",
        "font-face-name",
        "missing-glyph",
    }
)
# A framework's loader, by the file name its build gives it.
LOADERS = re.compile(
    r"(?:^|/)(?:flutter_bootstrap\.js|flutter\.js|main\.dart\.js|blazor\.(?:webassembly|web|server)\.js|"
    r"elm(?:\.min)?\.js|[^/]*\.elm)(?:$|[?#])"
)
MARKER_IDS = frozenset({"blazor-error-ui"})
MARKER_ATTRIBUTES = frozenset(
    {
        "data-reactroot",
        "data-reactid",
        "ng-version",
        "ng-app",
        "data-ng-app",
        "data-server-rendered",
        "data-v-app",
        "data-sveltekit-preload-data",
        "data-sveltekit-hydrate",
        "data-n-head",
    }
)
MARKER_SCRIPT_IDS = frozenset({"__NEXT_DATA__", "__NUXT_DATA__", "___gatsby-data"})


@dataclass(slots=True)
class ShellSignals:
    """What the markup says about being a shell, counted tag by tag."""

    mounts: int = 0
    markers: int = 0
    bundles: int = 0  # <script src> and <script type=module>
    scripts: int = 0  # every <script>
    noscripts: int = 0

    def start(self, name: str, attrs: dict[str, str]) -> None:
        if name == "script":
            self.scripts += 1
            src = attrs.get("src")
            if src is not None or attrs.get("type", "").strip().lower() == "module":
                self.bundles += 1
            if src is not None and LOADERS.search(src.strip().lower()):
                self.markers += 1
            if attrs.get("id") in MARKER_SCRIPT_IDS:
                self.markers += 1
            return
        if name == "noscript":
            self.noscripts += 1
        elif name in ROOT_ELEMENTS or ("-" in name and name not in FOREIGN_HYPHENATED):
            self.mounts += 1
        elif name == "meta" and attrs.get("name", "").endswith("/config/environment"):
            self.markers += 1  # Ember's build writes its config here
        if attrs:
            element_id = attrs.get("id")
            if element_id is not None:
                element_id = element_id.strip().lower()
                if element_id in MOUNT_IDS:
                    self.mounts += 1
                elif element_id in MARKER_IDS:
                    self.markers += 1
            if not MARKER_ATTRIBUTES.isdisjoint(attrs):
                self.markers += 1

    def looks_like_shell(self) -> bool:
        """The markup of a shell: a script, and something a framework mounts on or marks."""
        if self.scripts == 0:
            return False
        # A noscript alone is weak: analytics snippets bring one (a tracking pixel) to any page.
        return self.mounts > 0 or self.markers > 0 or (self.noscripts > 0 and self.bundles > 0)


class _Text(Protocol):
    text: str
    bits: int


def shown_chars(blocks: Iterable[_Text]) -> int:
    """Characters of what the page says as its own: chrome and an app's placeholders left out."""
    shown = 0
    for block in blocks:
        if block.bits & CHROME:
            continue
        if len(block.text) <= PLACEHOLDER_MAX_CHARS and PLACEHOLDER.search(block.text.lower()):
            continue
        shown += len(block.text)
    return shown


def is_script_shell(signals: ShellSignals, shown: int, readable: int = 0) -> bool:
    """A shell: next to nothing of its own to show (``shown_chars``) and little text at all
    (``readable``), and the markup of an app that builds it in the browser."""
    return shown < SHELL_MAX_CHARS and readable < SHELL_MAX_READABLE and signals.looks_like_shell()
