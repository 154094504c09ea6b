"""``response_format`` as a grammar: JSON output, or JSON valid for a schema, via xgrammar.

The tool-call grammar's factory already holds the tokenizer's xgrammar view; this compiles
JSON grammars against it and hands back the same :class:`TokenConstraint` the engine applies.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any

from backends.engine.serve.protocol import APIError

_CACHE_SIZE = 32


class JsonConstraints:
    """Compiled JSON grammars for one tokenizer, cached per schema; safe from any thread."""

    def __init__(self, tool_constraints: Any) -> None:
        import xgrammar

        self._xgr = xgrammar
        self._tokenizer_info = tool_constraints.tokenizer_info
        self._stop_ids = list(tool_constraints.stop_token_ids)
        self._compiler = xgrammar.GrammarCompiler(self._tokenizer_info, cache_enabled=False)
        self._cache: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def for_schema(self, schema: dict[str, Any] | None) -> Any:
        """A fresh constraint for JSON valid under ``schema`` (None: any JSON object).

        A schema xgrammar cannot compile is the client's mistake: a 400 on ``response_format``.
        """
        from backends.engine.model.constraint import TokenConstraint

        key = json.dumps(schema, sort_keys=True)
        with self._lock:
            compiled = self._cache.get(key)
            if compiled is not None:
                self._cache.move_to_end(key)
        if compiled is None:
            compiled = self._compile(schema)
            with self._lock:
                self._cache[key] = compiled
                if len(self._cache) > _CACHE_SIZE:
                    self._cache.popitem(last=False)
        return TokenConstraint(compiled, self._stop_ids)

    def _compile(self, schema: dict[str, Any] | None) -> Any:
        xgr = self._xgr
        try:
            # Compact JSON: small models otherwise fall into endless runs of whitespace.
            return self._compiler.compile_json_schema(
                json.dumps(schema or {"type": "object"}), any_whitespace=False, strict_mode=True
            )
        except (RuntimeError, ValueError, TypeError, xgr.InvalidJSONError) as exc:
            raise APIError(
                f"response_format.json_schema.schema cannot be used as a grammar: {exc}",
                param="response_format",
                code="invalid_value",
            ) from None
