"""The engine's weights: reading them from GGUF and Hugging Face folders, their quantised
forms and the native kernels that multiply by them."""
