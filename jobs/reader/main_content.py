"""extract="main": the page's main content, chosen from the reducer's blocks without a tree.

Boilerplate classifiers (jusText, boilerpipe, trafilatura) judge blocks of text by their length and
link density; Readability judges containers by the good text they hold. This does both, in linear
time, on the reducer's output (docs/main-content.md tells it at more length):

1. Each block gets a weight: long, link-poor prose counts for its length (less in parts named like
   furniture, more inside <main> or <article>); link lists, navigation, the page's header and
   footer, asides, forms, consent banners, comments and the blurbs of teaser cards count against.
   A form or header that holds most of the page's text is a wrapper, not furniture; a linked
   heading that the title repeats is the page's own headline, not a teaser.
2. Every block-level element holds a contiguous range of blocks, so its total weight is a
   difference of prefix sums; the element with the highest total is the main content's container.
   Prose just before it (a standfirst) and the headings above that, up to the headline, are taken
   in, over a byline, a date or a picture, which stay out.
3. Inside it, what is furniture relative to it is dropped (a share bar, a related-links list, a
   byline, a newsletter form, captions; a class name that most of its prose carries is the site's
   house style and stops counting), then the headings and labels left over nothing, then what
   trails the last paragraph. The smallest element that holds nearly all of the prose is the body:
   before it only the headline and the standfirst stay, after it only tables and code (a bio, a
   pitch, a donation appeal written as plain paragraphs go). The headline goes when the title
   repeats it, since the result carries the title.
4. When the choice is implausible next to the page's readable text (an index page, a product
   page, a registry record made of table cells, a short choice that leaves out more than twice
   its own length of plain text), the full text is returned instead, as extraction "full": the
   agent must never lose the evidence to a wrong guess.

The constants were set on the development corpora (bench/extraction.py, on two fixed halves that
agree); none names a site.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import pairwise

from jobs.reader import reply_boxes
from jobs.reader.html.blocks import Block, Container
from jobs.reader.html.reduce import Reduction
from jobs.reader.html.vocabulary import (
    ARTICLE,
    ASIDE,
    BOILERPLATE_HINT,
    COMMENTS,
    CONSENT,
    DISCARD_HINT,
    FIGURE,
    FOOTER,
    FORM,
    HEADER,
    HEADING,
    LIST,
    MAIN,
    NAV,
    PRE,
    TABLE,
)
from jobs.reader.main_edges import (
    FURNITURE,
    LINK_DENSE,
    LONG,
    Title,
    a_sentence,
    header,
    without_headline,
    without_orphans,
)

SEMANTIC_MAIN = MAIN | ARTICLE
# Furniture an element claims by its name or role: when it holds most of the page (an ASP.NET
# <form>, a <header> left unclosed), it is a wrapper. Comments and consent banners never are.
WRAPPING = NAV | ASIDE | FOOTER | HEADER | FORM

LINK_POOR = 0.3  # link share of a block below which its text is its own
PARAGRAPH_LINK_DENSE = 0.8  # ...unless it is a real paragraph ("read the full report here")
HINTED_PROSE = 0.5  # weight of prose in a part whose class or id names furniture
SEMANTIC_BONUS = 1.25  # weight of prose inside <main> or <article>
SHORT_PENALTY = 2.0  # each short line: many of them make a menu, not an article
LINK_COST = 0.3  # per character of link text (and of a teaser's blurb)
LINKED_HEADING_COST = 3.0  # per character of a headline that is a link: a teaser for another page
FURNITURE_COST = 0.3  # per character inside navigation, header, footer, aside, forms, comments
TEASER_BLOCKS = 5  # blocks of a teaser card at most: a linked headline, a blurb, a date
DISCARD_BELOW = 300  # characters: a paragraph this short in a part named "byline", "caption"... goes
CAPTION_KEEP = 200  # characters: a caption this long is a paragraph of its own
MIN_PROSE = 100.0  # prose characters below which a page is not an article
MAIN_SHARE = 0.5  # of the page's prose the choice must hold
ARTICLE_SHARE = 0.25  # of the best container's prose the page's only <article> holds to win over it
WRAPPER_SHARE = 0.5  # of the page's text a furniture element holds when it wraps the page
LINK_LISTING = 0.5  # link share of the choice's text above which it is a listing
BODY_SHARE = 0.9  # of the choice's prose its body holds
LEFT_OUT = 2.0  # times the choice's text that may be left out when it reads like text
HOUSE_STYLE = 0.7  # share of the container's prose that carries a hint when it names them all


@dataclass(frozen=True)
class Selection:
    blocks: list[Block]
    extraction: str  # "main" or "full"


def weight(block: Block) -> float:
    """How much a block argues for the container around it being the main content."""
    length = len(block.text)
    density = min(1.0, block.link_chars / length) if length else 1.0
    if density > LINK_DENSE:
        # A headline that is a link is a teaser: a list of them is an index or "more stories".
        return -(LINKED_HEADING_COST if block.bits & HEADING else LINK_COST) * length
    if block.bits & FURNITURE:
        return -FURNITURE_COST * length
    if block.kind == "figcaption" or block.bits & FIGURE:
        return 0.0
    if length >= LONG and density < LINK_POOR:
        prose = length * (1.0 - density)
        if block.bits & BOILERPLATE_HINT:
            prose *= HINTED_PROSE
        if block.bits & DISCARD_HINT:
            prose *= HINTED_PROSE
        if block.bits & SEMANTIC_MAIN:
            prose *= SEMANTIC_BONUS
        return prose
    return -SHORT_PENALTY


def select_full(reduction: Reduction) -> Selection:
    blocks = reduction.blocks
    pictures = reduction.pictures
    if not pictures:
        return Selection(blocks, "full")
    return Selection(_merged(blocks, range(len(blocks)), pictures), "full")


def select_main(reduction: Reduction) -> Selection:
    blocks = _unwrapped(reduction)
    if not blocks:
        return select_full(reduction)
    blocks = reply_boxes.marked(blocks, reduction.containers, reduction.hrefs)
    title = Title.of(reduction.title)
    teasers = _teasers(reduction, title)
    weights = _weights(blocks, teasers, title)
    prefix = [0.0]
    prose = [0.0]
    for w in weights:
        prefix.append(prefix[-1] + w)
        prose.append(prose[-1] + (w if w > 0 else 0.0))
    best = Container(0, len(blocks), "body", -1, 0, 0, -1, 0)
    best_score = prefix[-1]
    for container in reduction.containers:
        score = prefix[container.end] - prefix[container.start]
        if score > best_score or (
            score == best_score and container.end - container.start > best.end - best.start
        ):
            best, best_score = container, score
    best = _the_article(reduction, best, prose)
    head = header(blocks, weights, best.start)
    lines = {index for index in head if weights[index] <= 0 and not blocks[index].bits & HEADING}
    span = [*head, *range(best.start, best.end)]
    base = best.bits | _house_style(blocks, best)
    kept = [index for index in span if _keep(blocks[index], base)]
    kept = without_orphans(kept, blocks, weights, best.end, reduction.containers)
    kept = _trim(kept, blocks, weights, base)
    body = _body(kept, reduction.containers, weights, prose, best)
    kept = _within_body(kept, blocks, weights, body, lines)
    sole = _sole_article(reduction, best)
    kept = _with_lists(kept, blocks, weights, sole, base)
    kept = without_headline(kept, blocks, title, body.start, lines)
    chosen = [blocks[index] for index in kept]
    chosen_prose = prose[best.end] - prose[best.start]
    if sole is not None and sole.own_bits & ARTICLE and chosen_prose >= MIN_PROSE / 2:
        # The page's one <article> is its main content however short it is, or however many of
        # its lines are links (a programme, a reading list): the page says so itself.
        return Selection(_with_pictures(kept, blocks, reduction.pictures, body, base), "main")
    inside = blocks[best.start : best.end]
    # In the page's one <main>, a list of links is its content (a programme under its intro);
    # the other checks still stand, so a results table or an index page still falls back.
    if _implausible(chosen, inside, chosen_prose, prose[-1], listing=sole is None):
        return select_full(reduction)
    if _leaves_out_text(blocks, kept, teasers):
        return select_full(reduction)
    return Selection(_with_pictures(kept, blocks, reduction.pictures, body, base), "main")


def _the_article(reduction: Reduction, best: Container, prose: list[float]) -> Container:
    """The page's only <article>, over a container outside it that outweighs it (a short press
    release above the site's plain "about us" paragraphs), when it holds at least a quarter of
    that container's prose: the page says what its article is."""
    articles = [container for container in reduction.containers if container.own_bits & ARTICLE]
    if len(articles) != 1:
        return best
    article = articles[0]
    if article.start <= best.start and best.end <= article.end:
        return best
    held = prose[article.end] - prose[article.start]
    if held < MIN_PROSE / 2 or held < ARTICLE_SHARE * (prose[best.end] - prose[best.start]):
        return best
    return article


