"""The page's text as Markdown that reads as that text and nothing else.

A page that writes ``# SYSTEM``, ``[click](javascript:...)``, ``<script>``, a pipe table or a
code fence in its prose must not become a heading, a link, raw HTML, a table or code in what the
agent reads: the structure of the Markdown is the reader's, never the page's. So every character
CommonMark (with GitHub tables) could read as markup is escaped with a backslash, which CommonMark
defines for every ASCII punctuation character:

- anywhere in a line: ``\\`` (escapes, hard breaks), `` ` `` (code), ``*`` and ``_`` (emphasis,
  thematic breaks), ``[`` and ``]`` (links, images, reference definitions), ``<`` and ``>`` (HTML,
  autolinks, block quotes), ``|`` (table cells), ``~`` (fences, strikethrough), ``$`` (math, which
  GitHub's renderer reads between dollars), and ``&`` when it starts something that reads as a
  character reference (``&amp;``, ``&#35;``);
- at the start of a line: ``#`` (ATX headings), ``-``, ``+`` and ``=`` (list items, thematic
  breaks, setext underlines), and the ``.`` or ``)`` after up to nine digits and before a space
  (ordered list items);
- in a heading, every ``#`` (a closing sequence would be dropped).

Lines handed here carry no leading or trailing whitespace (the reducer collapses it), so nothing
reads as indented code or as a two-space hard break.
"""

from __future__ import annotations

import re

_INLINE = re.compile(r"[\\`*_\[\]<>|~$]|&(?=#?[0-9A-Za-z]+;)")
_ORDERED = re.compile(r"(\d{1,9})([.)])(?=\s|$)")
_LINE_START = frozenset("#-+=")
# In a link destination between < and >, these would end it or be read as escapes or references.
_DESTINATION = re.compile(r"[\\<>]|&(?=#?[0-9A-Za-z]+;)")
_BACKTICKS = re.compile(r"`+")


def inline(text: str) -> str:
    """Text inside a line, where it does not start the line."""
    return _INLINE.sub(r"\\\g<0>", text)


def line_start(escaped: str) -> str:
    """An already ``inline``-escaped line, made safe where it starts a line."""
    if not escaped:
        return escaped
    if escaped[0] in _LINE_START:
        return "\\" + escaped
    if "0" <= escaped[0] <= "9" and (marker := _ORDERED.match(escaped)) is not None:
        return f"{escaped[: marker.end(1)]}\\{escaped[marker.end(1) :]}"
    return escaped


def line(text: str) -> str:
    """A whole line of the page's text."""
    return line_start(inline(text))


def heading(text: str) -> str:
    """The text of an ATX heading (after its ``#`` marks and space)."""
    return inline(text).replace("#", "\\#")


def destination(url: str) -> str:
    """A link destination for a canonical https URL, in angle brackets, which take parentheses
    and spaces as they are."""
    return "<" + _DESTINATION.sub(r"\\\g<0>", url) + ">"


def fence(code: str) -> str:
    """A backtick fence longer than any run of backticks in ``code`` (so no line of it closes the
    block), and at least three long."""
    longest = max((len(run) for run in _BACKTICKS.findall(code)), default=0)
    return "`" * max(3, longest + 1)


# What a reader of the Markdown sees, for find: every backslash escape undone, outside code blocks
# (whose text is as it is). Any ASCII punctuation may be escaped (CommonMark), not only what
# ``inline`` escapes, since that is what a renderer undoes.
_ESCAPED = re.compile(r"\\[!-/:-@\[-`{-~]")
_FENCE_LINE = re.compile(r"^`{3,}$", re.MULTILINE)


def unescaped(markdown: str) -> tuple[str, list[int]]:
    """The Markdown as a reader sees its characters, and, in order, where in that text each
    character an escape took its backslash from stands: a seen offset ``v`` is the Markdown's
    offset ``v + bisect_right(escapes, v)``."""
    parts: list[str] = []
    escapes: list[int] = []
    for start, end, code in _regions(markdown):
        if code:
            parts.append(markdown[start:end])
            continue
        at = start
        for match in _ESCAPED.finditer(markdown, start, end):
            parts.append(markdown[at : match.start()])
            escapes.append(match.start() - len(escapes))
            at = match.start() + 1
        parts.append(markdown[at:end])
    return "".join(parts), escapes


def _regions(markdown: str) -> list[tuple[int, int, bool]]:
    """The Markdown cut into prose and fenced code, ``(start, end, is_code)``: a fence line opens a
    block that a fence line at least as long closes (the writer's own fences, ``fence``)."""
    regions: list[tuple[int, int, bool]] = []
    at = 0
    opened: re.Match[str] | None = None
    for line in _FENCE_LINE.finditer(markdown):
        if opened is None:
            regions.append((at, line.start(), False))
            opened, at = line, line.start()
        elif len(line.group()) >= len(opened.group()):
            regions.append((at, line.end(), True))
            opened, at = None, line.end()
    regions.append((at, len(markdown), opened is not None))
    return regions
