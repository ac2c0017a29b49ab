"""The HTML element tables the reducer needs: which elements break lines, which are dropped, which
close which. Names follow the HTML standard's parsing section; nothing here is site-specific."""

from __future__ import annotations

import re

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

# Elements whose start and end end a line of text.
BLOCK = frozenset(
    {
        "address",
        "article",
        "aside",
        "blockquote",
        "caption",
        "center",
        "dd",
        "details",
        "dialog",
        "dir",
        "div",
        "dl",
        "dt",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "form",
        "frameset",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hgroup",
        "hr",
        "legend",
        "li",
        "listing",
        "main",
        "menu",
        "nav",
        "ol",
        "optgroup",
        "option",
        "p",
        "plaintext",
        "pre",
        "search",
        "section",
        "summary",
        "table",
        "tbody",
        "textarea",
        "tfoot",
        "thead",
        "tr",
        "ul",
        "xmp",
    }
)
CELLS = frozenset({"td", "th"})
HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})

# Content never shown as text: scripts and styles, inert templates, embedded documents and their
# fallback, graphics, and the option lists of closed drop-downs.
DROPPED = frozenset(
    {
        "script",
        "style",
        "noscript",
        "template",
        "iframe",
        "object",
        "svg",
        "math",
        "noembed",
        "noframes",
        "canvas",
        "audio",
        "video",
        "datalist",
        "select",
    }
)
FOREIGN_ROOTS = frozenset({"svg", "math"})
# Inside svg and math these hold HTML again (the standard's integration points).
INTEGRATION_POINTS = frozenset(
    {"foreignobject", "desc", "title", "mi", "mo", "mn", "ms", "mtext", "annotation-xml"}
)
# An HTML start tag among these ends open svg or math content ("breaks out" of foreign content).
BREAKOUT = frozenset(
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
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
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

# A start tag among these closes an open <p> (the standard's "close a p element").
CLOSES_P = frozenset(
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
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
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
# End tags stop looking for their element at these (the standard's "has an element in scope").
SCOPE_BOUNDARY = frozenset(
    {"applet", "caption", "html", "table", "td", "th", "marquee", "object", "template"} | INTEGRATION_POINTS
)
TABLE_BOUNDARY = frozenset({"html", "table", "template"})
TABLE_PARTS = frozenset({"table", "tbody", "thead", "tfoot", "tr", "caption", "colgroup"})
# An end tag of an inline element stops at any of these without closing anything.
SPECIAL = frozenset(BLOCK | CELLS | SCOPE_BOUNDARY | {"body", "button", "li", "dd", "dt", "p", "select"})

# Class and id words that mark page furniture or the article, in the spirit of Readability's
# candidate patterns. They only tilt the block scores; structure and density decide.
BOILERPLATE_WORDS = re.compile(
    r"(?:^|[^a-z])(?:nav|navbar|navigation|menu|breadcrumbs?|footer|sidebar|side-bar|widget|widgets|"
    r"related|recommend\w*|recirc\w*|share|sharing|social|follow|newsletter|subscribe|subscription|"
    r"signup|promo\w*|advert\w*|ads?|adv|sponsor\w*|banner|masthead|toolbar|pagination|pager|tags?|"
    r"tag-?list|cookies?|consent|gdpr|cmp|popup|modal|"
    r"overlay|skip-?link|login|copyright|legal|disclaimer|most-?read|popular|trending|outbrain|"
    r"taboola|rss|sr-only|visually-?hidden|screen-?reader-?text|print-only|author-?bio|about-?author|"
    r"byline|meta|post-?meta|entry-?meta|article-?meta|dateline|teasers?|more-?stories|"
    r"read-?more|read-?next|up-?next|shopping|community|supplemental|extra)(?:$|[^a-z])"
)
CONTENT_WORDS = re.compile(
    r"(?:^|[^a-z])(?:article|articlebody|article-?body|article-?content|content|entry|entry-?content|"
    r"hentry|h-entry|post|post-?body|post-?content|story|story-?body|text|body|body-?text|blog|"
    r"main|prose|markdown|rich-?text|page-?content|news)(?:$|[^a-z])"
)
# Parts of an article that are not its text, named the same way across sites and often in
# compound class names ("entry-meta", "content__byline", "ArticlePage-datePublished"), so matched
# anywhere in a class or id: inside the main content's container they are dropped.
DISCARD_PARTS = re.compile(
    r"share|sharing|social|syndicat|newsletter|subscri|signup|sign-up|cookie|consent|tag-?list|"
    r"sidebar|banner|byline|author|dateline|timestamp|datepublished|date-published|published-date|"
    r"publish-date|credit|caption|related|recommend|most-?popular|most-?read|trending|outbrain|"
    r"taboola|promo|sponsor|comment|footer|pagination|pager|toolbar|follow|rating|widget|"
    r"breadcrumb|rail|read-?next|meta(?:data)?(?:[^a-z]|$)"
)
# Reader comments are never the page's main content, however much text they hold.
COMMENT_WORDS = re.compile(
    r"(?:^|[^a-z])(?:comments?|comment-?list|commentlist|disqus|respond|replies|reply)(?:$|[^a-z])"
)
CONSENT_WORDS = re.compile(r"cookie|consent|gdpr|cmp-|onetrust|didomi|usercentrics|cookiebot|privacy-?banner")