def _sole_article(reduction: Reduction, best: Container) -> Container | None:
    """The page's only <article> (or role=article), else its only <main>, when it holds the chosen
    container: an index page has many articles, a single story one."""
    for kind in (ARTICLE, MAIN):
        found = [container for container in reduction.containers if container.own_bits & kind]
        if found:
            only = found[0]
            if len(found) == 1 and only.start <= best.start and best.end <= only.end:
                return only
            return None
    return None


def _with_lists(
    kept: list[int], blocks: list[Block], weights: list[float], around: Container | None, base_bits: int
) -> list[int]:
    """In the page's sole <article> or <main>, its lists of links when they hold more text than its
    prose (a programme under a short intro), outside parts named like furniture; in an article of
    prose, a list of links is "more on this" or "related", and goes."""
    if around is None or not kept:
        return kept
    lists = [
        index
        for index in range(around.start, around.end)
        if blocks[index].bits & LIST
        and blocks[index].text
        and not blocks[index].bits & ~base_bits & (FURNITURE | DISCARD_HINT | BOILERPLATE_HINT)
    ]
    listed = sum(len(blocks[index].text) for index in lists if index not in kept)
    prose = sum(weights[index] for index in range(around.start, around.end) if weights[index] > 0)
    if listed <= prose:
        return kept
    return sorted({*kept, *lists})


