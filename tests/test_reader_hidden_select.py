"""A hidden <select> shows none of its options: drop-down or list box, however it is hidden, every
option's text is dropped and counted in hidden_removed (issue 24, class 4)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from jobs.reader.html.reduce import reduce_all
from jobs.reader.main_content import join_blocks

# Every way the select element itself can be hidden, in the spellings a page may use.
HIDINGS = st.sampled_from(
    [
        "hidden",
        "hidden=hidden",
        'hidden=""',
        'style="display:none"',
        'style="DISPLAY : NONE !important"',
        'style="color: red; display: none;"',
        'style="visibility:hidden"',
        'style="Visibility: Hidden"',
        'style="visibility: collapse"',
        'class="sr-only"',
        'class="form visually-hidden"',
    ]
)
# Drop-down and list box: a hidden list box would otherwise show every option.
SHAPES = st.sampled_from(["", "multiple", "size=4", "size=1"])
WORDS = st.lists(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=3, max_size=12), min_size=1, max_size=6
)


def options_html(words: list[str], selected: int | None) -> str:
    return "".join(
        f"<option{' selected' if index == selected else ''}>{word}</option>"
        for index, word in enumerate(words)
    )


@given(hiding=HIDINGS, shape=SHAPES, words=WORDS, selected=st.none() | st.integers(0, 5))
def test_no_option_of_a_hidden_select_is_shown_and_every_one_is_counted(
    hiding: str, shape: str, words: list[str], selected: int | None
) -> None:
    html = f"<p>before</p><select {shape} {hiding}>{options_html(words, selected)}</select><p>after</p>"
    reduction = reduce_all(html)
    assert join_blocks(reduction.blocks) == "before\nafter"
    assert reduction.hidden_removed == sum(len(word) for word in words)


@given(shape=SHAPES, words=WORDS)
def test_a_shown_select_is_unchanged_by_the_rule(shape: str, words: list[str]) -> None:
    # The control: the same select, not hidden, shows its options (a list box all, a drop-down one)
    # and counts nothing, so the first test cannot pass by dropping every select.
    reduction = reduce_all(f"<p>before</p><select {shape}>{options_html(words, None)}</select><p>after</p>")
    text = join_blocks(reduction.blocks)
    assert reduction.hidden_removed == 0
    assert words[0] in text
    list_box = shape in ("multiple", "size=4")
    assert all(word in text for word in words) or not list_box


@given(hiding=HIDINGS, words=WORDS)
def test_the_page_after_a_hidden_select_is_read(hiding: str, words: list[str]) -> None:
    # Hiding ends with the select: an unclosed one is ended by the next select, as browsers parse it.
    html = f"<select {hiding}>{options_html(words, None)}<select><option>shown</option></select><p>after"
    text = join_blocks(reduce_all(html).blocks)
    assert "shown" in text and "after" in text
    assert not any(word in text.split() for word in words if word not in ("shown", "after"))
