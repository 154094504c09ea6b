"""A fetched body as text the model reads: HTML as its readable text, other text as it is.

HTML goes through trafilatura (the ``web`` extra), which keeps a page's main text and drops
navigation, boilerplate, scripts and styles. Without it, or when it finds no main text, a
plain pass with the standard library's ``html.parser`` keeps every visible text and drops
scripts, styles and the like.
"""

from __future__ import annotations

import codecs
import re
from html.parser import HTMLParser

_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)
# Their content is never text a reader sees.
_HIDDEN = frozenset({"script", "style", "noscript", "template", "svg", "math", "iframe", "object"})
_BLOCKS = frozenset(
    {
        *("p", "div", "section", "article", "main", "header", "footer", "nav", "aside"),
        *("h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "dl", "dt", "dd"),
        *("table", "tr", "pre", "blockquote", "figure", "figcaption", "form", "br", "hr"),
        *("title", "body", "address", "details", "summary"),
    }
)


def is_html(content_type: str, body: bytes) -> bool:
    """HTML by its type, or by its first bytes when the server named no type."""
    if content_type:
        return content_type in _HTML_TYPES
    start = body[:512].lstrip().lower()
    return start.startswith((b"<!doctype html", b"<html"))


def decode(body: bytes, charset: str | None, html: bool) -> str:
    """The body as text: the declared charset, else an HTML page's own, else UTF-8."""
    for candidate in (charset, _meta_charset(body) if html else None):
        if candidate and _known(candidate):
            return body.decode(candidate, errors="replace")
    return body.decode("utf-8", errors="replace")


def readable(html: str, url: str) -> str:
    """The readable text of an HTML page: its title and main text."""
    try:
        import trafilatura
    except ImportError:
        return strip_tags(html)
    text = trafilatura.extract(
        html, url=url, include_comments=False, include_tables=True, favor_recall=True
    )
    if not text:
        return strip_tags(html)
    title = _title(html)
    return f"{title}\n\n{text}" if title and not text.startswith(title) else text


def strip_tags(html: str) -> str:
    """Every visible text of an HTML page, blocks on lines of their own (standard library)."""
    parser = _TextParser()
    parser.feed(html)
    parser.close()
    lines = (" ".join(line.split()) for line in "".join(parser.out).splitlines())
    text = "\n".join(line for line in lines if line)
    title = " ".join(parser.title.split())
    return f"{title}\n\n{text}" if title and not text.startswith(title) else text


class _TextParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.title = ""
        self._hidden: list[str] = []  # the hidden elements open now, innermost last
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        elif tag in _HIDDEN:
            self._hidden.append(tag)
        elif tag in _BLOCKS and not self._hidden:
            self.out.append("\n")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _BLOCKS and not self._hidden:
            self.out.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        elif tag in self._hidden:
            # Close up to the matching element (an unclosed one inside does not stay open).
            while self._hidden and self._hidden.pop() != tag:
                pass
        elif tag in _BLOCKS and not self._hidden:
            self.out.append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif not self._hidden:
            self.out.append(data)


def _title(html: str) -> str:
    match = re.search(r"<title[^>]*>(.*?)</title>", html, re.I | re.S)
    if match is None:
        return ""
    parser = _TextParser()
    parser.feed(match.group(1))
    return " ".join("".join(parser.out).split())


def _meta_charset(body: bytes) -> str | None:
    match = _META_CHARSET.search(body[:4096])
    return match.group(1).decode("ascii") if match else None


def _known(charset: str) -> bool:
    try:
        codecs.lookup(charset)
    except LookupError:
        return False
    return True
