"""HTML to blocks: the tokenizer and the streaming reducer with its parts (open elements, foreign, seen)."""
