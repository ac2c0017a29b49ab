"""html5lib's streaming tokenizer, made fast on ordinary markup and linear on hostile markup.

Still html5lib's WHATWG state machine, with these changes, each equivalent for what the reducer
reads (a test compares the tokens with html5lib's own on random markup):

- Quadratic growth: html5lib grows a tag name, an attribute name or value, or a comment by ``+=``
  on a dict or list slot, a character or an entity at a time; CPython cannot grow such a string in
  place, so a 2 MiB comment of ``-a-a-a`` or an attribute of 400,000 ``&amp;`` copies terabytes.
  Here names and values are read in runs, entity-heavy values are collected in a list, comment
  text is never kept, and a tag keeps at most a few hundred attributes (plus the ones read here).
- Stalls: a run of characters stops at the end of the stream's 10 KB chunk, so no single step of
  the machine handles more than that and the reducer can stop between steps on time; so does a
  CDATA section, which the reducer lets the tokenizer open only in svg and math (``cdata_allowed``).
- Speed: a start or end tag with nothing unusual in it is read by one regular expression instead
  of a dozen state changes; the text of a dropped script or style, and of a comment, is skipped by
  searching for where it ends instead of walking it.

Parse-error tokens are not produced on these paths; nobody here reads them.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable
from typing import Any

from html5lib._inputstream import HTMLUnicodeInputStream
from html5lib._tokenizer import HTMLTokenizer
from html5lib.constants import EOF, asciiUpper2Lower, spaceCharacters, tokenTypes

CHARACTERS = tokenTypes["Characters"]
SPACE_CHARACTERS = tokenTypes["SpaceCharacters"]
START_TAG = tokenTypes["StartTag"]
END_TAG = tokenTypes["EndTag"]
COMMENT = tokenTypes["Comment"]

_TAG_NAME_END = frozenset(spaceCharacters | {"/", ">"})
_ATTRIBUTE_NAME_END = frozenset(spaceCharacters | {"/", "=", ">"})
_DOUBLE_QUOTED_END = frozenset({'"', "&"})
_SINGLE_QUOTED_END = frozenset({"'", "&"})
_UNQUOTED_END = frozenset(spaceCharacters | {"&", ">"})
_DATA_END = ("&", "<", "\u0000")
_MAX_ATTRIBUTES = 256
_CHUNK: int = HTMLUnicodeInputStream._defaultChunkSize  # no single step reads more than a chunk
_READ_ATTRIBUTES = frozenset(
    {
        "hidden",
        "aria-hidden",
        "style",
        "href",
        "class",
        "id",
        "role",
        "itemprop",
        "open",
        "color",
        "face",
        "size",
        "encoding",
        "multiple",
        "selected",
    }
)

# A start or end tag with nothing unusual in it (no character references, no NUL, no stray quote,
# "=", "<" or "/") reads the same to this regular expression as to the state machine, at a tenth of
# the cost; anything else falls back to the states. A test compares the two on random markup.
_WS = "\t\n\x0c\r "
_NAME = f"[^{_WS}/>\x00]*"
_ATTRIBUTE_NAME = f"[^{_WS}/>=\"'<\x00][^{_WS}/>=\"'<\x00]*"


def _value(capture: bool) -> str:
    group = "(" if capture else "(?:"
    return (
        f"[{_WS}]*=[{_WS}]*(?:"
        f'"{group}[^"&\\x00]*)"(?=[{_WS}/>])'
        f"|'{group}[^'&\\x00]*)'(?=[{_WS}/>])"
        f"|{group}[^{_WS}>&\"'<=`\\x00]+)(?=[{_WS}>]))"
    )


_ATTRIBUTE = re.compile(f"[{_WS}]+({_ATTRIBUTE_NAME})(?:{_value(True)})?")
_SIMPLE_START_TAG = re.compile(
    f"([a-zA-Z]{_NAME})((?:[{_WS}]+{_ATTRIBUTE_NAME}(?:{_value(False)})?)*)[{_WS}]*(/?)>"
)
_SIMPLE_END_TAG = re.compile(f"([a-zA-Z]{_NAME})[{_WS}]*>")
# Where raw text ends: the element's end tag, or, in a script, "<!--", after which the standard's
# escaped states decide and the state machine takes over.
_RAW_TEXT_END: dict[str, re.Pattern[str]] = {}
_RUNS: dict[tuple[Any, bool], re.Pattern[str]] = {}
_SCRIPT_ESCAPE = "<!--"


class _TextReader:
    """The decoded page as the stream html5lib reads from: slices of the one string, no copy
    (io.StringIO would first copy a 2 MiB page into a buffer of its own, in one go)."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._position = 0

    def read(self, size: int = -1) -> str:
        start = self._position
        end = len(self._text) if size < 0 else min(len(self._text), start + size)
        self._position = end
        return self._text[start:end]

    def tell(self) -> int:
        return self._position

    def seek(self, position: int) -> int:
        self._position = max(0, min(position, len(self._text)))
        return self._position


