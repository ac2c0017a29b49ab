"""Domain lists as decisions: canonical forms, what a domain covers, and how report lists narrow."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from worker.config import ConfigError, Settings
from worker.guardian.domains import (
    DomainListError,
    DomainPolicy,
    canonical_domain,
    covers,
)

LABEL = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=12)
DOMAIN = (
    st.lists(LABEL, min_size=2, max_size=4).map(".".join).filter(lambda d: not d.split(".")[-1].isdigit())
)


@pytest.mark.parametrize(
    ("written", "canonical"),
    [
        ("Example.ORG", "example.org"),
        ("example.org.", "example.org"),
        ("  example.org ", "example.org"),
        ("*.example.org", "example.org"),
        ("bücher.example", "xn--bcher-kva.example"),
        ("XN--BCHER-KVA.example", "xn--bcher-kva.example"),
        ("ｅｘａｍｐｌｅ．ｏｒｇ", "example.org"),
    ],
)
def test_a_domain_is_kept_in_the_form_a_urls_host_takes(written: str, canonical: str) -> None:
    assert canonical_domain(written) == canonical


@pytest.mark.parametrize(
    "written",
    [
        "10.0.0.5",
        "[::1]",
        "127.1",
        "0x7f.1",
        "example.org:443",
        "example.org/path",
        "ex*ample.org",
        "*",
        "*.*.example.org",
        "user@example.org",
        "https://example.org",
        "exa mple.org",
        "exa\u200bmple.org",
        "",
        "a..b",
        "xn--.example",
    ],
)
def test_what_is_not_a_domain_name_is_refused_with_a_reason(written: str) -> None:
    with pytest.raises(DomainListError):
        canonical_domain(written)


@given(DOMAIN, st.lists(LABEL, max_size=3))
def test_a_domain_covers_itself_and_every_subdomain(domain: str, sub: list[str]) -> None:
    host = ".".join([*sub, domain])
    assert covers(frozenset({domain}), host)


@given(DOMAIN, LABEL, st.sampled_from(["-", "", "x"]))
def test_a_lookalike_that_only_ends_with_the_same_letters_is_not_covered(
    domain: str, prefix: str, joiner: str
) -> None:
    lookalike = f"{prefix}{joiner}{domain}"  # evil-example.org, evilexample.org
    assert not covers(frozenset({domain}), lookalike)


@given(DOMAIN)
def test_a_parent_is_not_covered_by_its_subdomain(domain: str) -> None:
    assert not covers(frozenset({f"www.{domain}"}), domain)


def test_a_blocked_domain_is_refused_and_so_is_a_host_off_a_non_empty_allow_list() -> None:
    policy = DomainPolicy(
        blocked=frozenset({"blocked.org"}), allowed=(frozenset({"example.org", "blocked.org"}),)
    )
    assert policy.refusal("www.example.org") is None
    assert policy.refusal("a.blocked.org") == "a.blocked.org is on a blocked domain list"
    assert policy.refusal("other.org") == "other.org is not on the allowed domain list"
    assert DomainPolicy().refusal("anything.org") is None


@given(
    st.frozensets(DOMAIN, max_size=3),
    st.frozensets(DOMAIN, max_size=3),
    st.frozensets(DOMAIN, max_size=3),
    st.frozensets(DOMAIN, max_size=3),
    DOMAIN,
)
def test_a_reports_lists_narrow_the_deployments_and_never_widen_them(
    blocked: frozenset[str],
    allowed: frozenset[str],
    report_blocked: frozenset[str],
    report_allowed: frozenset[str],
    host: str,
) -> None:
    deployment = DomainPolicy(blocked, (allowed,) if allowed else ())
    narrowed = deployment.narrowed(blocked=report_blocked, allowed=report_allowed)
    if deployment.refusal(host) is not None:
        assert narrowed.refusal(host) is not None
    if covers(report_blocked, host) or (report_allowed and not covers(report_allowed, host)):
        assert narrowed.refusal(host) is not None


@pytest.mark.parametrize("variable", ["RESEARCH_BLOCKED_DOMAINS", "RESEARCH_ALLOWED_DOMAINS"])
@pytest.mark.parametrize("value", ["10.0.0.5", "example.org, *.*.x.org", "example.org/path", "[::1]"])
def test_a_domain_list_that_holds_no_domain_names_stops_start_up_naming_the_variable(
    variable: str, value: str
) -> None:
    with pytest.raises(ConfigError, match=variable):
        Settings.from_env({variable: value})


def test_domain_lists_from_the_environment_are_canonical() -> None:
    settings = Settings.from_env(
        {"RESEARCH_BLOCKED_DOMAINS": "Evil.Example, *.bad.org,", "RESEARCH_ALLOWED_DOMAINS": "bücher.example"}
    )
    assert settings.blocked_domains == {"evil.example", "bad.org"}
    assert settings.allowed_domains == {"xn--bcher-kva.example"}
