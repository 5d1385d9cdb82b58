"""Export a budget profile for other tools (``evolalloc export --format NAME``)."""
