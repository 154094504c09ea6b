"""Text made safe to show in a terminal or a chat: control characters shown, never obeyed.

A command's output, a file name, an MCP server's stderr or an audit entry can hold bytes a
terminal acts on: ESC sequences that erase lines and move the cursor (hiding what ran), OSC 52
(which writes the user's clipboard), OSC 8 (links whose text lies about their target), or a
bare carriage return that overwrites a line. :func:`terminal_safe` is the one function every
printer of clawloop passes such text through. It keeps newline and tab and writes every other
C0 control, DEL and every C1 control in caret notation (``ESC`` becomes ``^[``, the 8-bit CSI
``0x9b`` becomes ``^[[``), so the user sees that something was there and no terminal acts on
it. Once no ESC, BEL or C1 byte is left, no CSI, OSC, DCS or other sequence can begin or end,
whatever follows it. Unicode direction overrides and isolates (which make a terminal draw
text in another order than it is read, the "Trojan Source" trick) are shown as ``<U+202E>``.

``raw_output`` (``--raw``, or ``raw_output = true`` in the config) turns this off for a user
who wants a command's colours and knows what runs.
"""

from __future__ import annotations

_CARET = {c: f"^{chr(c + 0x40)}" for c in range(0x20) if c not in (0x09, 0x0A)}
_CARET[0x7F] = "^?"
# C1 controls are the 8-bit form of ESC followed by 0x40-0x5f.
_C1 = {c: f"^[{chr(c - 0x40)}" for c in range(0x80, 0xA0)}
_BIDI = [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_TABLE = str.maketrans({**_CARET, **_C1, **{c: f"<U+{c:04X}>" for c in _BIDI}})

_raw = False


def set_raw_output(raw: bool) -> None:
    """Show text as it is (``--raw``); for this process's terminal printers only."""
    global _raw
    _raw = raw


def raw_output() -> bool:
    """Whether ``--raw`` (or ``raw_output`` in the config) is in effect."""
    return _raw


def escape_controls(text: str) -> str:
    """``text`` with every control character but newline and tab shown in caret notation.

    A CRLF line ending becomes a plain newline rather than ``^M``.
    """
    return text.replace("\r\n", "\n").translate(_TABLE)


def terminal_safe(text: str) -> str:
    """``text`` for a terminal: :func:`escape_controls`, unless raw output was asked for."""
    return text if _raw else escape_controls(text)
