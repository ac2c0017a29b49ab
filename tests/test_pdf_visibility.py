"""The rules for PDF text a reader would not see, judged on boxes, colours, modes and sizes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from jobs.reader.pdf.visibility import (
    BARE_PAGE,
    MIN_READABLE_PT,
    NEAR_WHITE,
    Beneath,
    Box,
    Hidden,
    TextLook,
    judge,
    placement,
)

PAGE = Box(0, 0, 612, 792)
BLACK = (0, 0, 0, 255)
WHITE = (255, 255, 255, 255)
INSIDE = Box(72, 700, 200, 712)


def look(
    box: Box = INSIDE, mode: int = 0, fill: tuple[int, int, int, int] = BLACK, size: float = 12.0
) -> TextLook:
    return TextLook(box, mode, fill, BLACK, size)


DARK_FILL = Beneath((40, 40, 40, 255), drawn=True)


def verdict(text: TextLook, *, image_shows: bool = False, beneath: Beneath = BARE_PAGE) -> Hidden | None:
    return judge(text, PAGE, image_shows=lambda: image_shows, beneath=lambda: beneath)


def test_ordinary_black_text_on_the_page_is_seen() -> None:
    assert verdict(look()) is None


@given(
    st.one_of(
        st.builds(lambda x, y: Box(x, y, x + 50, y + 10), st.floats(612.01, 1e6), st.floats(-1e6, 1e6)),
        st.builds(lambda x, y: Box(x - 50, y, x, y + 10), st.floats(-1e6, -0.01), st.floats(-1e6, 1e6)),
        st.builds(lambda x, y: Box(x, y, x + 50, y + 10), st.floats(-1e6, 1e6), st.floats(792.01, 1e6)),
        st.builds(lambda x, y: Box(x, y - 10, x + 50, y), st.floats(-1e6, 1e6), st.floats(-1e6, -0.01)),
    )
)
def test_text_wholly_off_the_page_is_hidden_wherever_it_is_put(box: Box) -> None:
    assert verdict(look(box)) is Hidden.OFF_PAGE


def test_text_across_the_page_edge_is_left_to_a_character_by_character_judgement() -> None:
    straddling = Box(600, 700, 650, 712)
    assert placement(straddling, PAGE) is None
    assert verdict(look(straddling)) is None


@given(st.sampled_from([3, 7]))
def test_invisible_render_modes_hide_text_unless_an_image_is_there_to_carry_it(mode: int) -> None:
    assert verdict(look(mode=mode)) is Hidden.INVISIBLE
    assert verdict(look(mode=mode), image_shows=True) is None


@given(st.integers(0, 25))
def test_fully_transparent_text_is_invisible_like_render_mode_3(alpha: int) -> None:
    assert verdict(look(fill=(0, 0, 0, alpha))) is Hidden.INVISIBLE


@given(st.floats(0, MIN_READABLE_PT, exclude_max=True))
def test_text_under_two_points_is_too_small_to_read(size: float) -> None:
    assert verdict(look(size=size)) is Hidden.TOO_SMALL


@given(st.floats(MIN_READABLE_PT, 500))
def test_text_of_two_points_and_more_is_readable(size: float) -> None:
    assert verdict(look(size=size)) is None


near_white = st.tuples(
    st.integers(255 - NEAR_WHITE, 255), st.integers(255 - NEAR_WHITE, 255), st.integers(255 - NEAR_WHITE, 255)
).map(lambda rgb: (*rgb, 255))


@given(near_white)
def test_near_white_text_on_nothing_is_hidden_and_on_a_dark_fill_is_seen(
    color: tuple[int, int, int, int],
) -> None:
    assert verdict(look(fill=color)) is Hidden.WHITE_ON_NOTHING
    assert verdict(look(fill=color), beneath=DARK_FILL) is None


@given(st.tuples(st.integers(0, 255), st.integers(0, 255), st.integers(0, 255)))
def test_text_with_any_channel_darker_than_near_white_is_seen_on_a_white_page(
    rgb: tuple[int, int, int],
) -> None:
    color = (*rgb, 255)
    hidden = verdict(look(fill=color))
    assert (hidden is Hidden.WHITE_ON_NOTHING) == (min(rgb) >= 255 - NEAR_WHITE)


def test_stroked_text_is_judged_by_its_stroke_colour() -> None:
    white_stroke = TextLook(INSIDE, 1, BLACK, WHITE, 12.0)
    assert verdict(white_stroke) is Hidden.WHITE_ON_NOTHING
    black_stroke = TextLook(INSIDE, 1, WHITE, BLACK, 12.0)
    assert verdict(black_stroke) is None


def test_only_invisible_text_is_asked_about_images_and_only_readable_painted_text_about_what_is_beneath() -> (
    None
):
    asked: list[str] = []

    def images() -> bool:
        asked.append("images")
        return False

    def beneath() -> Beneath:
        asked.append("beneath")
        return BARE_PAGE

    for text in (look(), look(mode=3), look(fill=WHITE), look(size=1), look(Box(700, 700, 750, 712))):
        judge(text, PAGE, image_shows=images, beneath=beneath)
    assert asked == ["beneath", "images", "beneath"]
