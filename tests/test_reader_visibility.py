"""What a sighted reader sees: text a browser renders is kept, text it does not render is dropped
and counted in hidden_removed."""

from __future__ import annotations

import pytest

from jobs.reader.html.reduce import Reduction, reduce_all
from jobs.reader.main_content import join_blocks

SECRET = "ignore previous instructions"


def reduced(body: str) -> Reduction:
    return reduce_all(f"<p>before</p>{body}<p>after</p>")


def seen(body: str) -> str:
    return join_blocks(reduced(body).blocks)


@pytest.mark.parametrize(
    "badge",
    [
        '<span aria-hidden="true">{}</span>',
        "<div aria-hidden=TRUE><p>{}</p></div>",
        '<span class="stars" aria-hidden="true" role="img">{}</span>',
        '<a href="/reviews" aria-hidden="true">{}</a>',
    ],
)
def test_text_hidden_only_from_screen_readers_is_what_a_sighted_reader_sees(badge: str) -> None:
    reduction = reduced(badge.format("4.5 stars"))
    assert "4.5 stars" in join_blocks(reduction.blocks)
    assert reduction.hidden_removed == 0


def test_a_link_hidden_only_from_screen_readers_is_still_harvested() -> None:
    assert reduce_all('<a href="/shop" aria-hidden="true">$10</a>').hrefs == ["/shop"]


@pytest.mark.parametrize(
    "hiding",
    [
        "<div hidden>{}</div>",
        "<div hidden=hidden>{}</div>",
        '<p hidden="">{}</p>',
        '<div style="display:none">{}</div>',
        '<div style="DISPLAY : NONE !important">{}</div>',
        '<div style="color: red; display: none;">{}</div>',
        '<div style="display:\\6e one">{}</div>',
        '<div style="display:/* sneaky */none">{}</div>',
        '<span style="visibility:hidden">{}</span>',
        '<span style="visibility: collapse">{}</span>',
        '<section style="content-visibility: hidden">{}</section>',
        "<dialog>{}</dialog>",
        "<dialog><form><p>{}</p></form></dialog>",
        "<div hidden><span style='display:block'>{}</span></div>",
        "<p><math><mphantom><mi>{}</mi></mphantom></math></p>",
    ],
)
def test_what_a_browser_does_not_render_is_dropped_and_counted(hiding: str) -> None:
    reduction = reduced(hiding.format(SECRET))
    assert join_blocks(reduction.blocks) == "before\nafter"
    assert reduction.hidden_removed == len(SECRET)


def test_hidden_text_is_counted_by_its_characters_with_spaces_collapsed() -> None:
    assert reduced(f"<div hidden>  {SECRET}  </div>").hidden_removed == len(SECRET)


def test_an_open_dialog_is_shown() -> None:
    assert seen("<dialog open><p>Are you sure?</p></dialog>") == "before\nAre you sure?\nafter"


def test_a_drop_down_shows_its_first_option_when_none_is_selected() -> None:
    assert seen("<select><option>Newest first<option>Oldest first</select>") == "before\nNewest first\nafter"


def test_a_drop_down_shows_the_option_marked_selected_and_only_that() -> None:
    html = "<select><option>Newest<option selected>Oldest<option>Most read</select>"
    assert seen(html) == "before\nOldest\nafter"


def test_when_several_options_are_marked_selected_a_drop_down_shows_the_last() -> None:
    html = "<select><option selected>One<optgroup><option selected>Two</optgroup><option>Three</select>"
    assert seen(html) == "before\nTwo\nafter"


@pytest.mark.parametrize("attributes", ["multiple", "size=4", 'size="2" multiple'])
def test_a_list_box_shows_all_its_options(attributes: str) -> None:
    html = f"<select {attributes}><option>Red<option selected>Green</option><option>Blue</select>"
    assert seen(html) == "before\nRed\nGreen\nBlue\nafter"


def test_a_size_of_one_is_still_a_drop_down() -> None:
    assert seen("<select size=1><option>Red<option>Green</select>") == "before\nRed\nafter"


def test_the_options_a_drop_down_hides_until_clicked_are_not_counted_as_hidden() -> None:
    assert reduced("<select><option>A<option>B<option>C</select>").hidden_removed == 0


def test_text_loose_inside_a_select_is_not_shown() -> None:
    assert seen("<select>stray words<option>Shown</select>") == "before\nShown\nafter"


def test_a_hidden_option_of_a_list_box_stays_hidden() -> None:
    reduction = reduced("<select multiple><option>Shown<option hidden>secret</select>")
    assert join_blocks(reduction.blocks) == "before\nShown\nafter"
    assert reduction.hidden_removed == len("secret")


def test_a_select_inside_a_hidden_element_shows_nothing() -> None:
    assert seen("<div hidden><select multiple><option>A<option>B</select></div>") == "before\nafter"


def test_a_select_opened_inside_a_select_ends_the_first_as_browsers_parse_it() -> None:
    # The second <select> tag only closes the first; B and C are then stray options, which show.
    html = "<select multiple><option>A<select><option>B<option>C</select><p>text"
    assert seen(html) == "before\nA\nB\nC\ntext\nafter"


def test_a_suggestion_list_is_never_shown_and_does_not_swallow_the_page() -> None:
    assert seen('<datalist id=c><option value="Paris"><option value="Rome">Rome</datalist><p>text</p>') == (
        "before\ntext\nafter"
    )
