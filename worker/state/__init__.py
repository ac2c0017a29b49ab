"""State in Redis: every key, the queue, budgets, the menu, spend, results, page cache, politeness, health."""
