"""fetch_page, in the order a fetch reads: the request and its arguments (``request``), the tool
that validates, checks the menu, charges, serves and reads (``tool``), the network side under a
host's turn and a time bound (``network``, its redirects judged by the report's rule in ``hops``),
the page made from the response (``page``), and the hand-off to a render worker (``handoff``)."""
