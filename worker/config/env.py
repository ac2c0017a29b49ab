"""The environment reader: one variable at a time, a bad value a ``ConfigError`` naming it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar, overload

from worker.config.values import MAX_COUNT, MAX_WAIT_S, ConfigError

T = TypeVar("T")


@dataclass(frozen=True)
class NumberBounds:
    """The range one numeric setting accepts, as ``Env`` read it (for tests and docs)."""

    name: str
    integer: bool
    minimum: float
    maximum: float
    minimum_allowed: bool  # False for seconds: the minimum itself (0) is refused


class Env:
    """Reads one variable at a time and turns a bad value into a ConfigError naming it.

    ``numbers`` records every numeric setting read and its bounds, so a test can walk the edges
    of each one, including settings added later.
    """

    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = env
        self.numbers: dict[str, NumberBounds] = {}

    def text(self, name: str) -> str | None:
        value = self._env.get(name)
        if value is None or value.strip() == "":
            return None
        return value.strip()

    def parse(self, name: str, default: T, parser: Callable[[str], T]) -> T:
        raw = self.text(name)
        if raw is None:
            return default
        try:
            return parser(raw)
        except (ValueError, OSError) as exc:
            raise ConfigError(f"{name}: {exc}") from None

    def integer(self, name: str, default: int, *, minimum: int, maximum: int = MAX_COUNT) -> int:
        self.numbers[name] = NumberBounds(name, True, minimum, maximum, True)

        def parse_int(raw: str) -> int:
            try:
                value = int(raw.replace("_", ""))
            except ValueError:
                raise ValueError(f"{raw!r} is not an integer") from None
            if value < minimum:
                kind = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
                raise ValueError(f"{raw!r} must be {kind}")
            if value > maximum:
                raise ValueError(f"{shown_number(raw)} is more than {maximum:,}, the most this setting takes")
            return value

        return self.parse(name, default, parse_int)

    @overload
    def seconds(self, name: str, default: float, *, maximum: float = ..., zero: bool = ...) -> float: ...

    @overload
    def seconds(
        self, name: str, default: None, *, maximum: float = ..., zero: bool = ...
    ) -> float | None: ...

    def seconds(
        self, name: str, default: float | None, *, maximum: float = MAX_WAIT_S, zero: bool = False
    ) -> float | None:
        """A number of seconds, more than 0 (or 0 itself with ``zero``) and at most ``maximum``."""
        self.numbers[name] = NumberBounds(name, False, 0.0, maximum, zero)

        def parse_seconds(raw: str) -> float:
            try:
                value = float(raw)
            except ValueError:
                raise ValueError(f"{raw!r} is not a number of seconds") from None
            if zero and value == 0:
                return 0.0
            if not value > 0 or value == float("inf"):
                kind = "a number of seconds >= 0" if zero else "a positive number of seconds"
                raise ValueError(f"{raw!r} must be {kind}")
            if value > maximum:
                raise ValueError(
                    f"{shown_number(raw)} is more than {maximum:g} s, the most this setting takes"
                )
            return value

        return self.parse(name, default, parse_seconds)

    def switch(self, name: str, default: bool) -> bool:
        def parse_switch(raw: str) -> bool:
            lowered = raw.lower()
            if lowered in {"on", "true", "1", "yes"}:
                return True
            if lowered in {"off", "false", "0", "no"}:
                return False
            raise ValueError(f"{raw!r} must be 'on' or 'off'")

        return self.parse(name, default, parse_switch)

    def name(self, name: str, default: str) -> str:
        def parse_name(raw: str) -> str:
            if len(raw) > 200 or any(ch.isspace() or not ch.isprintable() for ch in raw):
                raise ValueError("must be at most 200 printable characters without spaces")
            return raw

        return self.parse(name, default, parse_name)


def shown_number(raw: str) -> str:
    """A number as given, quoted, or its first digits when it is long (a line, not a screenful)."""
    return repr(raw) if len(raw) <= 40 else repr(raw[:20] + "...")
