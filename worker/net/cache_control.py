"""Cache-Control, read only for what the shared page cache must obey: ``no-store`` and ``private``.

The header is chosen by the server, so it is hostile input: any characters, any length, a quoted
string left open. A reading that is unsure errs toward not storing: an unterminated quoted string
or a header longer than any real one makes the page uncacheable, and nothing here raises. Only
directive names count, so a quoted argument that spells ``no-store`` (``ext="no-store"``) is not
the directive, while ``private="Set-Cookie"`` (private for some fields) is treated as private.

Other directives are deliberately not obeyed: the cache keeps what an agent read for a report's
working session (``RESEARCH_CACHE_TTL_S``), the way a crawler does, rather than serving browsers;
``no-cache`` and ``max-age=0`` ask for revalidation, which a research reading does not need.
A hand-written tokenizer, because the only thing needed is the set of directive names.
"""

from __future__ import annotations

FORBIDDING = frozenset({"no-store", "private"})
# Real Cache-Control values are a few dozen characters; past this the header is not worth reading.
MAX_CHARS = 4096


def may_store(value: str | None) -> bool:
    """True when a response with this Cache-Control value (None: no header) may enter the cache."""
    if value is None:
        return True
    if len(value) > MAX_CHARS:
        return False
    names = directive_names(value)
    return names is not None and not names & FORBIDDING


def directive_names(value: str) -> frozenset[str] | None:
    """The lower-cased directive names of a Cache-Control value; None when a quoted string never closes."""
    names: set[str] = set()
    name: list[str] = []
    in_name = True
    quoted = escaped = False
    for ch in value:
        if quoted:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                quoted = False
        elif ch == '"':
            quoted = True
        elif ch == ",":
            names.add("".join(name).strip().lower())
            name, in_name = [], True
        elif ch == "=":
            in_name = False
        elif in_name:
            name.append(ch)
    if quoted:
        return None
    names.add("".join(name).strip().lower())
    names.discard("")
    return frozenset(names)
