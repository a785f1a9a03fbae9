"""Plotly figures: the rerank score distribution of a run, and two runs overlaid; the jump from a bar to its card."""

from __future__ import annotations

import json
import re
from typing import Any, Sequence

import plotly.graph_objects as go
import streamlit as st
import streamlit.components.v1 as components

from docmind_core.reports.compare import ScoreDistribution
from docmind_core.values import RetrievedChunk, StageScores
from docmind_core.text.visible import escape_html

# (origin, kept) -> legend name and colour; KB blue, web orange, cut ones pale
_GROUPS = [
    (("kb", True), "KB · kept", "#2563eb"),
    (("kb", False), "KB · cut", "#bfdbfe"),
    (("web", True), "Web · kept", "#ea580c"),
    (("web", False), "Web · cut", "#fed7aa"),
    (("memory", True), "Memory · kept", "#7c3aed"),
    (("memory", False), "Memory · cut", "#ddd6fe"),
]


THRESHOLD_DIGITS = 4  # a threshold is shown with up to this many decimals, as many as it has


def threshold_digits(*values: float) -> int:
    """Decimals that show each of ``values`` as it is (at least 2, at most THRESHOLD_DIGITS): a live 0.995 must
    not read 0.99, the same as a top score of 0.990 beside it."""
    def needed(value: float) -> int:
        return next((n for n in range(2, THRESHOLD_DIGITS) if round(value, n) == round(value, THRESHOLD_DIGITS)),
                    THRESHOLD_DIGITS)
    return max((needed(v) for v in values), default=2)


def threshold_text(value: float) -> str:
    return f"{value:.{threshold_digits(value)}f}"


def score_chart(candidates: Sequence[RetrievedChunk], high: float, low: float, title: str = "",
                anchors: dict[str, str] | None = None) -> go.Figure:
    """Bars of every candidate's rerank score, best first, with the HIGH / LOW thresholds drawn.

    ``anchors``: chunk id -> the id of its card on the page; each bar carries it (customdata), so a
    click on a bar can jump to the card (see :func:`jump_to_anchor`).
    """
    ranked = sorted(candidates, key=lambda c: c.scores.rerank if c.scores.rerank is not None else -1, reverse=True)
    fig = go.Figure()
    for (origin, kept), name, colour in _GROUPS:
        xs, ys, hover, targets = [], [], [], []
        for rank, chunk in enumerate(ranked, start=1):
            if chunk.origin == origin and chunk.kept == kept and chunk.scores.rerank is not None:
                xs.append(rank)
                ys.append(chunk.scores.rerank)
                targets.append((anchors or {}).get(chunk.chunk_id, ""))
                # plotly renders a few tags (<b>, <a href>, <br>) in hover texts, titles and legend names: escape
                # names so a file called <b>x</b> stays text (no Markdown parser sees these)
                cut = "kept" if chunk.kept else f"cut by {_plain(chunk.cut_by or '?')}"
                hover.append(f"{_plain(chunk.document)}<br>rerank {chunk.scores.rerank:.3f} · {cut}")
        if xs:
            fig.add_bar(x=xs, y=ys, name=name, marker_color=colour, hovertext=hover, hoverinfo="text",
                        marker_line_color="#1f2937" if kept else colour, marker_line_width=1.2 if kept else 0,
                        customdata=targets if anchors else None)
    fig.add_hline(y=high, line_dash="dash", line_color="#16a34a", annotation_text=f"HIGH {threshold_text(high)}",
                  annotation_position="top right")
    fig.add_hline(y=low, line_dash="dash", line_color="#dc2626", annotation_text=f"LOW {threshold_text(low)}",
                  annotation_position="top right")
    fig.update_layout(height=240, margin=dict(l=10, r=10, t=30 if title else 10, b=10), barmode="overlay",
                      title=_plain(title) or None, xaxis_title="candidate rank", yaxis_title="rerank score",
                      yaxis_range=[0, 1.02], legend=dict(orientation="h", y=1.12, x=0), bargap=0.15)
    return fig


