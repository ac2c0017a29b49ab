"""The reader: bytes and a Content-Type to readable text (``document.build_document`` is the entry).

content_types decides what a body is, charset decodes it, and cpu_budget paces every step under
one CPU budget. For HTML, html/ holds the tokenizer and the reducer that turns markup into blocks
of visible text; main_content chooses the article among the blocks. hidden holds the rules for
text a reader would not see, links resolves the page's links, and pdf/ reads PDFs in confined
child processes. formats renders the chosen text as plain text or as Markdown (markdown, with
markdown_escape keeping the page's text literal). docs/reader.md tells it in full.
"""
