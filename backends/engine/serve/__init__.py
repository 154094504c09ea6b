"""An OpenAI-compatible HTTP server over one bundled engine (``agent serve``)."""
