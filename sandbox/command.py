"""A small shell lexer: splits a command line into words and operators, the way bash would.

Permission rules for ``shell`` are matched against these tokens, never against raw text, so
``git status; rm -rf ~`` is two commands, not one that starts with ``git status``. Features a
rule cannot see through (command and process substitution, here-documents) are flagged.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Longest first, so ``&&`` wins over ``&``.
_OPERATORS = sorted(
    [
        "&&",
        "||",
        ";;",
        "|&",
        ">>",
        ">&",
        "<&",
        "&>",
        "&>>",
        ">|",
        "<<<",
        "<<-",
        "<<",
        "<>",
        ";",
        "&",
        "|",
        "<",
        ">",
        "(",
        ")",
        "\n",
    ],
    key=len,
    reverse=True,
)
CONTROL = frozenset({"&&", "||", ";;", "|&", ";", "&", "|", "(", ")", "\n"})
_OP_CHARS = frozenset(";&|<>()\n")


@dataclass(slots=True, frozen=True)
class Token:
    """One word (quotes removed) or one operator."""

    text: str
    op: bool = False
    quoted: bool = False  # some part was quoted or escaped: glob characters are literal


@dataclass(slots=True)
class ParsedCommand:
    """A command line as tokens, split into simple commands at control operators."""

    text: str
    tokens: list[Token]
    segments: list[list[Token]] = field(default_factory=list)  # words, redirections removed
    controls: list[str] = field(default_factory=list)  # the operators between segments
    hidden: list[str] = field(default_factory=list)  # bodies of $(...) and `...`
    complex: str | None = None  # why no allow rule can match it implicitly
    error: str | None = None

    @property
    def simple(self) -> bool:
        """One command, no operators, nothing hidden."""
        return self.complex is None and self.error is None and not any(t.op for t in self.tokens)


def parse_command(text: str) -> ParsedCommand:
    """Tokenize ``text``; never raises (a lexing problem is recorded in ``error``)."""
    lexer = _Lexer(text)
    try:
        lexer.run()
    except ValueError as exc:
        parsed = ParsedCommand(text, lexer.tokens, error=str(exc), complex=str(exc))
        return parsed
    parsed = ParsedCommand(text, lexer.tokens, hidden=lexer.hidden, complex=lexer.complex)
    _split(parsed)
    return parsed


def _split(parsed: ParsedCommand) -> None:
    current: list[Token] = []
    skip_next = False
    for tok in parsed.tokens:
        if skip_next and not tok.op:
            skip_next = False
            continue
        skip_next = False
        if tok.op and tok.text in CONTROL:
            if current:
                parsed.segments.append(current)
            current = []
            parsed.controls.append(tok.text)
        elif tok.op:  # a redirection: drop it and its target word
            skip_next = True
            if current and current[-1].text.isdigit() and not current[-1].quoted:
                current.pop()  # the fd number in ``2>file``
        else:
            current.append(tok)
    if current:
        parsed.segments.append(current)


class _Lexer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.tokens: list[Token] = []
        self.hidden: list[str] = []
        self.complex: str | None = None
        self.word: list[str] = []
        self.in_word = False
        self.quoted = False

    def flag(self, reason: str) -> None:
        self.complex = self.complex or reason

    def end_word(self) -> None:
        if self.in_word:
            self.tokens.append(Token("".join(self.word), quoted=self.quoted))
        self.word, self.in_word, self.quoted = [], False, False

    def run(self) -> None:
        text = self.text
        while self.i < len(text):
            ch = text[self.i]
            if ch in " \t":
                self.end_word()
                self.i += 1
            elif ch == "#" and not self.in_word:
                end = text.find("\n", self.i)
                self.i = len(text) if end < 0 else end
            elif ch in _OP_CHARS:
                self.end_word()
                self.operator()
            elif ch == "\\":
                self.in_word = self.quoted = True
                if self.i + 1 < len(text) and text[self.i + 1] != "\n":
                    self.word.append(text[self.i + 1])
                self.i += 2
            elif ch == "'":
                end = text.find("'", self.i + 1)
                if end < 0:
                    raise ValueError("an unclosed single quote")
                self.word.append(text[self.i + 1 : end])
                self.in_word = self.quoted = True
                self.i = end + 1
            elif ch == '"':
                self.double_quoted()
            elif ch == "`" or text.startswith("$(", self.i):
                self.substitution()
            else:
                self.word.append(ch)
                self.in_word = True
                self.i += 1
        self.end_word()

    def operator(self) -> None:
        for op in _OPERATORS:
            if self.text.startswith(op, self.i):
                if op in ("<", ">") and self.text.startswith("(", self.i + 1):
                    self.flag("process substitution")
                if op.startswith("<<") and op != "<<<":
                    self.flag("a here-document")
                self.tokens.append(Token(op, op=True))
                self.i += len(op)
                return
        raise ValueError(f"an unexpected character {self.text[self.i]!r}")  # pragma: no cover

    def double_quoted(self) -> None:
        self.in_word = self.quoted = True
        self.i += 1
        text = self.text
        while self.i < len(text):
            ch = text[self.i]
            if ch == '"':
                self.i += 1
                return
            if ch == "\\" and self.i + 1 < len(text) and text[self.i + 1] in '$`"\\\n':
                self.word.append(text[self.i + 1])
                self.i += 2
            elif ch == "`" or text.startswith("$(", self.i):
                self.substitution()
            else:
                self.word.append(ch)
                self.i += 1
        raise ValueError("an unclosed double quote")

    def substitution(self) -> None:
        """Record ``$(...)`` or a backtick body; the word keeps its raw text."""
        text = self.text
        self.flag("command substitution")
        if text[self.i] == "`":
            end = text.find("`", self.i + 1)
            if end < 0:
                raise ValueError("an unclosed backtick")
            body, stop = text[self.i + 1 : end], end + 1
        else:
            depth, j = 1, self.i + 2
            while j < len(text) and depth:
                depth += {"(": 1, ")": -1}.get(text[j], 0)
                j += 1
            if depth:
                raise ValueError("an unclosed $(")
            body, stop = text[self.i + 2 : j - 1], j
        self.hidden.append(body)
        self.word.append(text[self.i : stop])
        self.in_word = self.quoted = True
        self.i = stop
