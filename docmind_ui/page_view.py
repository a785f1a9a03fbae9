"""A PDF source's page as an image with its passage marked: under Chat's source cards and hit testing's."""

from __future__ import annotations

from typing import Callable, Sequence

import streamlit as st

from docmind_core.errors import DocMindError
from docmind_core.ingest.page_image import PageImage
from docmind_core.text.visible import escape_markdown, visible_text
from docmind_core.values import RetrievedChunk
from docmind_ui.citation_html import cited_spans, citing_sentences


def page_picker(sources: Sequence[RetrievedChunk], answer: str, key: str,
                page_image: Callable[[RetrievedChunk, int, str], PageImage], label: str = "Show a cited page") -> None:
    """A PDF source's page as an image, the passage the answer cites from it marked (without an answer, as
    in hit testing: the chunk's opening); of a passage across a page break, the page that holds it."""
    paged = {n: s for n, s in enumerate(sources, start=1) if s.page and s.doc_id}
    if not paged:
        return
    choice = st.selectbox(label, [None, *paged], key=f"dm_page-{key}",
                          format_func=lambda n: "—" if n is None else visible_text(f"[{n}] {paged[n].cited_as}"))
    if choice is None:
        return
    source = paged[choice]
    spans = cited_spans(source.text, citing_sentences(answer, choice)) if answer else []
    passage = source.text[spans[0][0]:spans[0][1]] if spans else source.text[:300]
    try:
        image = page_image(source, source.page, passage)
        if not image.marked and source.page_last and source.page_last != source.page:
            image = page_image(source, source.page_last, passage)
    except DocMindError as exc:
        st.info(escape_markdown(exc))
        return
    caption = visible_text(source.cited_as) + (" · the cited passage is marked" if image.marked else "")
    st.image(image.png, caption=caption)
