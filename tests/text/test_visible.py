"""Hostile text in the HTML we build, in Streamlit Markdown and on terminals; the public-exposure rule; limits keys."""

from __future__ import annotations

import html
import json

import pytest

from docmind_ui.citation_html import citation_html, highlighted_html, source_card_html
from docmind_core.errors import ConfigError
from docmind_core.accounts.exposure import Exposure, public_exposure
from docmind_core.values import BackendStatus, RetrievedChunk, StageScores
from docmind_core.text.visible import escape_html, escape_markdown, normalise_newlines, strip_control
from docmind_core.settings import Settings, key_specs
from docmind_core.reports.timeline import TimelineRow
from tests.markdown_probe import bare_urls, render, text_of

IMAGE = "![x](http://127.0.0.1:1/a.png)"
LINE_ENDS = ["\r\r", "\r\n\r\n", "\n\n", "\u2028\u2028", "\u2029", "\x0b\x0b", "\x0c\x0c", "\x85\x85", "\r \r"]
RAW_LINE_ENDS = "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def _chunk(text: str, document: str = "doc.md", url: str = "") -> RetrievedChunk:
    return RetrievedChunk(chunk_id="c1", kb_id=1, doc_id=1, document=document, text=text, url=url,
                          scores=StageScores(rerank=0.7, fused=0.5))


def _assert_inert_html(html: str) -> None:
    rendered = render(html, allow_html=True)
    assert not rendered.images, rendered
    assert "http://127.0.0.1:1/a.png" not in rendered.links
    assert "img" not in rendered.html_tags
    assert not any(c in html for c in RAW_LINE_ENDS), repr(html)


# -- HTML builders ------------------------------------------------------------------


@pytest.mark.parametrize("breaks", LINE_ENDS)
def test_an_answer_cannot_end_the_html_block_and_smuggle_a_markdown_image(breaks):
    answer = f"The battery lasts 18 hours [1].{breaks}{IMAGE} and <img src=http://127.0.0.1:1/b.png>"
    html = citation_html(answer, None, [_chunk("The battery lasts 18 hours.")], run_id="r1")
    _assert_inert_html(html)
    assert 'href="#src-r1-1"' in html  # the chip still works
    assert "&lt;img" in html


@pytest.mark.parametrize("breaks", LINE_ENDS)
def test_chunk_text_and_its_highlight_stay_one_html_block(breaks):
    text = f"Safe start.{breaks}{IMAGE} middle.{breaks}The battery lasts 18 hours."
    _assert_inert_html(highlighted_html(text, [(0, 5), (len(text) - 10, len(text))]))
    card = source_card_html(1, _chunk(text, document=f"a{breaks}{IMAGE}.md"), "r1",
                            answer="The battery lasts 18 hours [1].")
    _assert_inert_html(card)


def test_timeline_backend_and_gradebar_html_take_no_line_ends_from_values():
    from docmind_ui.html_views import backend_html, timeline_html

    row = TimelineRow(seq=1, t_ms=1.0, kind="tool", title=f"searchDocs\r\r{IMAGE}", status="ok",
                      fields={"args": f"query\r\r{IMAGE}"}, items=[{"query": f"q\u2028\u2028{IMAGE}"}])
    _assert_inert_html(timeline_html([row]))
    status = BackendStatus(role="llm", name=f"m\r\r{IMAGE}", live=False, how_to_enable=f"x\n\n{IMAGE}")
    _assert_inert_html(backend_html(status))


def test_chart_hover_texts_are_escaped_and_one_line():
    pytest.importorskip("plotly")
    from docmind_ui.charts import score_chart

    chunk = _chunk("t", document="a\r\n<b>bold</b>\r<a href='http://127.0.0.1:1/'>x</a>").model_copy(
        update={"kept": False, "cut_by": "<i>mmr</i>"})
    fig = score_chart([chunk], 0.65, 0.25, title="<a href='http://127.0.0.1:1/'>t</a>")
    hover = " ".join(t for bar in fig.data for t in bar.hovertext)
    assert "<b>bold" not in hover and "<a " not in hover and "<i>" not in hover
    assert not any(c in hover for c in RAW_LINE_ENDS)
    assert "<a " not in str(fig.layout.title.text)


