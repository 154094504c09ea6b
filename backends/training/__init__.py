"""LoRA fine-tuning of a local GGUF model on chat examples (the ``train`` extra)."""
