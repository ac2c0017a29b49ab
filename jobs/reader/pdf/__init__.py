"""PDFs to text: PDFium in confined child processes, their pool and wire format, hidden-text rules."""
