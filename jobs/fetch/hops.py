"""The report's rule for where a fetch may go: the menu, the domain lists and robots.txt, asked of
the URL a job names and of every redirect to another site."""

from __future__ import annotations

from jobs.robots import Robots
from worker.errors import DomainNotAllowed, UrlNotInMenu
from worker.guardian.domains import DomainPolicy
from worker.guardian.redirects import HopRule
from worker.guardian.urls import Target
from worker.state.menu import Menu


async def require_on_menu(menu: Menu, report_id: str, target: Target, *, redirected: bool = False) -> None:
    """The URL menu: a URL the report has not seen, asked for or redirected to, is refused."""
    if menu.enabled and not await menu.contains(report_id, target.url):
        unseen = (
            f"the URL on another site, {target.host}, that the page redirected to"
            if redirected
            else "that URL"
        )
        raise UrlNotInMenu(
            f"this report has not seen {unseen}: fetch the url of a search result, a link from a "
            "fetched page, or a URL from the briefing"
        )


def require_domain(domains: DomainPolicy, target: Target) -> None:
    refusal = domains.refusal(target.host)
    if refusal is not None:
        raise DomainNotAllowed(f"{refusal}, so this deployment does not fetch from it")


def report_rule(
    menu: Menu,
    report_id: str,
    domains: DomainPolicy | None = None,
    robots: Robots | None = None,
    until: float = 0.0,
) -> HopRule:
    """A redirect to another site: its host must pass the domain lists (else domain_not_allowed),
    its URL must be on the report's menu (else url_not_in_menu), and, with robots.txt checking on,
    that site's robots.txt must allow it (else robots_disallowed). The render job, which has no
    domain lists or robots.txt of its own, asks the menu alone."""

    async def may_follow(current: Target, following: Target) -> None:
        if domains is not None:
            require_domain(domains, following)
        await require_on_menu(menu, report_id, following, redirected=True)
        if robots is not None:
            await robots.check(following, until)

    return may_follow
