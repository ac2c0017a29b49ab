"""HTTP as the fetcher and the providers read it: the error map, Retry-After and Cache-Control."""