# -- Markdown -------------------------------------------------------------------------


HOSTILE_MARKDOWN = [
    IMAGE,
    "[click](http://127.0.0.1:1/)",
    "<img src=http://127.0.0.1:1/a.png>",
    "<http://127.0.0.1:1/>",
    "see http://127.0.0.1:1/ and www.example.com",
    "[x][ref]\n\n[ref]: http://127.0.0.1:1/",
    "# heading\n- item\n> quote\n1. one\n***\n| a | b |\n|---|---|",
    "`code` *em* _em_ ~~del~~ $x^2$ :red[red] :material/home: \\ backslash",
    f"line\r\r{IMAGE}",
    f"tab\t{IMAGE}\u2028{IMAGE}",
    "&#33;[x](http://127.0.0.1:1/a.png) &lt;img&gt;",
]


@pytest.mark.parametrize("text", HOSTILE_MARKDOWN)
def test_escape_markdown_makes_images_links_and_html_inert(text):
    escaped = escape_markdown(text)
    rendered = render(escaped, allow_html=True)
    assert not rendered.images and not rendered.links and not rendered.html_tags, rendered
    assert not bare_urls(escaped), escaped
    assert "\r" not in escaped and "\u2028" not in escaped


@pytest.mark.parametrize("text", ["![x](url)", "a_b*c* [d] (e) #f <g> `h` 1. i", "价格 100$ — 50% off!", "x\\y"])
def test_escaped_markdown_still_reads_as_the_original_text(text):
    assert " ".join(text_of(escape_markdown(text)).split()) == " ".join(text.split())


def test_escape_markdown_of_non_strings_and_empty():
    assert escape_markdown("") == ""
    assert escape_markdown(42) == "42"


def test_normalise_newlines_turns_every_line_separator_into_one_newline():
    assert normalise_newlines("a\r\nb\rc\u2028d\u2029e\x0bf\x0cg\x85h") == "a\nb\nc\nd\ne\nf\ng\nh"
    assert escape_html("a\r\n<b>\rc") == "a<br>&lt;b&gt;<br>c"
    assert escape_html('x"\ny', newlines=" ") == "x&quot; y"


# -- terminals ----------------------------------------------------------------------


@pytest.mark.parametrize("text, shown", [
    ("\x1b]0;pwned\x07title", "title"),
    ("\x1b]8;;http://127.0.0.1:1/\x1b\\link\x1b]8;;\x1b\\", "link"),
    ("\x1b[31mred\x1b[0m", "red"),
    ("\x1b[2J\x1b[Hclear", "clear"),
    ("\x9b31mred", "red"),
    ("\x9d0;pwned\x9cok", "ok"),
    ("bell\x07 back\x08space del\x7f", "bell backspace del"),
    ("over\rwrite", "over\nwrite"),
    ("keep\ttabs\nand lines", "keep\ttabs\nand lines"),
    ("\x1bPdcs payload\x1b\\after", "after"),
    ("bidi \u202eevil\u202c", "bidi <U+202E>evil<U+202C>"),  # shown, not acting
    ("\x1b[3", "3"),  # an escape cut off by truncation leaves no ESC byte
])
def test_strip_control_removes_terminal_sequences_and_controls(text, shown):
    assert strip_control(text) == shown


def test_strip_control_single_line():
    assert strip_control("a\nb\r\nc\td", single_line=True) == "a b c d"


# -- exposure ---------------------------------------------------------------------------


