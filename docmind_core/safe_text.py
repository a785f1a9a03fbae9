"""Text that came from users, models or documents, made safe for the three places DocMind shows it.

- HTML we build (citation chips and source cards, the timeline, chart hover
  texts): :func:`escape_html`.  Streamlit passes ``st.markdown(...,
  unsafe_allow_html=True)`` through a Markdown parser, and a raw HTML block
  there ends at the first blank line; CommonMark counts ``\\r`` as a line end,
  so ``"\\r\\r"`` in an answer ended our ``<div>`` and the rest was parsed as
  Markdown (a remote image was fetched).  The escaped text therefore contains
  no line end at all: every one becomes ``<br>`` (or a space).
- Streamlit Markdown (``st.markdown`` without HTML, captions, alerts, widget
  and expander labels, tooltips, progress texts): :func:`escape_markdown`
  backslash-escapes every ASCII punctuation character, which CommonMark allows
  for all of them, so no image, link, autolink, HTML tag, heading, list, table,
  LaTeX or Streamlit directive can form, while the text reads the same.
- Terminals (the CLI): :func:`strip_control` removes ANSI CSI/OSC/DCS
  sequences and C0/C1 control characters (``\\n`` and ``\\t`` stay), so a
  question cannot retitle the window, hide lines or plant a hyperlink.
"""

from __future__ import annotations

import re

# Every character a Markdown parser or Python's str.splitlines() treats as a line end.
_LINE_ENDS_RE = re.compile("\r\n|[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
# All ASCII punctuation: CommonMark lets each be backslash-escaped, and only these start Markdown syntax.
_MARKDOWN_PUNCTUATION_RE = re.compile(r"([!-/:-@\[-`{-~])")
_STRING_PAYLOAD = r"[^\x00-\x1f\x7f-\x9f]*(?:\x07|\x1b\\|\x9c)?"  # printable text up to its terminator, if any
_TERMINAL_SEQUENCE_RE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI (colours, cursor moves, clear screen)
    r"|\x9b[0-?]*[ -/]*[@-~]"  # the same as one 8-bit C1 character
    rf"|\x1b[\]PX^_]{_STRING_PAYLOAD}"  # OSC (window title, hyperlinks), DCS, SOS, PM, APC
    rf"|[\x9d\x90\x98\x9e\x9f]{_STRING_PAYLOAD}"  # their 8-bit forms
    r"|\x1b[ -/]*[0-~]"  # any other escape sequence (charset switches, reset ...)
)
# C0 and C1 controls except \t and \n, DEL, and the bidi overrides that reorder what a terminal shows.
_CONTROL_RE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def normalise_newlines(text: str) -> str:
    """``\\r\\n``, lone ``\\r`` and the other line separators (U+2028/9, \\x0b, \\x0c, \\x85 ...) as ``\\n``."""
    return _LINE_ENDS_RE.sub("\n", str(text))


_HTML_SPECIAL = {ord("&"): "&amp;", ord("<"): "&lt;", ord(">"): "&gt;", ord('"'): "&quot;", ord("'"): "&#x27;"}
# Markdown punctuation written as numeric entities too: a browser shows the character, but should the HTML ever
# be parsed as Markdown after all (a block that does not start with a tag), no link, image or emphasis forms.
_HTML_AND_MARKDOWN = {**_HTML_SPECIAL, **{ord(c): f"&#{ord(c)};" for c in "[]*_`~$:\\|"}}


def escape_html(text: object, newlines: str = "<br>", markdown_inert: bool = True) -> str:
    """HTML-escaped text on one line: every line end becomes ``newlines`` (``" "`` inside attributes).

    ``markdown_inert=False`` leaves Markdown punctuation as it is, for HTML no
    Markdown parser sees (Plotly hover texts).
    """
    table = _HTML_AND_MARKDOWN if markdown_inert else _HTML_SPECIAL
    return normalise_newlines(str(text)).translate(table).replace("\n", newlines)


def escape_markdown(text: object) -> str:
    """Text for any Streamlit Markdown sink, shown as it is: nothing in it becomes markup."""
    return _MARKDOWN_PUNCTUATION_RE.sub(r"\\\1", normalise_newlines(str(text)))


def strip_control(text: object, single_line: bool = False) -> str:
    """Text safe to print on a terminal; ``single_line`` also turns newlines and tabs into spaces."""
    cleaned = _CONTROL_RE.sub("", _TERMINAL_SEQUENCE_RE.sub("", normalise_newlines(str(text))))
    if single_line:
        cleaned = cleaned.replace("\n", " ").replace("\t", " ")
    return cleaned


_JSON_UNSAFE_RE = re.compile("[\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def terminal_json(text: str) -> str:
    """JSON text (``json.dumps`` output) with the characters it leaves raw written as ``\\uXXXX`` escapes.

    ``json.dumps`` always escapes C0 controls, but with ``ensure_ascii=False``
    it prints DEL, C1 controls (8-bit CSI/OSC) and bidi overrides as they are.
    These can only occur inside JSON strings, where the escape means the same.
    """
    return _JSON_UNSAFE_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
