"""The reader: bytes and a Content-Type to readable text (``document.build_document`` is the entry).

content_types decides what a body is, charset decodes it, and cpu_budget paces every step under
one CPU budget. For HTML, tokens reads the markup and reduce turns it into blocks of visible text,
with open_elements (where an element ends), foreign (svg and math), visibility (what is on the
screen) and blocks (the text gathered); vocabulary names what a block's bits mean, and
main_content chooses the article among the blocks. hidden holds the rules for text a reader would
not see, links resolves the page's links, and pdf reads PDFs. docs/reader.md tells it in full.
"""
