"""The address policy, as a table of addresses and the reason each one gets.

Pure decisions: nothing here opens a socket. Every public address below is judged, never contacted.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worker.errors import DestinationBlocked, DnsFailure
from worker.guardian.policy import AddressPolicy
from worker.guardian.reasons import ALLOWING as ALLOWING_REASONS
from worker.guardian.reasons import Reason


def row(address: str, reason: str, why: str) -> object:
    return pytest.param(address, reason, id=why)


ADDRESSES = [
    # Public controls: the policy must not refuse the internet.
    row("8.8.8.8", "public", "Google public DNS stays allowed"),
    row("1.1.1.1", "public", "Cloudflare public DNS stays allowed"),
    row("93.184.216.34", "public", "example.com's historical address stays allowed"),
    row("2606:4700:4700::1111", "public", "Cloudflare IPv6 stays allowed"),
    row("2001:4860:4860::8888", "public", "Google IPv6 stays allowed"),
    row("2a00:1450:4001:800::200e", "public", "a RIPE-allocated IPv6 address stays allowed"),
    row("2001:200::1", "public", "the first IPv6 block after 2001::/23 stays allowed"),
    row("2003::1", "public", "the first IPv6 block after 6to4 stays allowed"),
    row("3fff:1000::1", "public", "the first IPv6 block after 3fff::/20 stays allowed"),
    row("::ffff:8.8.8.8", "public", "a public IPv4 written as IPv4-mapped IPv6 stays allowed"),
    # The edges of each IPv4 block, on both sides.
    row("0.0.0.0", "unspecified", "0.0.0.0, which Linux connects to loopback"),
    row("0.255.255.255", "unspecified", "the top of 0.0.0.0/8"),
    row("1.0.0.0", "public", "just above 0.0.0.0/8"),
    row("9.255.255.255", "public", "just below 10/8"),
    row("10.0.0.0", "private", "the bottom of 10/8"),
    row("10.255.255.255", "private", "the top of 10/8"),
    row("11.0.0.0", "public", "just above 10/8"),
    row("100.63.255.255", "public", "just below carrier-grade NAT"),
    row("100.64.0.0", "cgnat", "the bottom of carrier-grade NAT"),
    row("100.127.255.255", "cgnat", "the top of carrier-grade NAT"),
    row("100.128.0.0", "public", "just above carrier-grade NAT"),
    row("126.255.255.255", "public", "just below loopback"),
    row("127.0.0.1", "loopback", "loopback"),
    row("127.255.255.254", "loopback", "the top of 127/8 is loopback too"),
    row("128.0.0.0", "public", "just above loopback"),
    row("169.253.255.255", "public", "just below link-local"),
    row("169.254.0.1", "link_local", "IPv4 link-local"),
    row("169.255.0.0", "public", "just above link-local"),
    row("172.15.255.255", "public", "just below 172.16/12"),
    row("172.16.0.0", "private", "the bottom of 172.16/12"),
    row("172.31.255.255", "private", "the top of 172.16/12"),
    row("172.32.0.0", "public", "just above 172.16/12"),
    row("192.0.0.1", "reserved", "IETF protocol assignments 192.0.0.0/24"),
    row("192.0.1.1", "public", "between the IETF block and TEST-NET-1"),
    row("192.0.2.1", "documentation", "TEST-NET-1"),
    row("192.88.99.1", "reserved", "the retired 6to4 relay anycast"),
    row("192.167.255.255", "public", "just below 192.168/16"),
    row("192.168.1.1", "private", "a home router"),
    row("192.169.0.0", "public", "just above 192.168/16"),
    row("198.17.255.255", "public", "just below benchmarking"),
    row("198.18.0.1", "benchmarking", "the bottom of benchmarking 198.18/15"),
    row("198.19.255.255", "benchmarking", "the top of benchmarking 198.18/15"),
    row("198.20.0.0", "public", "just above benchmarking"),
    row("198.51.100.7", "documentation", "TEST-NET-2"),
    row("203.0.113.9", "documentation", "TEST-NET-3"),
    row("223.255.255.255", "public", "just below multicast"),
    row("224.0.0.1", "multicast", "all-hosts multicast"),
    row("239.255.255.250", "multicast", "SSDP multicast"),
    row("240.0.0.1", "reserved", "class E"),
    row("255.255.255.255", "reserved", "limited broadcast"),
    # Cloud metadata services: the prize of most SSRF.
    row("169.254.169.254", "link_local", "the AWS, GCP and Azure metadata address"),
    row("169.254.170.2", "link_local", "the ECS task metadata address"),
    row("100.100.100.200", "cgnat", "the Alibaba Cloud metadata address"),
    row("192.0.0.192", "reserved", "the Oracle Cloud legacy metadata address"),
    row("fd00:ec2::254", "private", "the AWS IPv6 metadata address"),
    row("fe80::a9fe:a9fe", "link_local", "the metadata address written as IPv6 link-local"),
    row("::ffff:169.254.169.254", "link_local", "the metadata address written as IPv4-mapped"),
    # IPv6 that carries an IPv4 address.
    row("::ffff:127.0.0.1", "loopback", "IPv4-mapped loopback is loopback"),
    row("::ffff:7f00:1", "loopback", "IPv4-mapped loopback in hex groups is loopback"),
    row("::ffff:10.0.0.1", "private", "IPv4-mapped private is private"),
    row("::ffff:0.0.0.0", "unspecified", "IPv4-mapped 0.0.0.0 is unspecified"),
    row("::ffff:100.64.0.1", "cgnat", "IPv4-mapped carrier-grade NAT is cgnat"),
    row("::127.0.0.1", "ipv6_embeds_ipv4", "IPv4-compatible loopback"),
    row("::8.8.8.8", "ipv6_embeds_ipv4", "IPv4-compatible even of a public address"),
    row("::ffff:0:127.0.0.1", "ipv6_embeds_ipv4", "SIIT IPv4-translated loopback"),
    row("2002:7f00:1::", "ipv6_embeds_ipv4", "6to4 of loopback"),
    row("2002:a00:1::1", "ipv6_embeds_ipv4", "6to4 of 10.0.0.1"),
    row("2002:a9fe:a9fe::", "ipv6_embeds_ipv4", "6to4 of the metadata address"),
    row("2002:808:808::1", "ipv6_embeds_ipv4", "6to4 of a public address is refused whole"),
    row("2001:0:4136:e378:8000:63bf:3fff:fdd2", "ipv6_embeds_ipv4", "a Teredo address"),
    row("2001::80ff:fffe", "ipv6_embeds_ipv4", "Teredo whose obfuscated client is 127.0.0.1"),
    row("64:ff9b::7f00:1", "translation", "NAT64 of loopback"),
    row("64:ff9b::a9fe:a9fe", "translation", "NAT64 of the metadata address"),
    row("64:ff9b::808:808", "translation", "NAT64 of a public address is refused whole"),
    row("64:ff9b:1::a00:1", "translation", "local-use NAT64 of 10.0.0.1"),
    row("64:ff9b:1:ffff::1", "translation", "the top of local-use NAT64"),
    # The rest of IPv6.
    row("::", "unspecified", "the IPv6 unspecified address"),
    row("::1", "loopback", "IPv6 loopback"),
    row("::2", "ipv6_embeds_ipv4", "IPv4-compatible 0.0.0.2"),
    row("fe80::1", "link_local", "IPv6 link-local"),
    row("fe80::1%eth0", "link_local", "a zone id does not hide link-local"),
    row("febf:ffff::1", "link_local", "the top of fe80::/10"),
    row("fec0::1", "private", "deprecated site-local"),
    row("fc00::1", "private", "unique-local fc00::/8"),
    row("fd12:3456:789a::1", "private", "unique-local fd00::/8"),
    row("ff02::1", "multicast", "IPv6 all-nodes multicast"),
    row("ff05::2", "multicast", "site-local multicast"),
    row("100::1", "reserved", "the discard-only block"),
    row("100:0:0:1::1", "not_global", "just above the discard-only block"),
    row("2001::1", "ipv6_embeds_ipv4", "the bottom of Teredo"),
    row("2001:2::1", "benchmarking", "IPv6 benchmarking"),
    row("2001:10::1", "reserved", "deprecated ORCHID in the IETF block"),
    row("2001:1ff:ffff::1", "reserved", "the top of 2001::/23"),
    row("2001:db8::1", "documentation", "IPv6 documentation"),
    row("2002::", "ipv6_embeds_ipv4", "the bottom of 6to4"),
    row("3fff::1", "documentation", "the new IPv6 documentation block"),
    row("3fff:fff::1", "documentation", "the top of 3fff::/20"),
    row("1fff:ffff::1", "not_global", "just below global unicast"),
    row("4000::1", "not_global", "just above global unicast"),
    row("5f00::1", "not_global", "SRv6 segment identifiers"),
    row("e000::1", "not_global", "unassigned IPv6 space"),
]


@pytest.mark.parametrize(("address", "reason"), ADDRESSES)
def test_an_address_gets_the_reason_of_its_range(address: str, reason: str) -> None:
    verdict = AddressPolicy().classify(ip_address(address))
    assert verdict.reason == reason
    assert verdict.allowed is (reason in ALLOWING_REASONS)
    assert verdict.detail


LOOPBACK_ONE = [ip_network("127.0.0.1/32")]

OPERATOR_RULES = [
    pytest.param(LOOPBACK_ONE, "127.0.0.1", "operator_allow", id="the allowed loopback address"),
    pytest.param(LOOPBACK_ONE, "127.0.0.2", "loopback", id="its neighbour stays refused"),
    pytest.param(LOOPBACK_ONE, "::ffff:127.0.0.1", "operator_allow", id="the allowed address IPv4-mapped"),
    pytest.param(LOOPBACK_ONE, "::ffff:127.0.0.2", "loopback", id="its neighbour IPv4-mapped"),
    pytest.param(LOOPBACK_ONE, "::127.0.0.1", "ipv6_embeds_ipv4", id="not the IPv4-compatible form"),
    pytest.param(LOOPBACK_ONE, "64:ff9b::7f00:1", "translation", id="not the NAT64 form"),
    pytest.param(LOOPBACK_ONE, "2002:7f00:1::", "ipv6_embeds_ipv4", id="not the 6to4 form"),
    pytest.param(LOOPBACK_ONE, "::1", "loopback", id="not IPv6 loopback"),
    pytest.param(
        [ip_network("10.1.0.0/16")], "10.1.2.3", "operator_allow", id="inside an allowed private range"
    ),
    pytest.param([ip_network("10.1.0.0/16")], "10.2.0.1", "private", id="outside an allowed private range"),
    pytest.param([ip_network("fd00::/8")], "fd00::1", "operator_allow", id="inside an allowed unique-local"),
    pytest.param([ip_network("fd00::/8")], "fc00::1", "private", id="outside an allowed unique-local"),
]


@pytest.mark.parametrize(("allow", "address", "reason"), OPERATOR_RULES)
def test_operator_ranges_win_over_the_table_and_nothing_more(
    allow: list[IPv4Network | IPv6Network], address: str, reason: str
) -> None:
    assert AddressPolicy(allow).classify(ip_address(address)).reason == reason


@pytest.mark.parametrize(
    "allow",
    [
        pytest.param("64:ff9b::7f00:1/128", id="one NAT64 address"),
        pytest.param("64:ff9b::/96", id="the whole NAT64 prefix"),
        pytest.param("64:ff9b::/64", id="a range holding the NAT64 prefix"),
        pytest.param("::/0", id="all of IPv6"),
        pytest.param("64:ff9b:1:2::/64", id="part of local-use NAT64"),
        pytest.param("64:ff9b:1::/48", id="all of local-use NAT64"),
    ],
)
def test_an_allow_range_may_not_touch_a_translation_prefix(allow: str) -> None:
    with pytest.raises(ValueError, match="NAT64 translation prefix 64:ff9b"):
        AddressPolicy([ip_network(allow)])


@pytest.mark.parametrize(
    "allow",
    [
        pytest.param("::ffff:0:0/96", id="all IPv4-mapped addresses"),
        pytest.param("::ffff:7f00:1/128", id="mapped loopback"),
        pytest.param("::/64", id="a range holding the mapped prefix"),
    ],
)
def test_an_allow_range_for_mapped_addresses_must_be_written_as_ipv4(allow: str) -> None:
    with pytest.raises(ValueError, match="allow the IPv4 range instead"):
        AddressPolicy([ip_network(allow)])


def test_the_allow_ranges_are_kept_for_the_start_up_log() -> None:
    ranges = [ip_network("127.0.0.1/32"), ip_network("fd00::/8")]
    assert AddressPolicy(ranges).allow_ranges == tuple(ranges)
    assert AddressPolicy().allow_ranges == ()


ANSWERS = [
    pytest.param(["93.184.216.34"], None, id="one public answer"),
    pytest.param(["93.184.216.34", "2606:2800:220:1::1"], None, id="public answers of both families"),
    pytest.param(["93.184.216.34", "10.0.0.1"], "private", id="public then private is refused whole"),
    pytest.param(["10.0.0.1", "93.184.216.34"], "private", id="private then public is refused whole"),
    pytest.param(["2606:4700::1", "::1"], "loopback", id="public then IPv6 loopback"),
    pytest.param(["::ffff:169.254.169.254", "8.8.8.8"], "link_local", id="mapped metadata then public"),
    pytest.param(["8.8.8.8", "64:ff9b::808:808"], "translation", id="public then a DNS64 answer"),
    pytest.param(["1.1.1.1", "1.0.0.1", "127.0.0.1"], "loopback", id="a rebinding name's last answer"),
]


@pytest.mark.parametrize(("answers", "reason"), ANSWERS)
def test_one_refused_answer_refuses_the_whole_name(answers: list[str], reason: str | None) -> None:
    addresses = [ip_address(a) for a in answers]
    policy = AddressPolicy()
    if reason is None:
        assert policy.check_answers("example.org", addresses) == addresses
        return
    with pytest.raises(DestinationBlocked) as refused:
        policy.check_answers("example.org", addresses)
    assert refused.value.reason == reason
    bad = next(a for a in addresses if not policy.classify(a).allowed)
    assert "example.org" in refused.value.message
    assert str(bad) in refused.value.message
    assert reason in refused.value.message


def test_a_name_with_no_answers_is_a_dns_failure() -> None:
    with pytest.raises(DnsFailure, match=r"example\.org"):
        AddressPolicy().check_answers("example.org", [])


def test_an_operator_range_lets_a_test_server_resolve_but_not_its_neighbours() -> None:
    policy = AddressPolicy(LOOPBACK_ONE)
    assert policy.check_answers("local.test", [ip_address("127.0.0.1")]) == [ip_address("127.0.0.1")]
    with pytest.raises(DestinationBlocked, match=r"127\.0\.0\.2"):
        policy.check_answers("local.test", [ip_address("127.0.0.1"), ip_address("127.0.0.2")])


# Pure functions: a slow run on a loaded machine is not a failure.
no_deadline = settings(deadline=None)


@no_deadline
@given(st.ip_addresses())
def test_every_address_gets_a_known_reason(address: IPv4Address | IPv6Address) -> None:
    verdict = AddressPolicy().classify(address)
    assert verdict.reason in set(Reason)
    assert verdict.allowed is (verdict.reason in ALLOWING_REASONS)


@no_deadline
@given(st.ip_addresses(v=4))
def test_an_ipv4_mapped_address_is_judged_as_its_ipv4(address: IPv4Address) -> None:
    mapped = IPv6Address(f"::ffff:{address}")
    assert AddressPolicy().classify(mapped).reason == AddressPolicy().classify(address).reason


@no_deadline
@given(st.ip_addresses(v=4))
def test_no_other_ipv6_wrapping_of_ipv4_is_ever_allowed(address: IPv4Address) -> None:
    v4 = int(address)
    wrapped = [
        v4,  # IPv4-compatible ::a.b.c.d
        0xFFFF << 48 | v4,  # SIIT ::ffff:0:a.b.c.d
        int(IPv6Address("64:ff9b::")) | v4,  # NAT64
        int(IPv6Address("64:ff9b:1::")) | v4,  # local-use NAT64
        int(IPv6Address("2002::")) | v4 << 80,  # 6to4
        int(IPv6Address("2001::")) | (v4 ^ 0xFFFF_FFFF),  # Teredo, client address obfuscated
    ]
    for value in wrapped:
        assert not AddressPolicy().classify(IPv6Address(value)).allowed, IPv6Address(value)


@no_deadline
@given(st.ip_addresses(v=6))
def test_an_allowed_ipv6_address_is_global_unicast_or_mapped(address: IPv6Address) -> None:
    if AddressPolicy().classify(address).allowed:
        assert address in ip_network("2000::/3") or address.ipv4_mapped is not None
