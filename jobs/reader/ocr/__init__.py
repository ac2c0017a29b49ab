"""Reading pictures of text: Tesseract over scanned PDF pages and images, inside the PDF child."""
