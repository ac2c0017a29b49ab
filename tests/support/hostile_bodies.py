"""Hostile bodies of about 2 MiB aimed at the steps around the reducer (decoding, invisible
characters), generated on demand (never stored) and served as every text type. Used by the tests
and by bench/loop_lag.py, beside the HTML pages of hostile_pages."""

from __future__ import annotations

from collections.abc import Callable

from tests.support.hostile_pages import SIZE


def _repeat(unit: str, size: int, encoding: str = "utf-8") -> bytes:
    encoded = unit.encode(encoding)
    return encoded * max(1, size // len(encoded))


def letters_and_joiners(size: int = SIZE) -> bytes:
    """A zero-width joiner after every letter: each one must be judged by its neighbours."""
    return _repeat("a\u200d", size)


def accented_letters_and_joiners(size: int = SIZE) -> bytes:
    """The same with non-ASCII letters, where a joiner may be spelling: the costliest to judge."""
    return _repeat("é\u200d", size)


def zero_width_spaces(size: int = SIZE) -> bytes:
    return _repeat("w\u200b", size)


def undeclared_legacy_bytes(size: int = SIZE) -> bytes:
    """Every byte from 0x80 up, over and over: not UTF-8, so the decoder's every step runs."""
    return (bytes(range(0x80, 0x100)) * (size // 128 + 1))[:size]


def undeclared_shift_jis(size: int = SIZE) -> bytes:
    return _repeat("日本語の文章、カタカナとひらがな。", size, "shift_jis")


def unclosed_cdata_in_a_formula(size: int = SIZE) -> bytes:
    """A CDATA section that never ends, in the one place a page can open one: svg or math."""
    return b"<p><math><![CDATA[" + _repeat("x]", size - 18)


BODIES: dict[str, Callable[[int], bytes]] = {
    "letters and zero-width joiners": letters_and_joiners,
    "accented letters and joiners": accented_letters_and_joiners,
    "zero-width spaces": zero_width_spaces,
    "undeclared legacy bytes": undeclared_legacy_bytes,
    "undeclared Shift_JIS": undeclared_shift_jis,
    "unclosed CDATA in a formula": unclosed_cdata_in_a_formula,
}
# Every way a text body reaches the reader: HTML, the other text types, and no declaration at all.
TEXT_TYPES: tuple[str | None, ...] = ("text/html", "application/json", "text/plain", "application/xml", None)
