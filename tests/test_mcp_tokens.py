"""The MCP server's tokens file, its settings, and its rate limit.

``RESEARCH_MCP_TOKENS_FILE`` maps the SHA-256 hex of each token to an org id. A file that is not
JSON, not an object, empty, or that holds raw tokens (anything but 64 hex digits) stops
``mcp --http`` at start-up with one line that never shows an entry's key; a file every user can
read is served with a warning.
"""

from __future__ import annotations

import json
import logging
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from tests.support.mcp_http import OTHER_TOKEN, TOKEN, write_tokens
from tests.support.run_cli import run_cli
from worker.config import ConfigError, Settings
from worker.mcp.http import RateLimiter
from worker.mcp.tokens import digest_of, load_tokens

EXAMPLES = hypothesis_settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def write(path: Path, content: str | bytes, mode: int = 0o600) -> str:
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    path.chmod(mode)
    return str(path)


def test_each_token_speaks_for_its_org_and_nothing_else_gets_in(tmp_path: Path) -> None:
    tokens = load_tokens(str(write_tokens(tmp_path / "t.json", {TOKEN: "acme", OTHER_TOKEN: "globex"})))
    first, second = tokens.caller(TOKEN), tokens.caller(OTHER_TOKEN)
    assert first is not None and second is not None
    assert (first.org_id, second.org_id) == ("acme", "globex")
    assert first.digest == digest_of(TOKEN) and first.digest != second.digest
    for stranger in ("", TOKEN + " ", TOKEN.upper(), digest_of(TOKEN), TOKEN[:-1], "\udcff"):
        assert tokens.caller(stranger) is None, stranger


def test_an_upper_case_digest_is_the_same_digest(tmp_path: Path) -> None:
    path = write(tmp_path / "t.json", json.dumps({digest_of(TOKEN).upper(): "acme"}))
    caller = load_tokens(path).caller(TOKEN)
    assert caller is not None and caller.org_id == "acme"


RAW_TOKENS = st.one_of(
    st.text(min_size=1, max_size=80).filter(
        lambda t: not (len(t) == 64 and all(c in string.hexdigits for c in t))
    ),
    st.text(alphabet=string.hexdigits, min_size=63, max_size=63),
    st.text(alphabet=string.hexdigits, min_size=65, max_size=65),
    st.just("sk-live-" + "a" * 56),
)


@EXAMPLES
@given(raw=RAW_TOKENS)
def test_a_file_of_raw_tokens_is_refused_without_showing_the_token(tmp_path: Path, raw: str) -> None:
    path = write(tmp_path / "raw.json", json.dumps({digest_of(TOKEN): "acme", raw: "globex"}))
    with pytest.raises(ConfigError) as refused:
        load_tokens(path)
    # Always the same words: nothing of the entry is shown.
    assert str(refused.value) == (
        "RESEARCH_MCP_TOKENS_FILE: entry 2 is not the SHA-256 hex of a token (64 hex digits); the file "
        "holds hashes, never the tokens themselves"
    )


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("", "is not JSON"),
        ("{", "is not JSON"),
        (b"\xff\xfe{}", "is not JSON"),
        ("[]", "must be a JSON object"),
        ('"a"', "must be a JSON object"),
        ("null", "must be a JSON object"),
        ("{}", "holds no tokens"),
        (json.dumps({digest_of(TOKEN): 5}), "entry 1 has an org id"),
        (json.dumps({digest_of(TOKEN): ""}), "entry 1 has an org id"),
        (json.dumps({digest_of(TOKEN): "has space"}), "entry 1 has an org id"),
        (json.dumps({digest_of(TOKEN): "x" * 201}), "entry 1 has an org id"),
        (json.dumps({digest_of(TOKEN): None}), "entry 1 has an org id"),
        (json.dumps({digest_of(TOKEN): ["acme"]}), "entry 1 has an org id"),
    ],
)
def test_a_malformed_or_empty_file_stops_start_up_naming_what_is_wrong(
    tmp_path: Path, content: str | bytes, says: str
) -> None:
    with pytest.raises(ConfigError, match=says):
        load_tokens(write(tmp_path / "t.json", content))


def test_a_missing_file_or_no_file_at_all_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_tokens(str(tmp_path / "absent.json"))
    with pytest.raises(ConfigError, match="mcp --http needs a tokens file"):
        load_tokens(None)