def distribution_overlay(a: ScoreDistribution, b: ScoreDistribution, label_a: str, label_b: str,
                         high: float, low: float) -> go.Figure:
    fig = go.Figure()
    fig.add_scatter(x=list(range(1, len(a.scores) + 1)), y=a.scores, mode="lines+markers", name=_plain(label_a))
    fig.add_scatter(x=list(range(1, len(b.scores) + 1)), y=b.scores, mode="lines+markers", name=_plain(label_b))
    fig.add_hline(y=high, line_dash="dash", line_color="#16a34a", annotation_text="HIGH")
    fig.add_hline(y=low, line_dash="dash", line_color="#dc2626", annotation_text="LOW")
    fig.update_layout(height=260, margin=dict(l=10, r=10, t=10, b=10), xaxis_title="candidate rank",
                      yaxis_title="rerank score", yaxis_range=[0, 1.02], legend=dict(orientation="h", y=1.12))
    return fig


def _plain(text: str) -> str:
    """Text for plotly's pseudo-HTML: escaped, on one line."""
    return escape_html(text, " ", markdown_inert=False)


def preload_figure() -> go.Figure:
    """An empty figure a page draws hidden, so the browser loads plotly.js (fetched lazily, on the first
    chart) while the user types, not between the first answer's text and its chart."""
    fig = go.Figure()
    fig.update_layout(height=10, margin=dict(l=0, r=0, t=0, b=0))
    return fig


def warm_charts() -> None:
    """Build, validate and serialise a score chart the way ``st.plotly_chart`` does, once per server.

    Plotly imports its validators lazily: the server's first chart paid ~1-2 s (measured under load by
    bench/page_speed.py) between the first answer's text and its chart.  Run in a background thread.
    """
    import plotly.io
    import plotly.tools

    sample = [RetrievedChunk(chunk_id=f"warm-{i}", document="warm up", text="", origin=origin, kept=kept,
                             cut_by=None if kept else "rerank", scores=StageScores(rerank=score))
              for i, (origin, kept, score) in enumerate([("kb", True, 0.8), ("kb", False, 0.3),
                                                          ("web", True, 0.6), ("web", False, 0.1)])]
    figures = [score_chart(sample, 0.65, 0.25, anchors={c.chunk_id: c.chunk_id for c in sample}),
               distribution_overlay(ScoreDistribution([0.8, 0.3], 1, 0, 0.8, 0.55, 0.55),
                                    ScoreDistribution([0.6], 1, 1, 0.6, 0.6, 0.6), "A", "B", 0.65, 0.25)]
    for figure in figures:
        plotly.io.to_json(plotly.tools.return_figure_from_figure_or_data(figure, validate_figure=True),
                          validate=False)


ANCHOR_RE = re.compile(r"src-[A-Za-z0-9_-]+")  # what citation_html.anchor_id makes; nothing else reaches the script
_JUMP_SCRIPT = """<script>
(function () {
  const id = %s;
  let tries = 0;
  function jump() {
    const page = window.parent.document;
    const card = page.getElementById(id);
    if (!card) { if (++tries < 300) { setTimeout(jump, 100); } return; }  // up to 30 s: a busy page draws late
    page.querySelectorAll(".dm-source.dm-jumped").forEach(function (el) { el.classList.remove("dm-jumped"); });
    card.classList.add("dm-jumped");
    card.scrollIntoView({block: "center"});
  }
  jump();
})();
</script>"""


def jump_to_anchor(chart_event: Any, state_key: str = "dm_jumped_anchor") -> None:
    """When a bar of a score chart was clicked, scroll its card into view and light it up.

    The card's id rides on the bar (customdata).  The page's URL hash cannot carry it: Streamlit rewrites
    the URL on the rerun the click causes, so the script (in a same-origin component iframe) finds the card,
    waiting for it to be drawn, and marks it ``dm-jumped``.  Only a new click jumps: the selection outlives
    the rerun, and a page redrawn for another reason must not scroll back to the card.
    """
    try:
        points = chart_event.selection.points  # type: ignore[union-attr]
    except AttributeError:
        return
    anchor = next((p.get("customdata") for p in points or [] if p.get("customdata")), "")
    if not anchor or not ANCHOR_RE.fullmatch(str(anchor)):
        st.session_state.pop(state_key, None)
        return
    if st.session_state.get(state_key) == anchor:
        return
    st.session_state[state_key] = anchor
    components.html(_JUMP_SCRIPT % json.dumps(anchor), height=0)