def _weights(blocks: list[Block], teasers: list[int], title: Title) -> list[float]:
    weights = [weight(block) for block in blocks]
    for index, block in enumerate(blocks):
        # A blog links the post's own title to its permalink: that link is no teaser.
        if weights[index] < 0 and title.repeats(block):
            weights[index] = -SHORT_PENALTY
    for index in teasers:
        if weights[index] > 0:
            weights[index] = -LINK_COST * len(blocks[index].text)
    return weights


def _house_style(blocks: list[Block], best: Container) -> int:
    """The hints that most of the container's prose carries: a page builder that names every text
    block a "widget" says nothing about which of them is furniture, so the name stops counting."""
    prose = 0
    hinted = dict.fromkeys((DISCARD_HINT, BOILERPLATE_HINT), 0)
    for block in blocks[best.start : best.end]:
        if len(block.text) >= LONG:
            prose += len(block.text)
            for bit in hinted:
                if block.bits & bit:
                    hinted[bit] += len(block.text)
    house = 0
    for bit, chars in hinted.items():
        if prose and chars >= HOUSE_STYLE * prose:
            house |= bit
    return house


def _body(
    kept: list[int], containers: list[Container], weights: list[float], prose: list[float], best: Container
) -> Container:
    """The smallest element inside the choice that holds nearly all of its prose: the article's
    text itself, without the furniture that shares its container."""
    total = sum(weights[index] for index in kept if weights[index] > 0)
    body = best
    if total <= 0:
        return body
    for container in containers:
        if (
            best.start <= container.start
            and container.end <= best.end
            and container.end - container.start < body.end - body.start
            and prose[container.end] - prose[container.start] >= BODY_SHARE * total
        ):
            body = container
    return body


def _within_body(
    kept: list[int], blocks: list[Block], weights: list[float], body: Container, lines: set[int]
) -> list[int]:
    """Around the body, only what belongs to the article stays: before it, the headline (or title
    line) and the standfirst (a byline, a date, a kicker go); after it, tables and code. What
    follows the text in its own element is a bio, a newsletter pitch, a donation appeal, a
    citation box."""
    return [
        index
        for index in kept
        if body.start <= index < body.end
        or (index < body.start and (blocks[index].bits & HEADING or weights[index] > 0 or index in lines))
        or (index >= body.end and blocks[index].bits & (TABLE | PRE))
    ]


