"""Skills: the tools the agent can call."""
