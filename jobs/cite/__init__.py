"""Citations: quotes checked against what a report fetched (docs/citations.md)."""
