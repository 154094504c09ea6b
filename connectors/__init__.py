"""Chat connectors that bring messages in."""
