"""Why the guardian allowed or refused: one vocabulary for addresses and URLs.

Each value is a stable label: metrics count by it, dashboards group by it, ``check-url`` prints it.
Address reasons come from the policy table; URL reasons from the raw checks on the URL string.
"""

from __future__ import annotations

from enum import StrEnum


class Reason(StrEnum):
    # Addresses that may be connected to.
    PUBLIC = "public"
    OPERATOR_ALLOW = "operator_allow"
    # Addresses that may not, by the row of the policy table that holds them.
    UNSPECIFIED = "unspecified"
    LOOPBACK = "loopback"
    PRIVATE = "private"
    LINK_LOCAL = "link_local"
    CGNAT = "cgnat"
    DOCUMENTATION = "documentation"
    BENCHMARKING = "benchmarking"
    MULTICAST = "multicast"
    RESERVED = "reserved"
    IPV6_EMBEDS_IPV4 = "ipv6_embeds_ipv4"
    TRANSLATION = "translation"
    NOT_GLOBAL = "not_global"
    # URLs refused before any address is looked at.
    SCHEME = "scheme"
    MALFORMED_URL = "malformed_url"
    USERINFO = "userinfo"
    PERCENT_IN_HOST = "percent_in_host"
    CONTROL_CHARACTER = "control_character"
    BACKSLASH = "backslash"
    INVISIBLE_CHARACTER = "invisible_character"
    BAD_PORT = "bad_port"
    AMBIGUOUS_IP = "ambiguous_ip"


ALLOWING = frozenset({Reason.PUBLIC, Reason.OPERATOR_ALLOW})
