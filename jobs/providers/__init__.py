"""The search providers web_search can ask: OpenRouter (its web plugin or its server tool) and SearXNG.

``open_providers`` builds the configured primary and optional fallback once per worker; the
OpenRouter client is shared when both are OpenRouter's.
"""
