"""The engine's core: sequences, KV blocks, the scheduler and the step loop. Integers and
lists only: nothing here imports torch, so all of it is tested without a model."""
