"""HTTP on the wire: the error map, Retry-After and Cache-Control as the fetcher reads them, serving,
and how a response is read as a browser reads it (``browser_http``, which the guardian's connector
builds on, so it stands in the foundation's layer)."""