@pytest.mark.parametrize("address, auth, allowed, expected", [
    ("127.0.0.1", False, False, Exposure.OK),
    ("127.0.1.1", False, False, Exposure.OK),
    ("localhost", False, False, Exposure.OK),
    ("::1", False, False, Exposure.OK),
    ("[::1]", False, False, Exposure.OK),
    ("unix:///run/docmind.sock", False, False, Exposure.OK),
    ("0.0.0.0", False, False, Exposure.REFUSE),
    ("::", False, False, Exposure.REFUSE),
    ("192.168.1.20", False, False, Exposure.REFUSE),
    ("docmind.example.com", False, False, Exposure.REFUSE),
    (None, False, False, Exposure.REFUSE),  # unset: Streamlit listens on every interface
    ("", False, False, Exposure.REFUSE),
    ("0.0.0.0", False, True, Exposure.WARN),
    (None, False, True, Exposure.WARN),
    ("0.0.0.0", True, False, Exposure.OK),
    ("192.168.1.20", True, True, Exposure.OK),
    ("127.0.0.1", False, True, Exposure.OK),
])
def test_public_exposure_table(address, auth, allowed, expected):
    assert public_exposure(address, auth, allowed) is expected


# -- config keys ----------------------------------------------------------------------------


def test_limits_and_the_exposure_key_are_typed_with_ranges():
    specs = {s.key: s for s in key_specs()}
    for key in ("limits.max_question_chars", "limits.max_kb_ids", "limits.max_tool_argument_bytes"):
        assert specs[key].type == "int" and specs[key].minimum is not None and specs[key].maximum is not None
    assert specs["auth.allow_public_without_sign_in"].default is False
    settings = Settings()
    assert settings.limits.max_question_chars == 4000 and settings.limits.max_kb_ids == 64
    assert settings.limits.max_tool_argument_bytes == 4096
    with pytest.raises(ConfigError, match="max_kb_ids"):
        settings.with_overrides({"limits.max_kb_ids": 0})
    with pytest.raises(ConfigError, match="max_question_chars"):
        settings.with_overrides({"limits.max_question_chars": 10_000_000})


# -- bidi and invisible characters (issue 19 item 8): one sanitiser, shown as markers -------------------------

from docmind_core.text.visible import reveal_invisible, terminal_json, visible_rows, visible_text  # noqa: E402

SPOOFED = "invoice\u202etxt.exe"  # renders "invoiceexe.txt" where the override acts


@pytest.mark.parametrize("sink", [escape_markdown, strip_control, visible_text,
                                  lambda t: escape_html(t, markdown_inert=False)])
def test_a_bidi_override_is_shown_as_a_marker_in_every_sink(sink):
    shown = sink(SPOOFED)
    assert "\u202e" not in shown
    readable = html.unescape(text_of(shown).strip() if sink is escape_markdown else shown)
    assert readable == "invoice<U+202E>txt.exe"


@pytest.mark.parametrize("char", ["\u200b", "\u2060", "\ufeff", "\u00ad", "\u061c", "\u2066", "\U000e0041",
                                  "\u200d", "\u200c"])
def test_invisible_characters_between_latin_letters_are_marked(char):
    shown = strip_control(f"al{char}ice")
    assert char not in shown and shown == f"al<U+{ord(char):04X}>ice"
    assert char not in escape_html(f"al{char}ice") and char not in escape_markdown(f"al{char}ice")


def test_joiners_stay_where_scripts_and_emoji_need_them():
    persian = "می\u200cخواهم"  # ZWNJ inside a Persian word
    family = "👩\u200d👧"  # an emoji ZWJ sequence
    assert reveal_invisible(persian) == persian and reveal_invisible(family) == family
    assert reveal_invisible("\u200dx") == "<U+200D>x"  # at an edge or next to ASCII: marked


def test_json_escapes_them_and_the_data_stays_the_same():
    value = {"name": SPOOFED, "excerpt": "RED\u200bFOX \U000e0041 tag", "persian": "می\u200cخواهم"}
    text = terminal_json(json.dumps(value, ensure_ascii=False))
    for char in ("\u202e", "\u200b", "\U000e0041", "\u200c"):
        assert char not in text
    assert "\\u202e" in text and "\\u200b" in text
    assert json.loads(text) == value


def test_table_rows_are_made_visible_cell_by_cell():
    assert visible_rows([{"name": SPOOFED, "chunks": 3}]) == [{"name": "invoice<U+202E>txt.exe", "chunks": 3}]
