"""The contract's fixed bounds on job arguments, in one place for the jobs, the client and the
tool definitions. The limits an operator may change (budgets, byte and character caps, redirects,
time bounds) are settings, in ``worker.config``."""

from __future__ import annotations

import re

# Letters, digits and -_.: only (ASCII), at most 200: the id becomes part of Redis keys.
REPORT_ID = re.compile(r"[A-Za-z0-9\-_.:]{1,200}")
MAX_URL_LENGTH = 8192
MAX_QUERY_CHARS = 2000
DEFAULT_MAX_RESULTS = 5
MAX_RESULTS = 10
EXTRACT_MODES = ("main", "full")
# A fetched document's whole text is kept (and paged) up to this many characters per format: the
# reduced text of a 2 MiB page or a long PDF fits with room; a longer one is cut, truncated: true.
MAX_DOCUMENT_CHARS = 4_000_000
FIND_CHARS = (1, 200)
MAX_PAGE_OFFSETS = 5000
DEFAULT_EXTRACT = EXTRACT_MODES[0]
# The tools' job names (jobs/fetch/ and jobs/search.py take theirs from here).
FETCH_PAGE = "fetch_page"
WEB_SEARCH = "web_search"
# Citations (jobs/cite): the agent's tool, and the job that checks a dossier.
CITE = "cite"
VERIFY_CITATIONS = "verify_citations"
