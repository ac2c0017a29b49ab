"""The edges of the main content: the headline, title line and standfirst above its container,
and the headings and labels that are left heading nothing once furniture is dropped
(main_content.py chooses the container; docs/main-content.md tells it for people)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from jobs.reader.html.blocks import Block, Container
from jobs.reader.html.vocabulary import (
    ASIDE,
    BOILERPLATE_HINT,
    COMMENTS,
    CONSENT,
    DISCARD_HINT,
    EMPHASIS,
    FIGURE,
    FOOTER,
    FORM,
    HEADER,
    HEADING,
    LINK,
    LIST,
    NAV,
    PRE,
    TABLE,
    TITLE_HINT,
)

# Structure that marks a block as page furniture wherever it sits.
FURNITURE = NAV | ASIDE | FOOTER | HEADER | FORM | CONSENT | COMMENTS
LONG = 60  # characters: a block this long with few links reads as prose, in any script
LINK_DENSE = 0.5  # link share above which a block is navigation (but see PARAGRAPH_LINK_DENSE)
ORPHAN_SKIP = 2  # dropped blocks between a heading and its surviving text (a button, a lone link)
SCOPE_WALK = 16  # wrappers walked up from a heading at most (a title wrap, a header, a card)
HEADS_SCAN = 64  # blocks read after a heading at most, pictures included: each label costs a bound
HEADER_GAP = 8  # blocks between the container and its headline at most (a byline, a date...)
HEADLINE_MIN = 10  # characters: a shorter heading is a label, whatever the title says
TITLE_WORDS = 0.8  # share of a heading's words the title holds when it repeats the heading
TITLE_LINE_MAX = 150  # characters: a longer line is a paragraph, bold or not
TITLE_LINE_ENDS = (".", "。", ":", "：")  # a title line has no full stop; a label ends in a colon
SENTENCE_ENDS = (".", "!", "?", "。", "！", "？", "…", '"', "”", "»", "«", ")")


@dataclass(frozen=True)
class Title:
    """The page's <title>, folded for comparison with its headings."""

    folded: str
    words: frozenset[str]

    @classmethod
    def of(cls, title: str) -> Title:
        folded = _folded(title)
        return cls(folded, frozenset(_WORD.findall(folded)))

    def repeats(self, block: Block, *, line: bool = False) -> bool:
        """A heading (or, with ``line``, a title line) the title already says, word for word or
        nearly (sites add their name, drop a subtitle, or reword a little)."""
        if not (line or block.bits & HEADING):
            return False
        text = _folded(block.text)
        if len(text) < HEADLINE_MIN:
            return False
        if text in self.folded:
            return True
        words = _WORD.findall(text)
        return bool(words) and sum(word in self.words for word in words) >= TITLE_WORDS * len(words)


_WORD = re.compile(r"\w+")


def _folded(text: str) -> str:
    return " ".join(text.split()).casefold()


def without_headline(
    kept: list[int], blocks: list[Block], title: Title, body_start: int, lines: set[int]
) -> list[int]:
    """The headline goes when the title repeats it: the result carries the title beside the text.
    It is the first heading (or title line, in ``lines``), or one above the body (under a dateline
    or a print header)."""
    for position, index in enumerate(kept):
        block = blocks[index]
        headline = index in lines
        if not (headline or block.bits & HEADING):
            if index >= body_start:
                break
            continue
        if title.repeats(block, line=headline):
            return kept[:position] + kept[position + 1 :]
    return kept


def header(blocks: list[Block], weights: list[float], start: int) -> list[int]:
    """The article's own blocks just before the container: prose that runs into it (a standfirst,
    a lead set apart) and the headings above, up to the headline, over a byline, a date or a
    picture in between, which stay out. With no heading above it, the nearest title line (a line
    set in bold or in a part named for a title: a report's name over its text) tops it."""
    taken: list[int] = []
    line = None
    gap = 0
    index = start - 1
    while index >= 0 and gap < HEADER_GAP:
        block = blocks[index]
        if block.bits & FURNITURE or block.link_chars > len(block.text) * LINK_DENSE:
            break
        heading = bool(block.bits & HEADING)
        if heading or (weights[index] > 0 and gap == 0):
            taken.append(index)
            gap = 0
            if heading and weights[index] <= 0:
                break  # a short headline tops the article
        else:
            if line is None and title_line(block):
                line = index
            gap += 1
        index -= 1
    if line is not None and not any(blocks[index].bits & HEADING for index in taken):
        taken.append(line)
    return sorted(taken)


