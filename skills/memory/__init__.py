"""The built-in ``memory`` skill: what the assistant keeps about its user, in plain files."""
