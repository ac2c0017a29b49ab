"""The reader: bytes and a Content-Type to readable text (``document.build_document`` is the entry).

content_types decides what a body is, charset decodes it, tokens and reduce turn HTML into blocks
of visible text, main_content chooses the article among them, links harvests the page's links,
hidden holds the rules for what a reader would not see, and pdf reads PDFs.
"""
