"""The sandbox: permission rules, the data-flow gate's checks, and the OS sandbox (bubblewrap)
around every command. Asking a person is not here: agent/approvals.py and skills/guard.py."""
