"""Office documents (DOCX, XLSX, PPTX, ODT, ODS, ODP) to Markdown and text, inside the PDF child."""
