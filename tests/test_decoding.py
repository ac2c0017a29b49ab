"""Content-Encoding as browsers read it: every layer undone, trailing bytes ignored, always bounded."""

from __future__ import annotations

import gzip
import itertools
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.decoding import Decoder, codings
from worker.errors import UnsupportedContentType


def deflate_raw(data: bytes) -> bytes:
    compressor = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return compressor.compress(data) + compressor.flush()


ENCODERS = {"gzip": gzip.compress, "x-gzip": gzip.compress, "deflate": zlib.compress}


def decode_all(decoder: Decoder, chunks: list[bytes], step: int = 4096) -> bytes:
    out = bytearray()
    for chunk in chunks:
        decoder.feed(chunk)
        while piece := decoder.read(step):
            assert len(piece) <= step
            out += piece
    while piece := decoder.read(step):
        out += piece
    return bytes(out)


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


@given(
    body=st.binary(max_size=3000),
    layers=st.lists(st.sampled_from(sorted(ENCODERS)), max_size=3),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=6),
    step=st.integers(min_value=1, max_value=5000),
)
@settings(max_examples=200, deadline=None)
def test_any_stack_of_codings_in_any_chunking_decodes_to_the_original(
    body: bytes, layers: list[str], cuts: list[int], step: int
) -> None:
    encoded = body
    for name in layers:
        encoded = ENCODERS[name](encoded)
    decoded = decode_all(Decoder(", ".join(layers) or None), split(encoded, cuts), step)
    assert decoded == body


def test_gzip_applied_twice_is_undone_twice() -> None:
    assert decode_all(Decoder("gzip, gzip"), [gzip.compress(gzip.compress(b"words"))]) == b"words"


def test_x_gzip_is_gzip() -> None:
    assert decode_all(Decoder("x-gzip"), [gzip.compress(b"words")]) == b"words"


def test_bytes_after_the_end_of_a_gzip_stream_are_ignored() -> None:
    assert decode_all(Decoder("gzip"), [gzip.compress(b"words") + b"trailing junk\r\n"]) == b"words"


def test_concatenated_gzip_members_are_read_on() -> None:
    assert decode_all(Decoder("gzip"), [gzip.compress(b"one ") + gzip.compress(b"two")]) == b"one two"


def test_deflate_is_read_zlib_wrapped_or_raw() -> None:
    assert decode_all(Decoder("deflate"), [zlib.compress(b"wrapped")]) == b"wrapped"
    assert decode_all(Decoder("deflate"), [deflate_raw(b"raw")]) == b"raw"


@pytest.mark.parametrize("header", [None, "", "identity", "Identity, identity"])
def test_no_coding_or_identity_passes_bytes_through(header: str | None) -> None:
    assert decode_all(Decoder(header), [b"plain ", b"bytes"]) == b"plain bytes"


@pytest.mark.parametrize("header", ["br", "zstd", "compress", "gzip, br", "x-made-up"])
def test_a_coding_the_worker_does_not_decode_is_refused_by_name(header: str) -> None:
    with pytest.raises(UnsupportedContentType, match="encoded with"):
        codings(header)


@given(st.text(max_size=60))
def test_an_unreadable_coding_name_is_never_quoted(header: str) -> None:
    marker = "IGNOREPREVIOUS"
    message = ""
    try:
        codings(f"gzip, {marker}{header}")
    except UnsupportedContentType as refusal:
        message = refusal.message
    assert marker.lower() not in message.lower()


def test_a_bomb_under_two_layers_yields_no_more_than_asked() -> None:
    bomb = gzip.compress(gzip.compress(b"a" * 50_000_000, compresslevel=9), compresslevel=9)
    decoder = Decoder("gzip, gzip")
    decoder.feed(bomb)
    total = 0
    for _ in range(10):
        piece = decoder.read(65_536)
        assert len(piece) <= 65_536
        total += len(piece)
    assert total == 10 * 65_536


def test_a_body_that_is_not_what_its_coding_says_raises_zlib_error() -> None:
    decoder = Decoder("gzip")
    decoder.feed(b"this is not gzip at all")
    with pytest.raises(zlib.error):
        decoder.read(100)
