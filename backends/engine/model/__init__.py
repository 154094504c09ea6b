"""The engine's model side: the runner that executes a step, the transformer and its layers,
attention over the paged KV, sampling, grammar masks and verification of drafted tokens."""
