"""The chat prompts the engine is compared with transformers on.

Shared by tests/engine/test_model_parity.py, tests/engine/test_weight_parity.py (these and more)
and bench/gpu_parity.py, so the CPU tests and the GPU check speak of the same prompts.
"""

from __future__ import annotations

PROMPTS = [
    "What is the capital of France?",
    "Write a short poem about the sea.",
    "List three prime numbers.",
    "Explain what a CPU cache is.",
    "Translate 'good morning' into Spanish.",
    "def fibonacci(n):",
    "Give me a tip for learning Python.",
    "Why is the sky blue?",
]
