"""The address policy: every IP address gets a verdict with a reason, from one explicit table.

The table is written out here rather than taken from ``ipaddress.is_global``/``is_private``: their
answers change between CPython patch releases, and they miss carrier-grade NAT, NAT64, 6to4,
IPv4-compatible ``::/96`` and site-local ``fec0::/10``. Each row names why a range is refused, so a
log line, a metric and ``check-url`` can say "link_local" instead of "no".

Order of judgement for one address:

1. An IPv4-mapped IPv6 address (``::ffff:a.b.c.d``) is judged as the IPv4 address it reaches,
   operator ranges included: a dual-stack socket connecting to ``::ffff:127.0.0.1`` talks to
   127.0.0.1, so allowing 127.0.0.1/32 allows both spellings and nothing else.
2. An operator allow range (``RESEARCH_GUARDIAN_ALLOW_CIDRS``) that holds the address wins.
3. The most specific row of the table that holds the address refuses it.
4. IPv4 outside the table is public; IPv6 is public only inside 2000::/3, the global unicast block.

Every other way of carrying an IPv4 address inside IPv6 (IPv4-compatible, SIIT, 6to4, Teredo, NAT64)
is refused whole, even when the IPv4 inside is public: a relay or gateway on the way decides where
it lands, and its idea of "private" is not ours.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from ipaddress import IPv4Network, IPv6Address, IPv6Network, ip_network

from worker.errors import DestinationBlocked, DnsFailure
from worker.guardian.reasons import Reason
from worker.guardian.verdict import IPAddress, Verdict

IPNetwork = IPv4Network | IPv6Network

# NAT64 gateways turn these into connections to whatever IPv4 address the low bits name, the
# gateway's own private network included, so neither the table nor an operator may open them.
TRANSLATION_PREFIXES: tuple[IPv6Network, ...] = (
    IPv6Network("64:ff9b::/96"),
    IPv6Network("64:ff9b:1::/48"),
)
IPV4_MAPPED = IPv6Network("::ffff:0:0/96")
GLOBAL_UNICAST = IPv6Network("2000::/3")


@dataclass(frozen=True)
class Rule:
    network: IPNetwork
    reason: Reason
    detail: str


def _table(rows: Iterable[tuple[str, Reason, str]]) -> tuple[Rule, ...]:
    # Longest prefix first, so a specific row (::1 loopback, the metadata address) wins over the
    # block that holds it (::/96, 169.254.0.0/16) and the rows can be written in address order.
    rules = [Rule(ip_network(network), reason, detail) for network, reason, detail in rows]
    return tuple(sorted(rules, key=lambda rule: rule.network.prefixlen, reverse=True))


IPV4_TABLE = _table(
    [
        (
            "0.0.0.0/8",
            Reason.UNSPECIFIED,
            "0.0.0.0/8 means 'this host', and connecting to it reaches loopback",
        ),
        ("10.0.0.0/8", Reason.PRIVATE, "10.0.0.0/8 is private network space (RFC 1918)"),
        (
            "100.64.0.0/10",
            Reason.CGNAT,
            "100.64.0.0/10 is carrier-grade NAT space, inside a provider's network",
        ),
        ("100.100.100.200/32", Reason.CGNAT, "100.100.100.200 is Alibaba Cloud's instance metadata service"),
        ("127.0.0.0/8", Reason.LOOPBACK, "127.0.0.0/8 is loopback, the worker's own host"),
        (
            "169.254.0.0/16",
            Reason.LINK_LOCAL,
            "169.254.0.0/16 is link-local, where cloud metadata services live",
        ),
        ("169.254.169.254/32", Reason.LINK_LOCAL, "169.254.169.254 is the cloud instance metadata service"),
        ("172.16.0.0/12", Reason.PRIVATE, "172.16.0.0/12 is private network space (RFC 1918)"),
        ("192.0.0.0/24", Reason.RESERVED, "192.0.0.0/24 is reserved for IETF protocol assignments"),
        ("192.0.0.192/32", Reason.RESERVED, "192.0.0.192 is Oracle Cloud's legacy instance metadata service"),
        ("192.0.2.0/24", Reason.DOCUMENTATION, "192.0.2.0/24 is TEST-NET-1, for documentation only"),
        ("192.88.99.0/24", Reason.RESERVED, "192.88.99.0/24 is the retired 6to4 relay anycast block"),
        ("192.168.0.0/16", Reason.PRIVATE, "192.168.0.0/16 is private network space (RFC 1918)"),
        (
            "198.18.0.0/15",
            Reason.BENCHMARKING,
            "198.18.0.0/15 is for benchmarking networks, not the internet",
        ),
        ("198.51.100.0/24", Reason.DOCUMENTATION, "198.51.100.0/24 is TEST-NET-2, for documentation only"),
        ("203.0.113.0/24", Reason.DOCUMENTATION, "203.0.113.0/24 is TEST-NET-3, for documentation only"),
        ("224.0.0.0/4", Reason.MULTICAST, "224.0.0.0/4 is multicast, not a single host"),
        ("240.0.0.0/4", Reason.RESERVED, "240.0.0.0/4 is reserved for future use"),
        ("255.255.255.255/32", Reason.RESERVED, "255.255.255.255 is the limited broadcast address"),
    ]
)

IPV6_TABLE = _table(
    [
        (
            "::/128",
            Reason.UNSPECIFIED,
            ":: is the unspecified address, and connecting to it reaches loopback",
        ),
        ("::1/128", Reason.LOOPBACK, "::1 is loopback, the worker's own host"),
        ("::/96", Reason.IPV6_EMBEDS_IPV4, "::/96 is IPv4-compatible IPv6, which carries an IPv4 address"),
        ("::ffff:0:0:0/96", Reason.IPV6_EMBEDS_IPV4, "::ffff:0:0:0/96 is SIIT's IPv4-translated form"),
        (
            "64:ff9b::/96",
            Reason.TRANSLATION,
            "64:ff9b::/96 is NAT64, which a gateway forwards to any IPv4 address",
        ),
        (
            "64:ff9b:1::/48",
            Reason.TRANSLATION,
            "64:ff9b:1::/48 is local-use NAT64, forwarded to any IPv4 address",
        ),
        ("100::/64", Reason.RESERVED, "100::/64 is the discard-only block"),
        ("2001::/23", Reason.RESERVED, "2001::/23 is reserved for IETF protocol assignments"),
        (
            "2001::/32",
            Reason.IPV6_EMBEDS_IPV4,
            "2001::/32 is Teredo, which tunnels to an IPv4 address it carries",
        ),
        ("2001:2::/48", Reason.BENCHMARKING, "2001:2::/48 is for benchmarking networks, not the internet"),
        ("2001:db8::/32", Reason.DOCUMENTATION, "2001:db8::/32 is for documentation only"),
        (
            "2002::/16",
            Reason.IPV6_EMBEDS_IPV4,
            "2002::/16 is 6to4, which relays to an IPv4 address it carries",
        ),
        ("3fff::/20", Reason.DOCUMENTATION, "3fff::/20 is for documentation only"),
        ("fc00::/7", Reason.PRIVATE, "fc00::/7 is unique-local, IPv6's private network space"),
        ("fd00:ec2::254/128", Reason.PRIVATE, "fd00:ec2::254 is AWS's IPv6 instance metadata service"),
        ("fe80::/10", Reason.LINK_LOCAL, "fe80::/10 is link-local, where metadata services can be reached"),
        ("fec0::/10", Reason.PRIVATE, "fec0::/10 is deprecated site-local, private to a site"),
        ("ff00::/8", Reason.MULTICAST, "ff00::/8 is multicast, not a single host"),
    ]
)


class AddressPolicy:
    """Judges addresses: the explicit table, with the operator's allow ranges on top."""

    def __init__(self, allow: Sequence[IPNetwork] = ()) -> None:
        for network in allow:
            for prefix in TRANSLATION_PREFIXES:
                # An allowed 64:ff9b::/96 (or ::/0, which holds it) would open every IPv4 address,
                # private ones included, to anyone with a DNS64 answer.
                if network.version == 6 and network.overlaps(prefix):
                    raise ValueError(
                        f"allow range {network} overlaps the NAT64 translation prefix {prefix}, "
                        "which would reach any IPv4 address behind the gateway"
                    )
            # Mapped addresses are judged as their IPv4 address, so one IPv4 range covers both
            # spellings; a second, IPv6 spelling of the same permission would only hide it.
            if network.version == 6 and network.overlaps(IPV4_MAPPED):
                raise ValueError(
                    f"allow range {network} overlaps the IPv4-mapped prefix {IPV4_MAPPED}; "
                    "allow the IPv4 range instead, which covers its mapped form too"
                )
        self._allow = tuple(allow)

    @property
    def allow_ranges(self) -> tuple[IPNetwork, ...]:
        return self._allow

    def classify(self, address: IPAddress) -> Verdict:
        if isinstance(address, IPv6Address) and address.ipv4_mapped is not None:
            inner = self.classify(address.ipv4_mapped)
            return Verdict(inner.allowed, inner.reason, f"IPv4-mapped {address.ipv4_mapped}: {inner.detail}")
        for network in self._allow:
            if address in network:
                return Verdict.allow(Reason.OPERATOR_ALLOW, f"the operator allows {network}")
        table = IPV6_TABLE if isinstance(address, IPv6Address) else IPV4_TABLE
        for rule in table:
            if address in rule.network:
                return Verdict.deny(rule.reason, rule.detail)
        if isinstance(address, IPv6Address) and address not in GLOBAL_UNICAST:
            return Verdict.deny(
                Reason.NOT_GLOBAL, "only 2000::/3 is global unicast IPv6, and this is outside it"
            )
        return Verdict.allow(Reason.PUBLIC, "it is outside every refused range")

    def check_answers(self, host: str, addresses: Sequence[IPAddress]) -> list[IPAddress]:
        """The resolver's rule: every answer is judged, and one refused answer refuses the name.

        Connecting only to the allowed answers would not do: a name that answers one public and
        one private address is an attack (or a misconfiguration), and the next lookup may differ.
        """
        if not addresses:
            raise DnsFailure(f"{host} has no addresses")
        for address in addresses:
            verdict = self.classify(address)
            if not verdict.allowed:
                raise DestinationBlocked(
                    f"{host} resolves to {address}, which is refused ({verdict.reason}): {verdict.detail}",
                    reason=verdict.reason,
                )
        return list(addresses)