def test_a_world_readable_file_is_served_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    content = json.dumps({digest_of(TOKEN): "acme"})
    with caplog.at_level(logging.WARNING, logger="research.mcp"):
        load_tokens(write(tmp_path / "private.json", content, 0o600))
        assert not caplog.records
        assert load_tokens(write(tmp_path / "open.json", content, 0o644)).caller(TOKEN) is not None
    assert [r.getMessage() for r in caplog.records] == [
        "the MCP tokens file is readable by every user of this machine; chmod 600 it"
    ]


def test_mcp_http_with_a_bad_tokens_file_exits_2_with_one_line_and_no_token(tmp_path: Path) -> None:
    path = write(tmp_path / "raw.json", json.dumps({TOKEN: "acme"}))
    proc = run_cli("mcp", "--http", env={"PATH": "/usr/bin:/bin", "RESEARCH_MCP_TOKENS_FILE": path})
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "research-worker: configuration error: RESEARCH_MCP_TOKENS_FILE: entry 1 is not the SHA-256 hex of "
        "a token (64 hex digits); the file holds hashes, never the tokens themselves"
    ]
    assert TOKEN not in proc.stderr and proc.stdout == ""


def test_mcp_http_without_a_tokens_file_and_with_report_are_usage_errors() -> None:
    missing = run_cli("mcp", "--http", env={"PATH": "/usr/bin:/bin"})
    assert (
        missing.returncode == 2
        and "RESEARCH_MCP_TOKENS_FILE: mcp --http needs a tokens file" in missing.stderr
    )
    both = run_cli("mcp", "--http", "--report", "r-1", env={"PATH": "/usr/bin:/bin"})
    assert both.returncode == 2
    assert "--report is for stdio" in both.stderr
    bad_report = run_cli("mcp", "--report", "not a report id!", env={"PATH": "/usr/bin:/bin"})
    assert bad_report.returncode == 2
    assert bad_report.stderr.startswith("research-worker: --report: ")


@pytest.mark.parametrize(
    ("raw", "origins"),
    [
        ("", ()),
        ("https://app.example.org", ("https://app.example.org",)),
        ("HTTP://LocalHost:3000/, https://b.example", ("http://localhost:3000", "https://b.example")),
        (" , http://[::1]:8080", ("http://[::1]:8080",)),
    ],
)
def test_allowed_origins_are_read_in_the_form_browsers_send(raw: str, origins: tuple[str, ...]) -> None:
    assert Settings.from_env({"RESEARCH_MCP_ORIGINS": raw}).mcp_origins == origins


@pytest.mark.parametrize(
    "raw",
    [
        "*",
        "app.example.org",
        "ftp://app.example.org",
        "https://",
        "https://app.example.org/path",
        "https://user@app.example.org",
        "https://app.example.org:port",
        "https://app.example.org?x=1",
        "null",
    ],
)
def test_a_value_that_is_not_an_origin_is_a_config_error(raw: str) -> None:
    with pytest.raises(ConfigError, match=r"^RESEARCH_MCP_ORIGINS: "):
        Settings.from_env({"RESEARCH_MCP_ORIGINS": raw})


@pytest.mark.parametrize(
    ("variable", "raw"),
    [
        ("RESEARCH_MCP_RATE_PER_MIN", "0"),
        ("RESEARCH_MCP_RATE_PER_MIN", "many"),
        ("RESEARCH_MCP_MAX_BODY_BYTES", "10"),
    ],
)
def test_a_bad_rate_or_body_bound_is_a_config_error(variable: str, raw: str) -> None:
    with pytest.raises(ConfigError, match=f"^{variable}: "):
        Settings.from_env({variable: raw})


def test_the_rate_limit_lets_a_minutes_worth_through_then_refills_evenly() -> None:
    limiter = RateLimiter(per_minute=60)
    assert [limiter.wait_s("a", now=100.0) for _ in range(60)] == [0.0] * 60
    assert limiter.wait_s("a", now=100.0) == pytest.approx(1.0)
    assert limiter.wait_s("b", now=100.0) == 0.0  # another token has its own bucket
    assert limiter.wait_s("a", now=101.0) == 0.0  # a second later, one more
    assert limiter.wait_s("a", now=101.0) > 0
    assert [limiter.wait_s("a", now=1000.0) for _ in range(60)] == [0.0] * 60  # never more than the minute
    assert limiter.wait_s("a", now=1000.0) > 0
