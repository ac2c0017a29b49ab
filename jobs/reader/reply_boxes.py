"""Places to write and prompts to sign in: page furniture that reads like prose.

A reply form comes with a heading and a notice ("Leave a reply", "Your email address will not be
published", "You must be logged in to post a comment"); a forum thread ends in "You must log in or
register to reply here". Their sentences can outweigh a short article, so main-content selection
reads them as comments:

- a reply box: the largest element around a ``<textarea>`` that holds little text (its heading,
  notice and field labels) and at most one paragraph of prose;
- a sign-in prompt: a short block that links to a sign-in address (``/login``, ``wp-login.php``,
  ``ucp.php?mode=login``...): URLs say "login" in every language the page is written in.

Neither is marked when it holds all of the page's prose: a contact page's form and its intro are
that page's content.
"""

from __future__ import annotations

import re
from dataclasses import replace

from jobs.reader.html.blocks import Block, Container
from jobs.reader.html.vocabulary import COMMENTS
from jobs.reader.main_edges import FURNITURE, LINK_DENSE, LONG

SIGN_IN = re.compile(r"(?:^|[^a-z])(?:log-?in|sign-?in|log-?on|einloggen|anmelden|connexion)(?:$|[^a-z])")
PROMPT_CHARS = 200  # characters of a sign-in prompt at most: a line or two
BOX_CHARS = 500  # characters of a reply box at most: its heading, notice and field labels
BOX_PROSE = 1  # paragraphs of prose in a reply box at most: its notice
MIN_PROSE_LEFT = 100  # characters of prose the page must hold elsewhere for the marks to stand


def marked(blocks: list[Block], containers: list[Container], hrefs: list[str]) -> list[Block]:
    """The blocks, with those of reply boxes and sign-in prompts marked as comments."""
    chosen = _box_blocks(blocks, containers) | _prompts(blocks, hrefs)
    if not chosen:
        return blocks
    left = sum(len(block.text) for index, block in enumerate(blocks) if index not in chosen and _prose(block))
    if left < MIN_PROSE_LEFT:
        return blocks
    return [
        replace(block, bits=block.bits | COMMENTS) if index in chosen else block
        for index, block in enumerate(blocks)
    ]


def _prose(block: Block) -> bool:
    length = len(block.text)
    return length >= LONG and block.link_chars < LINK_DENSE * length and not block.bits & FURNITURE


def _box_blocks(blocks: list[Block], containers: list[Container]) -> set[int]:
    """The blocks of the largest few-worded elements around each place to write."""
    holding = [container for container in containers if container.boxes]
    if not holding:
        return set()
    chars = [0]
    prose = [0]
    for block in blocks:
        chars.append(chars[-1] + len(block.text))
        prose.append(prose[-1] + _prose(block))
    boxes = [
        container
        for container in holding
        if chars[container.end] - chars[container.start] <= BOX_CHARS
        and prose[container.end] - prose[container.start] <= BOX_PROSE
    ]
    found: set[int] = set()
    reach = 0
    # Outermost first: a box inside a box adds nothing, so each block is added once.
    for container in sorted(boxes, key=lambda box: (box.start, -box.end)):
        if container.end > reach:
            found.update(range(max(container.start, reach), container.end))
            reach = container.end
    return found


def _prompts(blocks: list[Block], hrefs: list[str]) -> set[int]:
    """Short blocks that link to a sign-in address."""
    sign_in = {index for index, href in enumerate(hrefs) if SIGN_IN.search(href.lower())}
    if not sign_in:
        return set()
    return {
        index
        for index, block in enumerate(blocks)
        if block.runs is not None
        and len(block.text) <= PROMPT_CHARS
        and any(link >= 0 and link >> 1 in sign_in for line in block.runs for _, link in line)
    }
