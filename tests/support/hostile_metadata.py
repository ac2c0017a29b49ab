"""The hostile JSON-LD family: what a page might put in a script to crash or stall a metadata
reader. Shared by tests/test_metadata_hostile.py and bench/metadata.py (which times it)."""

from __future__ import annotations

import orjson

ARTICLE = '{"@type": "Article", "headline": "Found", "author": {"name": "Jane Doe"}}'
MIB = 1024 * 1024


def ld(text: str) -> str:
    return f'<script type="application/ld+json">{text}</script>'


def deep_list(depth: int) -> str:
    return "[" * depth + "]" * depth


def deep_object(depth: int, inner: str = "1") -> str:
    return '{"a":' * depth + inner + "}" * depth


HOSTILE_SCRIPTS = {
    "two MiB of JSON-LD": '{"@type": "Article", "headline": "Big", "description": "' + "x" * (2 * MIB) + '"}',
    "an array nested 10,000 deep": deep_list(10_000),
    "an object nested 10,000 deep": deep_object(10_000),
    "an article under 1,000 levels of objects": deep_object(1_000, ARTICLE),
    "10,000 graph entries before the article": orjson.dumps(
        {"@graph": [{"@type": "Thing", "name": str(n)} for n in range(10_000)] + [orjson.loads(ARTICLE)]}
    ).decode(),
    # Just under the 128 KiB a script may have: the largest single orjson call a page can cause.
    "a graph of 3,500 small objects, under the bound": orjson.dumps(
        {"@graph": [{"@type": "Thing", "name": str(n)} for n in range(3_500)] + [orjson.loads(ARTICLE)]}
    ).decode(),
    "not JSON": "{headline: 'Found', <p>not json</p>",
    "HTML inside": "<p>Found</p>",
    "an unclosed string": '{"@type": "Article", "headline": "Found',
    "half a million comment openers": "\n/*" * 170_000,
    "half a million blank lines": "\n" * 500_000 + "{",
    "a number": "12345",
    "null": "null",
    "an empty script": "",
    "types that are not strings": '{"@type": [1, {"a": 2}, null], "headline": {"x": 1}, "author": 7}',
    "dates that are not dates": '{"@type": "Article", "datePublished": "99999-01-01", '
    '"dateModified": "0000-00-00"}',
    "a self-reference": '{"@type": "Article", "@id": "#a", "author": {"@id": "#a"}, '
    '"publisher": {"@id": "#a"}}',
}