def _with_pictures(
    kept: list[int], blocks: list[Block], pictures: list[tuple[int, Block]], body: Container, base_bits: int
) -> list[Block]:
    """The chosen blocks with the article's own pictures (their alt text, which Markdown shows):
    those that stand between the first and the last block kept, inside the body, and not in its
    furniture."""
    if not kept:
        return []
    low, high = max(kept[0], body.start) + 1, min(kept[-1], body.end)
    inside = [
        (position, picture)
        for position, picture in pictures
        if low <= position <= high and not picture.bits & ~base_bits & FURNITURE
    ]
    return _merged(blocks, kept, inside)


def _merged(blocks: list[Block], kept: Sequence[int], pictures: list[tuple[int, Block]]) -> list[Block]:
    """The kept blocks with each picture before the block it stood before (or last)."""
    merged: list[Block] = []
    at = 0
    for index in kept:
        while at < len(pictures) and pictures[at][0] <= index:
            merged.append(pictures[at][1])
            at += 1
        merged.append(blocks[index])
    merged.extend(picture for _, picture in pictures[at:])
    return merged


def _unwrapped(reduction: Reduction) -> list[Block]:
    """The blocks, with the furniture bits of wrappers cleared."""
    blocks = reduction.blocks
    wrappers = _wrappers(reduction)
    if not wrappers:
        return blocks
    # Each holds more than half of the text, so they overlap, and elements that overlap nest:
    # the mask is constant between consecutive boundaries.
    bounds = sorted({bound for wrapper in wrappers for bound in (wrapper.start, wrapper.end)})
    unwrapped = list(blocks)
    for low, high in pairwise(bounds):
        mask = 0
        for wrapper in wrappers:
            if wrapper.start <= low and high <= wrapper.end:
                mask |= wrapper.own_bits & WRAPPING
        for index in range(low, high):
            if blocks[index].bits & mask:
                unwrapped[index] = replace(blocks[index], bits=blocks[index].bits & ~mask)
    return unwrapped


def _wrappers(reduction: Reduction) -> list[Container]:
    """Elements named like furniture that hold most of the page's text: a <form> around the whole
    page (ASP.NET pages, forums) or a <header> left unclosed holds the article too."""
    chars = [0]
    for block in reduction.blocks:
        chars.append(chars[-1] + len(block.text))
    return [
        container
        for container in reduction.containers
        if container.own_bits & WRAPPING
        and not container.own_bits & (COMMENTS | CONSENT)
        and chars[container.end] - chars[container.start] > WRAPPER_SHARE * chars[-1]
    ]


def _trim(kept: list[int], blocks: list[Block], weights: list[float], base_bits: int) -> list[int]:
    """Drop the short lines that trail the last paragraph: "Share this", "Related", "Was this
    helpful?", a photo credit, and whatever trails it in parts named like furniture (an author's
    bio, a newsletter pitch), however long. A full sentence, a table, code or a list stays, and so
    does a heading above them; a heading with nothing after it does not."""
    last = max(
        (
            position
            for position, index in enumerate(kept)
            if weights[index] > 0 and not _hinted(blocks[index], base_bits)
        ),
        default=None,
    )
    if last is None:
        return kept
    # Named parts after the article's text are its furniture only when they are the lesser part:
    # otherwise it is the text that sits in a carelessly named part.
    prose = [max(0.0, weights[index]) for index in kept]
    strict = sum(prose[last + 1 :]) < sum(prose[: last + 1])
    if not strict:
        last = max(position for position, index in enumerate(kept) if weights[index] > 0)
    tail: list[int] = []
    content_follows = False
    for index in reversed(kept[last + 1 :]):
        block = blocks[index]
        if strict and _hinted(block, base_bits):
            continue
        if a_sentence(block) or (content_follows and block.bits & HEADING):
            tail.append(index)
            content_follows = True
    return kept[: last + 1] + tail[::-1]


