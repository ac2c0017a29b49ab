"""Hostile pages of about 2 MiB, generated on demand (never stored): each aims at one way a pure
Python tokenizer can be made to spin. Used by the tests and by bench/loop_lag.py."""

from __future__ import annotations

from collections.abc import Callable

SIZE = 2 * 1024 * 1024


def _fill(unit: str, size: int = SIZE, prefix: str = "", suffix: str = "") -> bytes:
    body = unit * max(1, (size - len(prefix) - len(suffix)) // len(unit))
    return (prefix + body + suffix).encode()


def all_tags(size: int = SIZE) -> bytes:
    """Nothing but start tags: one token, one stack push, per three bytes."""
    return _fill("<b>", size)


def deep_nesting(size: int = SIZE) -> bytes:
    """Divs nested 400,000 deep: quadratic for a tree builder, linear here."""
    return _fill("<div>", size, suffix="deep")


def inline_nesting_with_stray_end_tags(size: int = SIZE) -> bytes:
    """Inline elements nested deep, then end tags that match nothing: each would walk the stack."""
    half = size // 2
    return _fill("<span>", half) + _fill("</i>", size - half)


def huge_attribute(size: int = SIZE) -> bytes:
    return _fill("x", size, prefix='<p title="', suffix='">text</p>')


def many_attributes(size: int = SIZE) -> bytes:
    """One tag with 200,000 attributes: html5lib's duplicate check is quadratic in their number."""
    return _fill(" a", size, prefix="<p", suffix=">text</p>")


def long_attribute_name(size: int = SIZE) -> bytes:
    return _fill("a-", size, prefix="<p ", suffix="=1>text</p>")


def entity_flood(size: int = SIZE) -> bytes:
    """Character references: each is a separate trip through the entity code and a text token."""
    return _fill("&amp;&#x41;&lt;", size, prefix="<p>")


def entity_flood_in_attribute(size: int = SIZE) -> bytes:
    """References inside one attribute value: html5lib grows the value by += per reference."""
    return _fill("&amp;", size, prefix='<a href="', suffix='">x</a>')


def dashes_in_one_comment(size: int = SIZE) -> bytes:
    """Megabytes inside one comment, dash after dash: every dash is a state change."""
    return _fill("-a", size, prefix="<p>before</p><!--", suffix="--><p>after</p>")


def text_in_one_comment(size: int = SIZE) -> bytes:
    return _fill("comment text ", size, prefix="<p>before</p><!--", suffix="--><p>after</p>")


def escaped_script(size: int = SIZE) -> bytes:
    """A script full of "<!--" and "<script": the escaped states, character by character."""
    return _fill("<!--<script>x</script>-->", size, prefix="<script>", suffix="</script><p>after</p>")


def many_small_text_nodes(size: int = SIZE) -> bytes:
    return _fill("a<i>b</i>", size)


def table_cells(size: int = SIZE) -> bytes:
    return _fill("<td>c", size, prefix="<table><tr>")


def link_flood(size: int = SIZE) -> bytes:
    """Hundreds of thousands of distinct links: the harvest must stop at its bound."""
    parts = ["<p>"]
    total = 3
    index = 0
    while total < size:
        link = f'<a href="/page/{index}">{index}</a> '
        parts.append(link)
        total += len(link)
        index += 1
    return "".join(parts).encode()


def hidden_everything(size: int = SIZE) -> bytes:
    return _fill("<span hidden>secret </span>", size)


def foreign_content(size: int = SIZE) -> bytes:
    return _fill("<svg><foreignObject><math><mi><svg><g>", size)


PAGES: dict[str, Callable[[int], bytes]] = {
    "all tags": all_tags,
    "deep nesting": deep_nesting,
    "inline nesting, stray end tags": inline_nesting_with_stray_end_tags,
    "huge attribute": huge_attribute,
    "many attributes": many_attributes,
    "long attribute name": long_attribute_name,
    "entity flood": entity_flood,
    "entity flood in an attribute": entity_flood_in_attribute,
    "dashes in one comment": dashes_in_one_comment,
    "text in one comment": text_in_one_comment,
    "escaped script": escaped_script,
    "many small text nodes": many_small_text_nodes,
    "table cells": table_cells,
    "link flood": link_flood,
    "hidden everything": hidden_everything,
    "foreign content": foreign_content,
}
