"""The words the reducer writes on its blocks and main-content selection reads: context bits, what
element names and ARIA roles mean in those bits, and the class/id words that hint at furniture or
the article. Nothing here is site-specific."""

from __future__ import annotations

import re

# What an open element does to the text inside it (bits, inherited by everything it contains).
DROP = 1 << 0  # not text at all: script, style, template, svg...
HIDDEN = 1 << 1  # text hidden from a reader: counted in hidden_removed, not kept
TITLE = 1 << 2
PRE = 1 << 3
LINK = 1 << 4
CODE = 1 << 5  # inside <code>: a block all of whose text is code reads as code in Markdown
NOT_TEXT = DROP | HIDDEN | TITLE
# Where a block sits: the page structure that main-content selection weighs.
NAV = 1 << 8
ASIDE = 1 << 9
FOOTER = 1 << 10
HEADER = 1 << 11
FORM = 1 << 12
MAIN = 1 << 13
ARTICLE = 1 << 14
BOILERPLATE_HINT = 1 << 15
CONTENT_HINT = 1 << 16
CONSENT = 1 << 17
LIST = 1 << 18
TABLE = 1 << 19
HEADING = 1 << 20
QUOTE = 1 << 21
FIGURE = 1 << 22
COMMENTS = 1 << 23
DISCARD_HINT = 1 << 24
EMPHASIS = 1 << 25  # inside <b>, <strong> or <big>: a line set in bold may be a title line
TITLE_HINT = 1 << 26  # a class or id that names a title or headline

ROLE_BITS = {
    "navigation": NAV,
    "menu": NAV,
    "menubar": NAV,
    "banner": HEADER,
    "contentinfo": FOOTER,
    "complementary": ASIDE,
    "search": FORM,
    "form": FORM,
    "main": MAIN,
    "article": ARTICLE,
    "alertdialog": CONSENT,
    "dialog": CONSENT,
    "heading": HEADING,
}
NAME_BITS = {
    "nav": NAV,
    "aside": ASIDE,
    "footer": FOOTER,
    "form": FORM,
    "search": FORM,
    "main": MAIN,
    "article": ARTICLE,
    "ul": LIST,
    "ol": LIST,
    "dl": LIST,
    "menu": LIST,
    "table": TABLE,
    "blockquote": QUOTE,
    "figure": FIGURE,
    "h1": HEADING,
    "h2": HEADING,
    "h3": HEADING,
    "h4": HEADING,
    "h5": HEADING,
    "h6": HEADING,
    "pre": PRE,
    "listing": PRE,
    "xmp": PRE,
    "plaintext": PRE,
    "textarea": PRE,
    "code": CODE,
    "b": EMPHASIS,
    "strong": EMPHASIS,
    "big": EMPHASIS,
}

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
# A part named for a title ("entry-title", "headline", "page_heading"): the line it holds tops what follows.
TITLE_NAMES = re.compile(r"(?:^|[^a-z])(?:title|headline|heading)s?(?:$|[^a-z])")
CONSENT_WORDS = re.compile(r"cookie|consent|gdpr|cmp-|onetrust|didomi|usercentrics|cookiebot|privacy-?banner")


def hint_bits(names: str) -> int:
    """The bits an element's class and id words (``names``, space-separated) give it."""
    lowered = names.lower()
    bits = 0
    boilerplate = BOILERPLATE_WORDS.search(lowered) is not None
    content = CONTENT_WORDS.search(lowered) is not None
    if boilerplate and not content:
        bits |= BOILERPLATE_HINT
    elif content and not boilerplate:
        bits |= CONTENT_HINT
    if CONSENT_WORDS.search(lowered):
        bits |= CONSENT
    if COMMENT_WORDS.search(lowered):
        bits |= COMMENTS
    if DISCARD_PARTS.search(lowered):
        bits |= DISCARD_HINT
    if TITLE_NAMES.search(lowered):
        bits |= TITLE_HINT
    return bits
