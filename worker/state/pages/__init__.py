"""Pages kept in Redis: the shared page cache and its flights, its entries, and the kept documents."""
