"""The configured providers, built once per worker: the primary, the optional fallback, and what to close."""

from __future__ import annotations

from dataclasses import dataclass, field

from jobs.providers.base import Provider
from jobs.providers.openrouter import OpenRouter
from jobs.providers.openrouter_plugin import PluginSearch
from jobs.providers.openrouter_tool import ServerToolSearch
from jobs.providers.searxng import SearxngSearch
from worker.config import SearchProvider, Settings


@dataclass
class Providers:
    primary: Provider
    fallback: Provider | None
    _clients: list[OpenRouter | SearxngSearch] = field(default_factory=list)

    async def close(self) -> None:
        for client in self._clients:
            await client.close()


def open_providers(settings: Settings) -> Providers:
    clients: list[OpenRouter | SearxngSearch] = []
    openrouter: OpenRouter | None = None

    def build(kind: SearchProvider) -> Provider:
        nonlocal openrouter
        if kind is SearchProvider.SEARXNG:
            searxng = SearxngSearch.open(settings)
            clients.append(searxng)
            return searxng
        if openrouter is None:
            openrouter = OpenRouter.open(settings)
            clients.append(openrouter)
        if kind is SearchProvider.OPENROUTER_TOOL:
            return ServerToolSearch(openrouter)
        return PluginSearch(openrouter)

    primary = build(settings.search_provider)
    fallback = build(settings.search_fallback) if settings.search_fallback is not None else None
    return Providers(primary, fallback, clients)
