"""What a Markdown renderer would turn a string into: images, links and raw HTML tags with URLs.

Streamlit renders ``st.markdown`` / captions / labels with a CommonMark parser
(raw HTML passes only with ``unsafe_allow_html``).  markdown-it-py is a
CommonMark parser too: like Streamlit's, it treats ``\\r\\n`` and a lone ``\\r``
as line ends, so ``\\r\\r`` is a blank line that ends a raw HTML block.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

from markdown_it import MarkdownIt

# GFM turns bare URLs and www. names into links even without brackets
BARE_URL_RE = re.compile(r"(?i)\b(?:https?|ftp)://|\bwww\.")


class _TagCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, {k: v or "" for k, v in attrs}))

    handle_startendtag = handle_starttag


@dataclass
class Rendered:
    images: list[str] = field(default_factory=list)  # markdown images and <img> tags: src
    links: list[str] = field(default_factory=list)  # markdown links, autolinks and <a> tags: href
    html_tags: list[str] = field(default_factory=list)  # every raw HTML tag name the renderer would keep

    def urls(self) -> list[str]:
        return self.images + self.links


def render(text: str, allow_html: bool) -> Rendered:
    md = MarkdownIt("commonmark", {"html": allow_html}).enable(["table", "strikethrough"])
    out = Rendered()

    def html_chunk(source: str) -> None:
        collector = _TagCollector()
        collector.feed(source)
        for tag, attrs in collector.tags:
            out.html_tags.append(tag)
            if tag == "img" or "src" in attrs or "srcset" in attrs:
                out.images.append(attrs.get("src", "") or attrs.get("srcset", ""))
            if "href" in attrs:
                out.links.append(attrs["href"])

    def walk(tokens) -> None:
        for token in tokens:
            if token.type == "image":
                out.images.append(str(token.attrGet("src")))
            elif token.type == "link_open":
                out.links.append(str(token.attrGet("href")))
            elif token.type in ("html_block", "html_inline"):
                html_chunk(token.content)
            if token.children:
                walk(token.children)

    walk(md.parse(text))
    return out


def bare_urls(source: str) -> list[str]:
    """What GFM's autolink literal would link (it reads the source: a backslash-escaped URL stays text)."""
    return BARE_URL_RE.findall(source)


def text_of(text: str) -> str:
    """The visible text (tags stripped, entities decoded) a Markdown string renders to."""
    html = MarkdownIt("commonmark").render(text)

    class _Text(HTMLParser):
        def __init__(self):
            super().__init__(convert_charrefs=True)
            self.parts: list[str] = []

        def handle_data(self, data):
            self.parts.append(data)

    parser = _Text()
    parser.feed(html)
    return "".join(parser.parts)
