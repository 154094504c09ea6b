"""`agent web`: a local web page to chat with the agent, answer its asks and read traces."""
