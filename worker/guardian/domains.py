"""The operator's domain policy: domains a deployment (or one report) will not fetch, or fetches only.

Domains are compared in the guardian's own canonical form (IDNA, lower case, no trailing dot),
computed by the same parser that reads a URL's host, so a list entry written in Unicode, in
mixed case or with a trailing dot means exactly the host a URL would name. A domain covers its
subdomains, label by label: ``example.org`` covers ``www.example.org`` but not
``evil-example.org``. Entries are domain names only: an IP literal, a port, a path or a wildcard
other than a leading ``*.`` (which means what the bare domain already means) is refused where the
list is read, with a message that says why.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from worker.errors import DestinationBlocked, SchemeNotAllowed
from worker.guardian.urls import parse_https_url

MAX_DOMAINS = 10_000


class DomainListError(ValueError):
    """A list entry that is not a domain name; the message says which and why."""


def canonical_domain(raw: str) -> str:
    entry = raw.strip()
    if entry.startswith("*."):
        entry = entry[2:]
    if not entry or any(ch in entry for ch in "*?/:@[]#"):
        raise DomainListError(f"{_shown(raw)} is not a domain name (no wildcards, ports, paths or addresses)")
    try:
        target = parse_https_url(f"https://{entry}/")
    except (DestinationBlocked, SchemeNotAllowed):
        raise DomainListError(f"{_shown(raw)} is not a valid domain name") from None
    if target.address is not None:
        raise DomainListError(f"{_shown(raw)} is an IP address; domain lists hold domain names")
    return target.host


def domains_of(entries: Iterable[str]) -> frozenset[str]:
    found = frozenset(canonical_domain(entry) for entry in entries if entry.strip())
    if len(found) > MAX_DOMAINS:
        raise DomainListError(f"more than {MAX_DOMAINS:,} domains")
    return found


def parse_domain_list(raw: str) -> frozenset[str]:
    """A comma-separated list, as the environment gives it."""
    return domains_of(raw.split(","))


def covers(domains: frozenset[str], host: str) -> bool:
    """Whether ``host`` (canonical) is one of ``domains`` or a subdomain of one."""
    labels = host.split(".")
    return any(".".join(labels[i:]) in domains for i in range(len(labels)))


@dataclass(frozen=True)
class DomainPolicy:
    """Blocked domains, and the allow lists a host must be on (each non-empty list must cover it)."""

    blocked: frozenset[str] = frozenset()
    allowed: tuple[frozenset[str], ...] = ()

    @property
    def unrestricted(self) -> bool:
        return not self.blocked and not any(self.allowed)

    def refusal(self, host: str) -> str | None:
        """Why ``host`` may not be fetched, in the worker's words; None when it may."""
        if covers(self.blocked, host):
            return f"{host} is on a blocked domain list"
        if any(not covers(allowed, host) for allowed in self.allowed if allowed):
            return f"{host} is not on the allowed domain list"
        return None

    def narrowed(self, *, blocked: frozenset[str], allowed: frozenset[str]) -> DomainPolicy:
        """This policy and one report's lists: they add blocks and allow lists, never remove them."""
        return DomainPolicy(self.blocked | blocked, (*self.allowed, allowed) if allowed else self.allowed)


def _shown(raw: str) -> str:
    """An entry as a message may show it: the operator's own text, bounded."""
    text = raw.strip()
    return repr(text if len(text) <= 80 else text[:77] + "...")
