"""What a job does: web_search, fetch_page, and the reducer that turns HTML into readable text."""
