"""The search providers web_search can ask: OpenRouter (its web plugin or its server tool) and SearXNG."""
