"""The pipe protocol between the worker and a PDF child: frames, and replies read as untrusted."""

from __future__ import annotations

import os
from dataclasses import asdict

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobs.reader.pdf.wire import (
    MAX_REPLY_BYTES,
    REPLY_HEAD,
    Reading,
    Refusal,
    Request,
    WireError,
    parse_reply,
    read_request,
    reply_frame,
    reply_length,
)

READING = Reading(
    pages=3,
    pages_read=2,
    title="T",
    texts=["one", "two"],
    uris=[["https://example.org/"], []],
    hidden_removed=4,
    characters=12,
    images=1,
    complete=True,
    unreadable_pages=0,
)


def through_a_pipe(data: bytes) -> int:
    read_end, write_end = os.pipe()
    os.write(write_end, data)
    os.close(write_end)
    return read_end


def test_a_request_crosses_the_pipe_whole() -> None:
    request = Request(b"%PDF-1.7 body \x00\xff", max_chars=40_000, cpu_budget_s=3.0, cpu_limit_s=7.0)
    fd = through_a_pipe(request.frame())
    try:
        assert read_request(fd) == request
        assert read_request(fd) is None  # the worker closed the pipe: the child's signal to stop
    finally:
        os.close(fd)


def test_a_request_cut_short_is_a_wire_error() -> None:
    frame = Request(b"x" * 100, 10, 1.0, 2.0).frame()
    fd = through_a_pipe(frame[:-10])
    try:
        with pytest.raises(WireError):
            read_request(fd)
    finally:
        os.close(fd)


@pytest.mark.parametrize("reply", [READING, *Refusal])
def test_replies_survive_the_round_trip(reply: Reading | Refusal) -> None:
    frame = reply_frame(reply)
    length = reply_length(frame[: REPLY_HEAD.size])
    assert parse_reply(frame[REPLY_HEAD.size : REPLY_HEAD.size + length]) == reply


def test_a_reply_longer_than_the_bound_is_refused_before_it_is_read() -> None:
    with pytest.raises(WireError):
        reply_length(REPLY_HEAD.pack(MAX_REPLY_BYTES + 1))


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=20,
)


@given(json_values)
def test_any_json_a_child_could_write_is_a_reading_a_refusal_or_a_wire_error(value: object) -> None:
    try:
        parsed = parse_reply(orjson.dumps(value))
    except WireError:
        return
    assert isinstance(parsed, (Reading, Refusal))


@given(st.sampled_from(sorted(asdict(READING))), json_values)
def test_a_reading_with_any_one_field_of_the_wrong_shape_is_a_wire_error(name: str, value: object) -> None:
    fields = asdict(READING)
    fields[name] = value
    try:
        parsed = parse_reply(orjson.dumps({"reading": fields}))
    except WireError:
        return
    # Accepted only when the value happens to have the right shape.
    assert isinstance(parsed, Reading)
    assert isinstance(getattr(parsed, name), type(getattr(READING, name)))


@given(st.binary(max_size=200))
def test_any_bytes_are_a_reply_or_a_wire_error_never_another_exception(data: bytes) -> None:
    try:
        parsed = parse_reply(data)
    except WireError:
        return
    assert isinstance(parsed, (Reading, Refusal))
