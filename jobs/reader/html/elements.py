"""The HTML element tables the reducer needs: which elements break lines, which are dropped, which
close which. Names follow the HTML standard's parsing section; nothing here is site-specific."""

from __future__ import annotations

VOID = frozenset(
    {
        "area",
        "base",
        "basefont",
        "bgsound",
        "br",
        "col",
        "embed",
        "frame",
        "hr",
        "img",
        "image",
        "input",
        "keygen",
        "link",
        "meta",
        "param",
        "source",
        "track",
        "wbr",
    }
)

HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
# A start tag among these closes an open <p> (the standard's "close a p element").
CLOSES_P = HEADINGS | frozenset(
    {
        "address",
        "article",
        "aside",
        "blockquote",
        "center",
        "details",
        "dialog",
        "dir",
        "div",
        "dl",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "form",
        "header",
        "hgroup",
        "hr",
        "listing",
        "main",
        "menu",
        "nav",
        "ol",
        "p",
        "plaintext",
        "pre",
        "search",
        "section",
        "summary",
        "table",
        "ul",
        "xmp",
        "dd",
        "dt",
        "li",
    }
)
# Elements whose start and end end a line of text: every element whose start closes a <p>, and
# the parts of tables, forms and framesets that stand on lines of their own.
BLOCK = CLOSES_P | frozenset(
    {"caption", "frameset", "legend", "optgroup", "option", "tbody", "textarea", "tfoot", "thead", "tr"}
)
CELLS = frozenset({"td", "th"})

# Content never shown as text: scripts and styles, inert templates, embedded documents and their
# fallback, media, and the suggestions of a text field. (svg and math are foreign content, and a
# <select> shows some of its options: foreign.py and visibility.py decide those.)
DROPPED = frozenset(
    {
        "script",
        "style",
        "noscript",
        "template",
        "iframe",
        "object",
        "noembed",
        "noframes",
        "canvas",
        "audio",
        "video",
        "datalist",
    }
)
# An HTML start tag among these ends open svg or math content ("breaks out" of foreign content).
BREAKOUT = HEADINGS | frozenset(
    {
        "b",
        "big",
        "blockquote",
        "body",
        "br",
        "center",
        "code",
        "dd",
        "div",
        "dl",
        "dt",
        "em",
        "embed",
        "head",
        "hr",
        "i",
        "img",
        "li",
        "listing",
        "menu",
        "meta",
        "nobr",
        "ol",
        "p",
        "pre",
        "ruby",
        "s",
        "small",
        "span",
        "strong",
        "strike",
        "sub",
        "sup",
        "table",
        "tt",
        "u",
        "ul",
        "var",
    }
)

RCDATA = frozenset({"title", "textarea"})
RAWTEXT = frozenset({"style", "xmp", "iframe", "noembed", "noframes", "noscript"})

# End tags stop looking for their element at these (the standard's "has an element in scope"), and
# at the integration points of svg and math (open_elements.SCOPING).
SCOPE_BOUNDARY = frozenset(
    {"applet", "caption", "html", "table", "td", "th", "marquee", "object", "template"}
)
TABLE_BOUNDARY = frozenset({"html", "table", "template"})
TABLE_PARTS = frozenset({"table", "tbody", "thead", "tfoot", "tr", "caption", "colgroup"})
# An end tag of an inline element stops at any of these without closing anything (the standard's
# "special" category: not every block is in it; an <option> or a <dialog> is not).
SPECIAL = frozenset(
    (BLOCK - {"dialog", "legend", "optgroup", "option"})
    | CELLS
    | SCOPE_BOUNDARY
    | {"body", "button", "iframe", "noembed", "noframes", "noscript", "script", "select", "style", "title"}
)
