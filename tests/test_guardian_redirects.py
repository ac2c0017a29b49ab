"""The redirect rule on its own: ``next_hop`` judges every Location it is given, with no socket
factory behind it. The connector refuses a bad address too, with the same error, so a fetch test
cannot tell which layer refused: these tests call the rule alone, and a policy that records what
it was asked is the oracle (the rule must ask about the Location's address, and obey the answer)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.fetching import LOOPBACK_ONLY
from worker.errors import DestinationBlocked
from worker.guardian.policy import AddressPolicy
from worker.guardian.reasons import Reason
from worker.guardian.redirects import next_hop
from worker.guardian.urls import check_url
from worker.guardian.verdict import IPAddress, Verdict

HERE = "https://127.0.0.1:8443/a/b?c"


@dataclass
class Recording:
    """Allows only what it is told to, and remembers every address it was asked about."""

    allowed: set[IPAddress] = field(default_factory=set)
    asked: list[IPAddress] = field(default_factory=list)

    def classify(self, address: IPAddress) -> Verdict:
        self.asked.append(address)
        if address in self.allowed:
            return Verdict.allow(Reason.OPERATOR_ALLOW, "allowed by the test")
        return Verdict.deny(Reason.PRIVATE, "refused by the test")


def current(policy: Recording) -> object:
    policy.allowed.add(ipaddress.ip_address("127.0.0.1"))
    here = check_url(HERE, policy)
    policy.asked.clear()
    return here


@pytest.mark.parametrize(
    ("location", "address"),
    [
        ("https://127.0.0.2/", "127.0.0.2"),
        ("https://127.0.0.2:8443/a/b?c", "127.0.0.2"),
        ("HTTPS://127.0.0.3/x", "127.0.0.3"),
        ("https://[::1]/", "::1"),
        ("https://[::ffff:127.0.0.2]/", "::ffff:127.0.0.2"),
        ("https://127.0.0.2./", "127.0.0.2"),
        ("//127.0.0.2/", "127.0.0.2"),  # scheme-relative: a new host
    ],
)
def test_an_absolute_location_to_a_refused_address_is_refused_by_the_rule_itself(
    location: str, address: str
) -> None:
    policy = Recording()
    here = current(policy)
    with pytest.raises(DestinationBlocked) as refused:
        next_hop(here, location, policy)  # type: ignore[arg-type]
    assert refused.value.reason is Reason.PRIVATE  # the policy's own answer, not a parse error
    assert policy.asked == [ipaddress.ip_address(address)]


def test_the_same_location_passes_once_the_policy_allows_its_address() -> None:
    policy = Recording()
    here = current(policy)
    policy.allowed.add(ipaddress.ip_address("127.0.0.2"))
    hop = next_hop(here, "https://127.0.0.2:9/next", policy)  # type: ignore[arg-type]
    assert hop.url == "https://127.0.0.2:9/next"
    assert policy.asked == [ipaddress.ip_address("127.0.0.2")]


def test_a_relative_location_is_joined_and_judged_against_the_current_host() -> None:
    policy = Recording()
    here = current(policy)
    hop = next_hop(here, "../d?e", policy)  # type: ignore[arg-type]
    assert hop.url == "https://127.0.0.1:8443/d?e"
    assert policy.asked == [ipaddress.ip_address("127.0.0.1")]


# With the project's own policy: only 127.0.0.1 allowed, every other address refused as written.
@given(
    last=st.integers(2, 255),
    port=st.sampled_from(["", ":443", ":8443", ":1"]),
    path=st.sampled_from(["", "/", "/x", "/x?y=1", "/#f"]),
    scheme=st.sampled_from(["https://", "HTTPS://", "Https://", "//"]),
)
def test_any_absolute_location_to_another_loopback_address_is_refused(
    last: int, port: str, path: str, scheme: str
) -> None:
    policy = AddressPolicy(LOOPBACK_ONLY)
    here = check_url(HERE, policy)
    with pytest.raises(DestinationBlocked) as refused:
        next_hop(here, f"{scheme}127.0.0.{last}{port}{path}", policy)
    assert refused.value.reason is Reason.LOOPBACK


@pytest.mark.parametrize(
    "location", ["https://10.0.0.1/", "https://169.254.169.254/latest", "https://0.0.0.0/", "https://[::]/"]
)
def test_the_classic_targets_of_a_redirect_are_refused_by_the_rule(location: str) -> None:
    policy = AddressPolicy(LOOPBACK_ONLY)
    with pytest.raises(DestinationBlocked):
        next_hop(check_url(HERE, policy), location, policy)