def _no_nul(run: str) -> str:
    # As the standard's states do: a NUL in a name or a value reads as U+FFFD.
    return run.replace("\x00", "\ufffd") if "\x00" in run else run


class _Discard:
    """Comment text: appended to, never kept."""

    def __iadd__(self, other: object) -> _Discard:
        return self

    def __str__(self) -> str:
        return ""


_DISCARD = _Discard()


class _Pieces:
    """An attribute value that entities grow piece by piece: kept as a list, joined once."""

    __slots__ = ("parts",)

    def __init__(self, first: str) -> None:
        self.parts = [first]

    def __iadd__(self, other: str) -> _Pieces:
        self.parts.append(other)
        return self

    def __str__(self) -> str:
        return "".join(self.parts)


class StreamingTokenizer(HTMLTokenizer):  # type: ignore[misc]
    """Tokens of one decoded document; the reducer calls ``state()`` and drains ``tokenQueue``."""

    def __init__(self, text: str) -> None:
        # Newlines are normalized up front (the stream would do it chunk by chunk), so that a position
        # in the stream is a position in ``text`` and the skips below can search ``text`` directly.
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        super().__init__(_TextReader(text))
        self._text = text
        # The per-chunk scan for invalid code points only feeds parse errors; skip it.
        self.stream.reportCharacterErrors = None
        # A run of characters stops at the end of the stream's 10 KB chunk instead of reading on:
        # one state call then never handles more than a chunk, so a 2 MiB attribute value or text
        # run cannot keep the event loop waiting. Every state that reads runs loops until done.
        self.stream.charsUntil = self._chars_until
        self.tokenQueue: deque[dict[str, Any]] = deque()
        self._pieces = False
        self._skip_end: re.Pattern[str] | None = None
        self._skip_script = False
        self._skip_then: Any = None
        # Whether the current node is svg or math: only there is "<![CDATA[" a CDATA section (the
        # tree builder knows; html5lib's tokenizer asks its parser, which this one does not have).
        self.cdata_allowed: Callable[[], bool] = _never

    # Positions and jumps -----------------------------------------------------------------------

    def _chars_until(self, characters: Any, opposite: bool = False) -> str:
        stream = self.stream
        if stream.chunkOffset >= stream.chunkSize and not stream.readChunk():
            return ""
        key = (characters, opposite)
        pattern = _RUNS.get(key)
        if pattern is None:
            escaped = "".join(f"\\x{ord(c):02x}" for c in characters)
            pattern = _RUNS[key] = re.compile(f"[{escaped}]+" if opposite else f"[^{escaped}]+")
        match = pattern.match(stream.chunk, stream.chunkOffset)
        if match is None:
            return ""
        stream.chunkOffset = match.end()
        return match.group()

    def _at_chunk_end(self) -> bool:
        return bool(self.stream.chunkOffset >= self.stream.chunkSize)

    def _position(self) -> int:
        stream = self.stream
        position: int = stream.dataStream.tell() - stream.chunkSize + stream.chunkOffset
        return position

    def _jump(self, position: int) -> None:
        stream = self.stream
        stream.dataStream.seek(position)
        stream.chunk = ""
        stream.chunkSize = 0
        stream.chunkOffset = 0

    def skip_raw_text(self, name: str, then: Any) -> None:
        """Skip a dropped raw-text element's content unread, up to its end tag, then go on in ``then``.

        Script, style and the like are the bulk of many pages and their text is never shown; the
        state machine would walk every ``<`` in them. A script containing ``<!--`` is handed to the
        state machine from there on, since its escaped states decide where such a script ends.
        """
        pattern = _RAW_TEXT_END.get(name)
        if pattern is None:
            pattern = _RAW_TEXT_END[name] = re.compile(f"</{re.escape(name)}[{_WS}/>]", re.IGNORECASE)
        self._skip_end = pattern
        self._skip_script = name == "script"
        self._skip_then = then
        self.state = self._skipRawTextState

    def raw_text_ahead(self, name: str, limit: int) -> str | None:
        """The raw text from here to the end tag of ``name`` (a JSON-LD script's), unread by the
        state machine; None when it is longer than ``limit``, which bounds the search too."""
        pattern = _RAW_TEXT_END.get(name)
        if pattern is None:
            pattern = _RAW_TEXT_END[name] = re.compile(f"</{re.escape(name)}[{_WS}/>]", re.IGNORECASE)
        position = self._position()
        found = pattern.search(self._text, position, position + limit + len(name) + 3)
        if found is None:
            return None if position + limit < len(self._text) else self._text[position:]
        return self._text[position : found.start()]

    def _skipRawTextState(self) -> bool:
        assert self._skip_end is not None
        position = self._position()
        found = self._skip_end.search(self._text, position)
        end = found.start() if found is not None else len(self._text)
        if self._skip_script:
            escape = self._text.find(_SCRIPT_ESCAPE, position, end)
            if escape != -1:
                end = escape
        self._jump(end)
        self.state = self._skip_then
        return True

    # Fast paths ------------------------------------------------------------------------------

    def dataState(self) -> bool:
        # html5lib's dataState, except that a "<" goes straight on to the tag instead of returning
        # to the caller's loop first (one loop turn per tag is a good share of the cost).
        stream = self.stream
        data = stream.char()
        if data == "<":
            self.state = self.tagOpenState
            return self.tagOpenState()
        if data == "&":
            self.state = self.entityDataState
        elif data is EOF:
            return False
        elif data in spaceCharacters:
            self.tokenQueue.append(
                {"type": SPACE_CHARACTERS, "data": data + stream.charsUntil(spaceCharacters, True)}
            )
        elif data == "\u0000":
            self.tokenQueue.append({"type": CHARACTERS, "data": data})
        else:
            self.tokenQueue.append({"type": CHARACTERS, "data": data + stream.charsUntil(_DATA_END)})
        return True

    def tagOpenState(self) -> bool:
        stream = self.stream
        offset = stream.chunkOffset
        if offset < stream.chunkSize and stream.chunk[offset] == "/":
            stream.chunkOffset = offset + 1
            self.state = self.closeTagOpenState
            return self.closeTagOpenState()
        match = _SIMPLE_START_TAG.match(stream.chunk, offset)
        if match is None:
            return bool(super().tagOpenState())
        attributes: dict[str, str] = {}
        if match.group(2):
            for name, double, single, bare in _ATTRIBUTE.findall(stream.chunk, match.start(2), match.end()):
                name = name.translate(asciiUpper2Lower)
                if name not in attributes:
                    attributes[name] = double or single or bare
        token = {
            "type": START_TAG,
            "name": match.group(1).translate(asciiUpper2Lower),
            "data": attributes,
            "selfClosing": bool(match.group(3)),
            "selfClosingAcknowledged": False,
        }
        stream.chunkOffset = match.end()
        self.currentToken = token
        self.tokenQueue.append(token)
        self.state = self.dataState
        return True

    def closeTagOpenState(self) -> bool:
        stream = self.stream
        match = _SIMPLE_END_TAG.match(stream.chunk, stream.chunkOffset)
        if match is None:
            return bool(super().closeTagOpenState())
        token = {
            "type": END_TAG,
            "name": match.group(1).translate(asciiUpper2Lower),
            "data": [],
            "selfClosing": False,
        }
        stream.chunkOffset = match.end()
        self.currentToken = token
        self.tokenQueue.append(token)
        self.state = self.dataState
        return True

    def commentState(self) -> bool:
        # Comment text is discarded, so only where it ends matters: at the next "--" the end states
        # decide (">" ends it, "!" may, anything else carries on).
        position = self._position()
        end = self._text.find("--", position)
        if end == -1:
            self._jump(len(self._text))
            self.tokenQueue.append(self.currentToken)
            self.state = self.dataState
        else:
            self._jump(end + 2)
            self.state = self.commentEndState
        return True

    # Linear versions of html5lib's states ------------------------------------------------------

    def tagNameState(self) -> bool:
        run = self.stream.charsUntil(_TAG_NAME_END)
        if run:
            self.currentToken["name"] += _no_nul(run)
            if self._at_chunk_end():
                return True
        return self._after_name(self.stream.char(), self.beforeAttributeNameState)

    def attributeNameState(self) -> bool:
        attribute = self.currentToken["data"][-1]
        run = self.stream.charsUntil(_ATTRIBUTE_NAME_END)
        if run:
            attribute[0] += _no_nul(run)
            if self._at_chunk_end():
                return True
        attribute[0] = attribute[0].translate(asciiUpper2Lower)
        self._bound_attributes()
        data = self.stream.char()
        if data == "=":
            self.state = self.beforeAttributeValueState
            return True
        return self._after_name(data, self.afterAttributeNameState)

    def _after_name(self, data: object, otherwise: Callable[[], bool]) -> bool:
        """The character after a tag's or an attribute's name: the tag ends, closes itself, the
        input ends, or ``otherwise`` reads on."""
        if data == ">":
            self.emitCurrentToken()
        elif data == "/":
            self.state = self.selfClosingStartTagState
        elif data is EOF:
            self.state = self.dataState
        else:
            self.state = otherwise
        return True

    def attributeValueDoubleQuotedState(self) -> bool:
        return self._quoted_value(_DOUBLE_QUOTED_END, '"')

    def attributeValueSingleQuotedState(self) -> bool:
        return self._quoted_value(_SINGLE_QUOTED_END, "'")

    def _quoted_value(self, until: frozenset[str], quote: str) -> bool:
        run = self.stream.charsUntil(until)
        if run:
            self.currentToken["data"][-1][1] += _no_nul(run)
            if self._at_chunk_end():
                return True
        data = self.stream.char()
        if data == quote:
            self.state = self.afterAttributeValueState
        elif data == "&":
            self.processEntityInAttribute(quote)
        else:
            self.state = self.dataState
        return True

    def attributeValueUnQuotedState(self) -> bool:
        run = self.stream.charsUntil(_UNQUOTED_END)
        if run:
            self.currentToken["data"][-1][1] += _no_nul(run)
            if self._at_chunk_end():
                return True
        data = self.stream.char()
        if data == "&":
            self.processEntityInAttribute(">")
        elif data == ">":
            self.emitCurrentToken()
        elif data is EOF:
            self.state = self.dataState
        else:
            self.state = self.beforeAttributeNameState
        return True

    def processEntityInAttribute(self, allowedChar: str) -> None:
        attribute = self.currentToken["data"][-1]
        if isinstance(attribute[1], str):
            attribute[1] = _Pieces(attribute[1])
            self._pieces = True
        self.consumeEntity(allowedChar=allowedChar, fromAttribute=True)

    def emitCurrentToken(self) -> None:
        token = self.currentToken
        if self._pieces and token["type"] == START_TAG:
            for attribute in token["data"]:
                if isinstance(attribute[1], _Pieces):
                    attribute[1] = str(attribute[1])
            self._pieces = False
        super().emitCurrentToken()

    def _bound_attributes(self) -> None:
        # A tag with a million attributes becomes one dict of a million entries, built in one go
        # when the tag ends. Past the first few hundred, only an attribute this reducer reads (and
        # has not seen on this tag) is kept, so "hidden" at position 100,001 still hides.
        attributes = self.currentToken["data"]
        if len(attributes) <= _MAX_ATTRIBUTES:
            return
        name = attributes[-1][0]
        if name not in _READ_ATTRIBUTES or any(kept[0] == name for kept in attributes[:-1]):
            attributes[-1] = ["", ""]
            if attributes[-2][0] == "":
                del attributes[-2]

    def bogusCommentState(self) -> bool:
        # "<!x ...>" and "<?x ...>" end at the next ">", whatever lies between; found in one search.
        position = self._position()
        end = self._text.find(">", position)
        self._jump(len(self._text) if end == -1 else end + 1)
        self.tokenQueue.append({"type": COMMENT, "data": ""})
        self.state = self.dataState
        return True

    def markupDeclarationOpenState(self) -> bool:
        position = self._position()
        if self._text.startswith("[CDATA[", position) and self.cdata_allowed():
            self._jump(position + len("[CDATA["))
            self.state = self.cdataSectionState
            return True
        result: bool = super().markupDeclarationOpenState()
        token = self.currentToken
        if token is not None and token["type"] == COMMENT and token["data"] == "":
            token["data"] = _DISCARD
        return result

    def cdataSectionState(self) -> bool:
        # html5lib reads up to "]]>" with two runs and asserts that a ">" follows the second, which
        # fails when a run stops at the end of a chunk. Here the end is searched for within the
        # next chunk only, and the text goes out a chunk at a time, like every other run.
        position = self._position()
        limit = min(position + _CHUNK, len(self._text))
        end = self._text.find("]]>", position, limit + 2)
        data = _no_nul(self._text[position : limit if end == -1 else end])
        if data:
            self.tokenQueue.append({"type": CHARACTERS, "data": data})
        if end != -1:
            self._jump(end + len("]]>"))
            self.state = self.dataState
        else:
            self._jump(limit)
            if limit == len(self._text):
                self.state = self.dataState
        return True


def _never() -> bool:
    return False