def _hinted(block: Block, base_bits: int) -> bool:
    return bool(block.bits & ~base_bits & (DISCARD_HINT | BOILERPLATE_HINT))


def _teasers(reduction: Reduction, title: Title) -> list[int]:
    """Blocks of teaser cards: a small element holding a linked headline and a blurb.

    "More stories" rails and index pages repeat such cards; their blurbs read like prose, but
    they belong to other pages.
    """
    blocks = reduction.blocks
    headlines = [0]
    for block in blocks:
        headlines.append(headlines[-1] + (_linked_headline(block) and not title.repeats(block)))
    if not headlines[-1]:
        return []
    found: set[int] = set()
    for container in reduction.containers:
        if (
            container.end - container.start <= TEASER_BLOCKS
            and headlines[container.end] > headlines[container.start]
        ):
            found.update(range(container.start, container.end))
    return sorted(found)


def _linked_headline(block: Block) -> bool:
    if not block.bits & HEADING:
        return False
    length = len(block.text)
    return length >= 15 and block.link_chars > LINK_DENSE * length


def _keep(block: Block, base_bits: int) -> bool:
    length = len(block.text)
    density = min(1.0, block.link_chars / length) if length else 1.0
    # A paragraph inside the article may be mostly a link ("read the report here"); a list item,
    # a cell or a loose line that is mostly a link is navigation.
    if density > (PARAGRAPH_LINK_DENSE if block.kind == "p" and length >= 40 else LINK_DENSE):
        return False
    # Captions and photo credits describe the pictures, which the agent does not get.
    if (block.kind == "figcaption" or block.bits & FIGURE) and length < CAPTION_KEEP:
        return False
    relative = block.bits & ~base_bits
    if relative & FURNITURE:
        return False
    # A byline, a date, a credit, a share prompt: short lines in parts named for them. A long
    # paragraph in such a part is more likely an article that was named carelessly.
    if relative & DISCARD_HINT and length < DISCARD_BELOW:
        return False
    return not (relative & BOILERPLATE_HINT and (length < LONG or density >= LINK_POOR))


def _leaves_out_text(blocks: list[Block], kept: list[int], teasers: list[int]) -> bool:
    """True when the choice leaves out more text than twice its own that reads like text: not
    links, not furniture, not parts named like furniture, not teasers. A short choice on a page of
    tables, a results list or a second article is a guess, and the agent must not lose the rest."""
    explained = set(kept) | set(teasers)
    chosen = sum(len(blocks[index].text) for index in kept)
    left = 0
    for index, block in enumerate(blocks):
        if (
            index not in explained
            and block.link_chars <= LINK_DENSE * len(block.text)
            and not block.bits & (FURNITURE | BOILERPLATE_HINT)
        ):
            left += len(block.text)
    return left > LEFT_OUT * chosen


def _implausible(
    chosen: list[Block], inside: list[Block], chosen_prose: float, all_prose: float, *, listing: bool = True
) -> bool:
    """True when the choice is not a page's main content: fall back to the full text.

    Nothing chosen; a page with hardly any prose (a product page, a registry record of table
    cells); a choice that is mostly links (a list of headlines: an index page); or a choice that
    holds less than half of the page's prose (teasers spread over an index page, or a wrong guess).
    """
    if not listing:
        # The page's one <main> around a list: an intro of a line or two and the list it leads to.
        text = sum(len(b.text) for b in chosen)
        return (
            not chosen
            or all_prose < MIN_PROSE / 2
            or text < MIN_PROSE
            or chosen_prose < MAIN_SHARE * all_prose
        )
    if not chosen or all_prose < MIN_PROSE or chosen_prose < MAIN_SHARE * all_prose:
        return True
    chars = sum(len(b.text) for b in inside)
    links = sum(b.link_chars for b in inside)
    return links > LINK_LISTING * chars


def join_blocks(blocks: list[Block]) -> str:
    parts: list[str] = []
    for block in blocks:
        if not block.text:
            continue  # an image's alt text alone: Markdown shows it, the plain text never did
        if parts:
            parts.append(block.sep)
        parts.append(block.text)
    return "".join(parts)
