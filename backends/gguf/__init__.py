"""GGUF files: header and model facts, the bundled default model, the LoRA adapter format."""