def title_line(block: Block) -> bool:
    """A line that reads as a title: short, one line, no full stop, set in bold or in a part
    named for a title, and no link, list, table, caption or part named like furniture."""
    text = block.text
    return (
        bool(block.bits & (EMPHASIS | TITLE_HINT))
        and HEADLINE_MIN <= len(text) <= TITLE_LINE_MAX
        and "\n" not in text
        and not block.bits & (LINK | LIST | TABLE | PRE | FIGURE | DISCARD_HINT | BOILERPLATE_HINT)
        and block.kind != "figcaption"
        and not text.endswith(TITLE_LINE_ENDS)
    )


def without_orphans(
    kept: list[int], blocks: list[Block], weights: list[float], end: int, containers: list[Container]
) -> list[int]:
    """Drop headings and short labels whose own content was dropped: "More on this", "Related
    links", "About the author" over a list of links or a byline, and the labels over those. Above
    the first paragraph the headline and standfirst stand over a dropped byline and stay; a
    picture between a heading and its text does not orphan it."""
    first_prose = next((index for index in kept if weights[index] > 0), end)
    survivors: set[int] = set()
    scopes = _Scopes(containers)
    for index in reversed(kept):
        block = blocks[index]
        if index > first_prose and a_label(block):
            if not block.bits & HEADING:
                following = index + 1
                while following < end and illustration(blocks[following]):
                    following += 1
                if following < end and following not in survivors:
                    continue
            elif not _heads_something(index, blocks, weights, survivors, min(end, scopes.end(block, index))):
                continue
        survivors.add(index)
    return [index for index in kept if index in survivors]


class _Scopes:
    """The element a heading heads: the smallest block-level element around it that holds more
    after it (a heading in a title wrapper heads what the wrapper's parent holds; one at the end of
    its element heads what follows the element), or the parent of its <header> (a card's title
    over its print button heads the card)."""

    def __init__(self, containers: list[Container]) -> None:
        self._by_id = {container.id: container for container in containers}

    def end(self, block: Block, index: int) -> int:
        container = self._by_id.get(block.parent)
        for _ in range(SCOPE_WALK):
            if container is None:
                break
            if container.end > index + 1 and container.name not in ("header", "hgroup"):
                return container.end
            container = self._by_id.get(container.parent)
        return index + 1


def _heads_something(
    index: int, blocks: list[Block], weights: list[float], survivors: set[int], end: int
) -> bool:
    """Whether something a heading heads survives, before ``end`` (the end of its element) and
    before a heading of its level or above: the next block, or one after up to ORPHAN_SKIP
    dropped ones (a print button, a lone link, a label over it), pictures aside. A list that went
    ("Related", "More on this") leaves it heading nothing."""
    level = _level(blocks[index])
    skipped = 0
    for following in range(index + 1, min(end, index + 1 + HEADS_SCAN)):
        block = blocks[following]
        if illustration(block):
            continue
        if following in survivors:
            # Over a dropped button or link, only the heading's own text counts: prose, a
            # sentence, a subheading.
            if skipped == 0:
                return True
            if block.bits & HEADING:
                return _level(block) > level
            return weights[following] > 0 or (not block.bits & (LIST | TABLE) and a_sentence(block))
        # A dropped heading takes what follows it along; a dropped list leaves nothing.
        if skipped == ORPHAN_SKIP or block.bits & (HEADING | LIST):
            return False
        skipped += 1
    return skipped == 0


def _level(block: Block) -> int:
    """A heading's level, 1 to 6 (a block that is no h1..h6 is read as the lowest)."""
    kind = block.kind
    return int(kind[1]) if len(kind) == 2 and kind[0] == "h" and kind[1] in "123456" else 6


def a_label(block: Block) -> bool:
    text = block.text.rstrip()
    if len(text) >= LONG:
        return False
    if block.bits & HEADING:
        return True
    # A short cell, list item or line of code is content of its own, sentence or not.
    return not block.bits & (TABLE | PRE | LIST) and not text.endswith(SENTENCE_ENDS)


def illustration(block: Block) -> bool:
    return block.kind == "figcaption" or bool(block.bits & FIGURE)


def a_sentence(block: Block) -> bool:
    if block.bits & (TABLE | PRE | LIST):
        return True  # a closing table, code sample or list is content, sentence or not
    text = block.text.rstrip()
    return not block.bits & HEADING and len(text) >= 25 and text.endswith(SENTENCE_ENDS)
