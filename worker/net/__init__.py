"""HTTP on the wire: the error map, Retry-After and Cache-Control as the fetcher reads them, and serving."""
