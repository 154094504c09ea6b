"""The built-in ``web`` skill: fetch a page as readable text, and search a configured engine."""
