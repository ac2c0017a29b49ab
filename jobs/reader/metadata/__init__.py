"""A page's metadata (headline, dates, authors, site, language...) read from what it declares.

declarations.py collects the declarations while the reducer streams the page; jsonld.py reads
JSON-LD; dates.py, values.py and headline.py turn page-written strings into bounded values;
page.py and pdf.py apply the documented precedence (docs/metadata.md) for an HTML page and a PDF;
xmp.py reads a PDF's XMP packet inside the confined PDF child.
"""
