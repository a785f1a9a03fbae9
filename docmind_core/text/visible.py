"""Text that came from users, models or documents, made safe for every place DocMind shows it.

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
- Plain-text widgets (table cells, option labels): :func:`visible_text`.
- JSON on a terminal: :func:`terminal_json` writes what it would leave raw as
  ``\\uXXXX`` escapes (the data stays the same).

Every one of them first runs :func:`reveal_invisible`: bidi controls, which
reorder what follows (a document named ``invoice\\u202etxt.exe`` read
"invoiceexe.txt"), and invisible characters, which make two names that look
alike differ (a zero-width space in ``al\\u200bice``), are shown as a visible
marker ``<U+202E>`` instead of acting.  Zero-width (non-)joiners stay where
they join two non-ASCII characters (Persian, Indic scripts, emoji sequences
need them) and are marked elsewhere.
"""

from __future__ import annotations

import json
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
# C0 and C1 controls except \t and \n, and DEL (bidi controls are shown as markers: reveal_invisible).
_CONTROL_RE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def normalise_newlines(text: str) -> str:
    """``\\r\\n``, lone ``\\r`` and the other line separators (U+2028/9, \\x0b, \\x0c, \\x85 ...) as ``\\n``."""
    return _LINE_ENDS_RE.sub("\n", str(text))


# Bidi controls (embeddings, overrides, isolates, marks) and characters that show nothing (zero-width space,
# word joiner and invisible operators, BOM, soft hyphen, Hangul fillers, tag characters that can carry hidden
# ASCII).  The joiners U+200C/U+200D are decided by their neighbours (see reveal_invisible).
_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_INVISIBLE = ("\u00ad\u034f\u115f\u1160\u17b4\u17b5\u180e\u200b\u2060-\u2064\u206a-\u206f\u3164\ufeff\uffa0"
              "\U000e0000-\U000e007f")
_JOINERS = "\u200c\u200d"
_HIDDEN_RE = re.compile(f"[{_BIDI}{_INVISIBLE}{_JOINERS}]")


def _marker(char: str) -> str:
    return f"<U+{ord(char):04X}>"


def reveal_invisible(text: object) -> str:
    """Bidi controls and invisible characters as visible ``<U+XXXX>`` markers; joiners kept between two
    non-ASCII, non-space characters, where scripts and emoji sequences use them."""
    text = str(text)

    def shown(match: re.Match) -> str:
        char = match.group()
        if char in _JOINERS:
            before = text[match.start() - 1] if match.start() > 0 else " "
            after = text[match.end()] if match.end() < len(text) else " "
            if all(ord(c) > 0x7F and not c.isspace() and not _HIDDEN_RE.match(c) for c in (before, after)):
                return char
        return _marker(char)

    return _HIDDEN_RE.sub(shown, text)


def visible_text(text: object) -> str:
    """Text for a plain-text widget (a table cell, an option label): nothing in it reorders or hides."""
    return reveal_invisible(text)


def visible_data(value: object) -> object:
    """A JSON-like value (dicts, lists, strings) with every string through :func:`visible_text`: what an MCP
    client (an outside agent, or a person reading its log) receives never reorders or hides text."""
    if isinstance(value, str):
        return visible_text(value)
    if isinstance(value, dict):
        return {key: visible_data(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [visible_data(item) for item in value]
    return value


def visible_rows(rows: list[dict]) -> list[dict]:
    """Table rows with every text cell through :func:`visible_text` (numbers and the like stay as they are)."""
    return [{k: visible_text(v) if isinstance(v, str) else v for k, v in row.items()} for row in rows]


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
    return normalise_newlines(reveal_invisible(text)).translate(table).replace("\n", newlines)


def escape_markdown(text: object) -> str:
    """Text for any Streamlit Markdown sink, shown as it is: nothing in it becomes markup."""
    return _MARKDOWN_PUNCTUATION_RE.sub(r"\\\1", normalise_newlines(reveal_invisible(text)))


def strip_control(text: object, single_line: bool = False) -> str:
    """Text safe to print on a terminal; ``single_line`` also turns newlines and tabs into spaces."""
    cleaned = reveal_invisible(_CONTROL_RE.sub("", _TERMINAL_SEQUENCE_RE.sub("", normalise_newlines(str(text)))))
    if single_line:
        cleaned = cleaned.replace("\n", " ").replace("\t", " ")
    return cleaned


_JSON_UNSAFE_RE = re.compile(f"[\x7f-\x9f\u2028\u2029{_BIDI}{_INVISIBLE}{_JOINERS}]")


def terminal_json(text: str) -> str:
    """JSON text (``json.dumps`` output) with the characters it leaves raw written as ``\\uXXXX`` escapes.

    ``json.dumps`` always escapes C0 controls, but with ``ensure_ascii=False``
    it prints DEL, C1 controls (8-bit CSI/OSC), bidi controls and invisible
    characters as they are.  These can only occur inside JSON strings, where
    the escape means the same (a character beyond U+FFFF as its surrogate pair).
    """
    return _JSON_UNSAFE_RE.sub(lambda m: json.dumps(m.group()).strip('"'), text)
