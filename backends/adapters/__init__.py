"""LoRA adapters shipped for the bundled model (see docs/flywheel.md for how each was made)."""
