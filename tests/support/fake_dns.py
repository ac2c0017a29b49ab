"""A resolver the tests control: names map to loopback addresses; nothing asks real DNS."""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence

from aiohttp.abc import AbstractResolver, ResolveResult

Answers = Sequence[str] | Callable[[int], Sequence[str]]


class FakeResolver(AbstractResolver):
    """``table`` maps a name to its answers, or to a function of the call count (to flip them)."""

    def __init__(self, table: dict[str, Answers]) -> None:
        self.table = table
        self.calls: list[str] = []

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.calls.append(host)
        answers = self.table.get(host)
        if answers is None:
            raise OSError(socket.EAI_NONAME, f"{host} is not in the fake DNS")
        if callable(answers):
            answers = answers(self.calls.count(host))
        return [
            ResolveResult(
                hostname=host,
                host=address,
                port=port,
                family=socket.AF_INET6 if ":" in address else socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
            for address in answers
        ]

    async def close(self) -> None:
        return None
