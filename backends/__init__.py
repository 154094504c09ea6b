"""Backends: turn a chat request into an assistant message (template, decode, parse)."""
