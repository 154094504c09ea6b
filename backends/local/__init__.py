"""The steps every local backend shares, server-side: chat template, tool-call format and
grammar, output parsing, stop strings, runaway detection, the on-disk cache folder."""
