"""The command line: the only place that wires concrete parts together."""
