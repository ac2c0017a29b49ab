"""JSON schemas of the agent frameworks' tool formats, written from each format's documentation.

OpenAI's function calling (Chat Completions ``tools``): a list of ``{"type": "function",
"function": {"name", "description", "parameters"}}``, the name 1-64 of ``a-z A-Z 0-9 _ -``, the
parameters a JSON Schema object. OpenAI's Responses API (``tools`` of ``responses.create``): the
same function flattened, ``{"type": "function", "name", "description", "parameters", "strict"}``.
An MCP server's ``tools/list`` result (specification 2025-06-18):
``{"tools": [Tool], "nextCursor"?}``, a Tool being ``name``, optional ``title`` and ``description``,
``inputSchema`` (a JSON Schema whose ``type`` is ``"object"``), optional ``outputSchema`` and
``annotations`` (``title`` and four boolean hints) and ``_meta``. Anthropic's Messages API: a list
of ``{"name", "description", "input_schema"}``, the same name rule.

The tool's input schema itself is checked against JSON Schema's own metaschema by the tests.
"""

from __future__ import annotations

from typing import Any

TOOL_NAME: dict[str, Any] = {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$"}

OBJECT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["type"],
    "properties": {
        "type": {"const": "object"},
        "properties": {"type": "object", "additionalProperties": {"type": "object"}},
        "required": {"type": "array", "items": {"type": "string"}},
    },
}

ANTHROPIC_TOOLS: dict[str, Any] = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["name", "description", "input_schema"],
        "additionalProperties": False,
        "properties": {
            "name": TOOL_NAME,
            "description": {"type": "string", "minLength": 1},
            "input_schema": OBJECT_SCHEMA,
        },
    },
}

OPENAI_TOOLS: dict[str, Any] = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["type", "function"],
        "additionalProperties": False,
        "properties": {
            "type": {"const": "function"},
            "function": {
                "type": "object",
                "required": ["name"],
                "additionalProperties": False,
                "properties": {
                    "name": TOOL_NAME,
                    "description": {"type": "string"},
                    "parameters": OBJECT_SCHEMA,
                    "strict": {"type": ["boolean", "null"]},
                },
            },
        },
    },
}

OPENAI_RESPONSES_TOOLS: dict[str, Any] = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["type", "name", "parameters"],
        "additionalProperties": False,
        "properties": {
            "type": {"const": "function"},
            "name": TOOL_NAME,
            "description": {"type": ["string", "null"]},
            "parameters": OBJECT_SCHEMA,
            "strict": {"type": ["boolean", "null"]},
        },
    },
}

MCP_TOOL_ANNOTATIONS: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "title": {"type": "string"},
        "readOnlyHint": {"type": "boolean"},
        "destructiveHint": {"type": "boolean"},
        "idempotentHint": {"type": "boolean"},
        "openWorldHint": {"type": "boolean"},
    },
}

MCP_LIST_TOOLS_RESULT: dict[str, Any] = {
    "type": "object",
    "required": ["tools"],
    "additionalProperties": False,
    "properties": {
        "tools": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "inputSchema"],
                "additionalProperties": False,
                "properties": {
                    "name": {"type": "string", "minLength": 1},
                    "title": {"type": "string"},
                    "description": {"type": "string"},
                    "inputSchema": OBJECT_SCHEMA,
                    "outputSchema": OBJECT_SCHEMA,
                    "annotations": MCP_TOOL_ANNOTATIONS,
                    "_meta": {"type": "object"},
                },
            },
        },
        "nextCursor": {"type": "string"},
        "_meta": {"type": "object"},
    },
}

FORMATS: dict[str, dict[str, Any]] = {
    "anthropic": ANTHROPIC_TOOLS,
    "openai": OPENAI_TOOLS,
    "openai-responses": OPENAI_RESPONSES_TOOLS,
    "mcp": MCP_LIST_TOOLS_RESULT,
}
