"""The core of clawloop: wire-format messages, events, the backend and tool protocols, the loop."""
