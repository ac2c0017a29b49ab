"""No URL password in any message: configuration errors, the command line's lines, log lines."""

from __future__ import annotations

import io
import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worker import logs
from worker.cli import main
from worker.config import ConfigError, Settings
from worker.config.values import LogFormat
from worker.logs import fields
from worker.redact import redact_url, redact_urls

# What a password in a URL may hold without ending the authority (an "@" included: the last one
# ends the userinfo). It starts with a marker no message would hold by chance.
PASSWORD = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:@%",
    min_size=1,
    max_size=30,
).map(lambda tail: f"Pw9{tail}")
USER = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-._", max_size=12)

# Spellings of each URL variable that are refused, each with a password in it.
REFUSED = {
    "SEARXNG_URL": [
        "ftp://{u}:{p}@search.example",
        "https://{u}:{p}@",
        "gopher://{u}:{p}@h:1/x",
        "{u}:{p}@host",
    ],
    "OPENROUTER_BASE_URL": ["ftp://{u}:{p}@openrouter.ai/api/v1", "https://{u}:{p}@", "HTTPX://{u}:{p}@h"],
    "RESEARCH_HTTP_REFERER": ["ws://{u}:{p}@example.org/", "https://{u}:{p}@"],
    "REDIS_URL": [
        "redis://{u}:{p}@localhost:notaport",
        "http://{u}:{p}@localhost:6379",
        "redis://{u}:{p}@h/db",
    ],
}
CASES = [(variable, shape) for variable, shapes in REFUSED.items() for shape in shapes]


@settings(max_examples=150, deadline=None)
@given(case=st.sampled_from(CASES), user=USER, password=PASSWORD)
def test_a_refused_url_setting_never_shows_its_password(
    case: tuple[str, str], user: str, password: str
) -> None:
    variable, shape = case
    raw = shape.format(u=user, p=password)
    shown = ""
    try:
        Settings.from_env({variable: raw})
    except ConfigError as exc:
        shown = f"{exc}\n{exc!r}"
    assert not shown or shown.startswith(f"{variable}: ")
    assert password not in shown
    # A spelling that happens to be accepted shows nothing: there is no message.


@pytest.mark.parametrize(("variable", "shape"), CASES)
def test_the_command_line_prints_no_url_password(
    variable: str, shape: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    password = "Pw9-hunter2"
    monkeypatch.setenv(variable, shape.format(u="ops", p=password))
    assert main(["tools"]) == 2
    err = capsys.readouterr().err
    assert "configuration error" in err and variable in err
    assert password not in err


@settings(max_examples=200, deadline=None)
@given(
    before=st.text(max_size=20),
    scheme=st.sampled_from(["http", "https", "redis", "rediss", "HTTPS", "redis+sentinel", "x-y.z"]),
    user=USER,
    password=PASSWORD,
    rest=st.sampled_from(["host", "host:99", "[::1]:5", "h/p?q=1#f", "h:notaport/x"]),
    after=st.text(max_size=20),
)
def test_redact_urls_removes_every_password_from_any_text(
    before: str, scheme: str, user: str, password: str, rest: str, after: str
) -> None:
    text = f"{before} '{scheme}://{user}:{password}@{rest}' {after}"
    shown = redact_urls(text)
    assert password not in shown
    assert f"{user}:***@" in shown
    assert shown.endswith(f" {after}") and shown.startswith(f"{before} '")


def test_a_url_without_a_password_is_left_as_it_is() -> None:
    for text in ("https://example.org/a@b", "mail me@example.org", "redis://user@host:1/0", "no urls"):
        assert redact_urls(text) == text
    assert redact_url("https://u:p@h:notaport/x") == "https://u:***@h:notaport/x"


def test_log_lines_never_carry_a_url_password() -> None:
    for log_format in LogFormat:
        out = io.StringIO()
        logs.configure("INFO", log_format, stream=out, logger_name="research.test-redaction")
        logger = logging.getLogger("research.test-redaction")
        logger.warning(
            "could not reach https://ops:Pw9-secret@search.example/",
            extra=fields(url="redis://:Pw9-other@cache:6379/0"),
        )
        line = out.getvalue()
        assert "Pw9-secret" not in line and "Pw9-other" not in line
        assert "***" in line
