"""GBNF for JSON valid under a schema, from llama.cpp's converter, made strict.

llama-cpp-python's converter (``json_schema_to_gbnf``) differs from JSON in one rule: its
string character is ``[^"\\]``, so a raw newline or tab inside a string is allowed, and a
model that writes one produces text no JSON parser takes ("Invalid control character"). The
rule is replaced here by JSON's own (and llama.cpp's C++ converter's): no character below
U+0020 and no DEL unescaped. Whitespace between tokens is removed too: small models otherwise
wander into runs of it.
"""

from __future__ import annotations

import re

# JSON's string character: anything but a quote, a backslash or a control character, or an escape.
JSON_CHAR_RULE = r'char ::= [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})'


def json_gbnf(schema_json: str) -> str:
    """GBNF rules (``root`` first) for compact JSON valid under the schema ``schema_json``.

    Raises what llama.cpp's converter raises for a schema it cannot take.
    """
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    rules = json_schema_to_gbnf(schema_json)
    rules = re.sub(r"^char ::= .*$", lambda _: JSON_CHAR_RULE, rules, flags=re.M)
    return re.sub(r"^space ::= .*$", 'space ::= ""', rules, flags=re.M)
