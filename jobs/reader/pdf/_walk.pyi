# The C page walk (_walk.c); jobs/reader/pdf/native.py binds it and says what it returns.
MAX_BENEATH: int
NEAR_WHITE: int
MIN_VISIBLE_ALPHA: int
MIN_READABLE_PT: float

_Matrix = tuple[float, float, float, float, float, float]
_Rgba = tuple[int, int, int, int]

def bind(addresses: tuple[int, ...], /) -> None: ...
def walk(
    page: int, visible_box: tuple[float, float, float, float], max_objects: int, max_depth: int, /
) -> tuple[
    int,
    list[tuple[int, int, _Matrix | None]],
    list[tuple[int, tuple[float, float, float, float], bool, _Rgba | None, int, _Matrix | None]],
]: ...
def links(page: int, document: int, max_count: int, max_bytes: int, /) -> list[str]: ...
