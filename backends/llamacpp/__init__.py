"""The llama.cpp backend (llama-cpp-python) and its on-disk prompt-state cache."""
