"""The sandbox: permission rules, approvals and the OS sandbox around every action."""
