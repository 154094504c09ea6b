"""What ``agent serve`` drafts for requests that do not ask (the request test is in
test_serve_api.py)."""

from __future__ import annotations

from backends.engine.config import SPECULATE_ON_CPU
from backends.engine.serve.requests import DraftDefaults
from cli.serve_cmd import _draft_defaults


def test_unset_drafts_under_a_grammar_on_the_cpu_only() -> None:
    assert _draft_defaults(None, "cpu") == DraftDefaults(SPECULATE_ON_CPU, 0)
    assert _draft_defaults(None, "cuda") == DraftDefaults(0, 0)
    assert _draft_defaults(None, "cuda:1") == DraftDefaults(0, 0)


def test_a_configured_number_applies_to_every_request() -> None:
    assert _draft_defaults(0, "cpu") == DraftDefaults(0, 0)
    assert _draft_defaults(5, "cuda") == DraftDefaults(5, 5)
