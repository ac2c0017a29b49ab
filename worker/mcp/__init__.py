"""``research-worker mcp``: the tools served over the Model Context Protocol (docs/mcp.md).

``tools`` builds the SDK server whose calls go through ``ResearchClient`` like any job;
``stdio`` serves it to one local host process; ``http`` serves it over streamable HTTP behind
bearer tokens (``tokens``), an Origin check, a per-token rate limit and a body bound.
"""
