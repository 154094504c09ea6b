"""The resident engine: one process that keeps the engine loaded for short-lived runs."""
