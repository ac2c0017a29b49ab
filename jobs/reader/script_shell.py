"""Is this page an app shell, built by its scripts in the browser?

A single-page app's HTML is a mount point (``<div id="root"></div>``), a bundle and perhaps a
``<noscript>`` asking for JavaScript: the reader finds a few words, and an agent told "the page
says nothing" would take that as evidence. So the reducer counts the shell's signals while the
tokens stream (``ShellSignals.start``, one call per start tag, a few dict lookups), and the
document says ``script_shell`` when the readable text is nearly empty *and* the markup has them:

- a mount point: an element whose id is one the frameworks mount on (``root``, ``app``,
  ``__next``, ``__nuxt``, ``___gatsby``, ``svelte``...) or a framework's own root element
  (Angular's ``<app-root>``);
- framework markers: attributes a framework writes (``data-reactroot``, ``ng-version``,
  ``data-server-rendered``, ``data-v-app``, ``ng-app``, ``data-sveltekit-*``), the Next.js data
  island ``<script id="__NEXT_DATA__">``, Ember's config meta;
- script bundles: ``<script src>`` or ``<script type="module">``;
- a ``<noscript>`` (its text is skipped unread, as a browser with scripting on skips it).

A shell needs a script and one of a mount point, a marker, or a noscript beside a bundle. A
page of little text with none of them (an image gallery, a redirect stub) is just a short page;
an article whose framework rendered it on the server has its text, so it is not a shell, however
many markers it has.
"""

from __future__ import annotations

from dataclasses import dataclass

# Readable characters below which a page with shell markup is a shell: a few words of chrome
# ("Loading...", a cookie banner's title) but not a paragraph.
SHELL_MAX_CHARS = 200
MOUNT_IDS = frozenset(
    {"root", "app", "__next", "__nuxt", "___gatsby", "svelte", "app-root", "main-app", "react-root", "q-app"}
)
ROOT_ELEMENTS = frozenset({"app-root", "ion-app"})
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
            if "src" in attrs or attrs.get("type", "").strip().lower() == "module":
                self.bundles += 1
            if attrs.get("id") in MARKER_SCRIPT_IDS:
                self.markers += 1
            return
        if name == "noscript":
            self.noscripts += 1
        elif name in ROOT_ELEMENTS:
            self.mounts += 1
        elif name == "meta" and attrs.get("name", "").endswith("/config/environment"):
            self.markers += 1  # Ember's build writes its config here
        if attrs:
            element_id = attrs.get("id")
            if element_id is not None and element_id.strip().lower() in MOUNT_IDS:
                self.mounts += 1
            if not MARKER_ATTRIBUTES.isdisjoint(attrs):
                self.markers += 1

    def looks_like_shell(self) -> bool:
        """The markup of a shell: a script, and something a framework mounts on or marks."""
        if self.scripts == 0:
            return False
        # A noscript alone is weak: analytics snippets bring one (a tracking pixel) to any page.
        return self.mounts > 0 or self.markers > 0 or (self.noscripts > 0 and self.bundles > 0)


def is_script_shell(signals: ShellSignals, readable_chars: int) -> bool:
    """A shell: nearly no readable text, and the markup of an app that builds it in the browser."""
    return readable_chars < SHELL_MAX_CHARS and signals.looks_like_shell()
