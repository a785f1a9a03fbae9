"""HTML for an answer with clickable citation chips and the source cards they point at.

Safety rule: every piece of model output, document text, file name or URL is
passed through :func:`docmind_core.text.visible.escape_html` before any markup of
ours is added, so a document containing ``<script>`` or ``onerror=`` is shown
as text.  The only tags in the output are the ones built here, and the output
holds no line end at all (each one is a ``<br>``): Streamlit parses it as
Markdown with raw HTML, where a blank line (``\r\r`` counts) would end our
block and let the text after it become Markdown images and links.

Clicking chip ``[n]`` follows the anchor ``#src-<run>-<n>``; the page's CSS
highlights the card with ``:target``, so no JavaScript is needed.
"""

from __future__ import annotations

import re
from typing import Sequence

from docmind_core.answer.citations import marker_position
from docmind_core.text.excerpt import word_window
from docmind_core.values import CitationResult, ClaimCheck, RetrievedChunk
from docmind_core.text.visible import escape_html, normalise_newlines
from docmind_core.text.tokens import CITATION_MARKER_RE, keyword_tokens, marker_numbers, split_sentences

_SAFE_ID_RE = re.compile(r"[^A-Za-z0-9_-]")
_MIN_SPAN_OVERLAP = 0.3  # share of a citing sentence's terms a chunk sentence must contain to be highlighted


def anchor_id(run_id: str, n: int) -> str:
    """The element id of source card ``n`` of one run (unique even with two runs on one page)."""
    return f"src-{_SAFE_ID_RE.sub('', run_id) or 'run'}-{n}"


def _chip(n: int, run_id: str, source_count: int) -> str:
    if 1 <= n <= source_count:
        return f'<a class="dm-cite" href="#{anchor_id(run_id, n)}" data-n="{n}">[{n}]</a>'
    return f'<span class="dm-cite dm-cite-invalid" data-n="{n}" title="no source [{n}]">[{n}]</span>'


def _inferred_chip(n: int, run_id: str) -> str:
    """A citation the parser inferred (the model wrote no marker): dashed, and it says so."""
    return (f'<a class="dm-cite dm-cite-inferred" href="#{anchor_id(run_id, n)}" data-n="{n}" '
            f'style="border:1px dashed currentColor;background:transparent" '
            f'title="inferred: the model did not cite this">[{n}]</a>')


_FLAGGED_STYLE = {  # inline, like the inferred chip's, so the chip reads right wherever the HTML is shown
    "unsupported": "background:#fef3c7;color:#92400e;border:1px dotted currentColor",
    "contradicted": "background:#fee2e2;color:#b91c1c;border:1px solid currentColor",
}


def _flagged_chip(n: int, run_id: str, claim: ClaimCheck) -> str:
    """A marker on a claim its source does not state (amber, dotted) or states otherwise (red)."""
    judge = " (model judge)" if claim.via == "llm" else ""
    title = escape_html(f"{claim.status}{judge}: {claim.reason}" if claim.reason else claim.status + judge, " ")
    return (f'<a class="dm-cite dm-cite-{claim.status}" href="#{anchor_id(run_id, n)}" data-n="{n}" '
            f'style="{_FLAGGED_STYLE[claim.status]}" title="{title}">[{n}]</a>')


def _uncited_flag(claim: ClaimCheck) -> str:
    """An uncited claim a source contradicts: a red mark where a marker would stand."""
    title = escape_html(f"contradicted: {claim.reason}", " ")
    n = f' data-n="{claim.source_index}"' if claim.source_index else ""
    return (f'<span class="dm-cite dm-cite-contradicted"{n} style="{_FLAGGED_STYLE["contradicted"]}" '
            f'title="{title}">✗</span>')


def citation_html(answer: str, citations: CitationResult | None, sources: Sequence[RetrievedChunk],
                  run_id: str = "run") -> str:
    """The answer as one escaped HTML block with every [n] turned into a chip.

    ``citations`` is the parser's result; validity is decided by the source count
    here too, so the chips agree with ``invalid_refs`` even for a run whose
    citation result is missing (a cancelled or failed run).  Its inferred
    citations (no marker in the text) become dashed chips at their positions;
    a valid marker on an unsupported claim is an amber chip, on a contradicted
    claim a red one, and an uncited contradicted claim gets a red mark.
    """
    inferred: dict[int, list[str]] = {}
    for o in (citations.occurrences if citations is not None else ()):
        if o.inferred and 1 <= o.index <= len(sources) and 0 <= o.char_start <= len(answer):
            inferred.setdefault(o.char_start, []).append(_inferred_chip(o.index, run_id))
    claims = [c for c in (citations.claims if citations is not None else ())
              if c.status in _FLAGGED_STYLE and 0 <= c.char_start <= c.char_end <= len(answer)]
    for c in claims:
        if c.status == "contradicted" and not c.cited:
            inferred.setdefault(marker_position(answer, c.char_start, c.char_end), []).append(_uncited_flag(c))

    def chip(n: int, at: int) -> str:
        claim = next((c for c in claims if c.char_start <= at < c.char_end and n in c.cited), None)
        if claim is not None:
            return _flagged_chip(n, run_id, claim)
        return _chip(n, run_id, len(sources))

    def marked(offset: int, segment: str) -> list[str]:
        parts, pos = [], 0
        for match in CITATION_MARKER_RE.finditer(segment):  # escape the text between markers; the chips are ours
            numbers = marker_numbers(match)
            parts.append(escape_html(normalise_newlines(segment[pos:match.start()])))
            parts.append("".join(chip(n, offset + match.start()) for n in numbers))
            pos = match.end()
        parts.append(escape_html(normalise_newlines(segment[pos:])))
        return parts

    parts, pos = [], 0
    for at in sorted(inferred):  # an inferred position sits after a sentence's last word, never inside a marker
        parts += marked(pos, answer[pos:at])
        parts.append("".join(dict.fromkeys(inferred[at])))
        pos = at
    parts += marked(pos, answer[pos:])
    return f'<div class="dm-answer">{"".join(parts)}</div>'


# --------------------------------------------------------------------------
# Source cards
# --------------------------------------------------------------------------


def citing_sentences(answer: str, n: int) -> list[str]:
    """Sentences of the answer that cite source ``n``, with the markers removed."""
    out = []
    for start, end in split_sentences(answer):
        sentence = answer[start:end]
        cited = {x for m in CITATION_MARKER_RE.finditer(sentence) for x in marker_numbers(m)}
        if n in cited:
            clean = CITATION_MARKER_RE.sub("", sentence).strip()
            if clean:
                out.append(clean)
    return out


def cited_spans(chunk_text: str, claims: Sequence[str]) -> list[tuple[int, int]]:
    """Character spans of the chunk that support the citing sentences.

    A claim found verbatim (extractive answers quote) is highlighted exactly;
    otherwise the chunk sentence sharing the largest part of the claim's terms.
    """
    spans: list[tuple[int, int]] = []
    sentence_spans = split_sentences(chunk_text)
    for claim in claims:
        core = claim.strip().rstrip("。.!！?？;； ").strip()
        if len(core) >= 6:
            pos = chunk_text.find(core)
            if pos >= 0:
                spans.append((pos, pos + len(core)))
                continue
        terms = set(keyword_tokens(claim))
        if not terms:
            continue
        best, best_score = None, 0.0
        for start, end in sentence_spans:
            overlap = len(terms & set(keyword_tokens(chunk_text[start:end]))) / len(terms)
            if overlap > best_score:
                best, best_score = (start, end), overlap
        if best is not None and best_score >= _MIN_SPAN_OVERLAP:
            spans.append(best)
    return _merge(spans)


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def highlighted_html(text: str, spans: Sequence[tuple[int, int]]) -> str:
    """Escaped text with the given spans wrapped in <mark>, on one line (line ends become <br>)."""
    out, pos = [], 0
    for start, end in spans:  # spans index the raw text: each piece is escaped (and its line ends normalised) alone
        out.append(escape_html(text[pos:start]))
        out.append(f'<mark class="dm-span">{escape_html(text[start:end])}</mark>')
        pos = end
    out.append(escape_html(text[pos:]))
    return "".join(out)


_EXCERPT_CONTEXT = 360  # characters shown around the cited span of a long chunk


def excerpt_html(text: str, spans: Sequence[tuple[int, int]]) -> str:
    """A long chunk cut to a window around its cited span (the whole text stays one click away)."""
    if len(text) <= 2 * _EXCERPT_CONTEXT + 240:
        return highlighted_html(text, spans)
    if spans:
        start = max(0, spans[0][0] - _EXCERPT_CONTEXT)
        end = min(len(text), max(spans[0][1], min(spans[-1][1], spans[0][0] + 3 * _EXCERPT_CONTEXT)) + _EXCERPT_CONTEXT)
    else:
        start, end = 0, 2 * _EXCERPT_CONTEXT
    start, end = word_window(text, start, end)  # never a word cut in half
    inside = [(max(a, start) - start, min(b, end) - start) for a, b in spans if b > start and a < end]
    return (("… " if start > 0 else "") + highlighted_html(text[start:end], inside)
            + (" …" if end < len(text) else ""))


def _score(label: str, value: float | None, digits: int = 3) -> str:
    shown = "—" if value is None else f"{value:.{digits}f}"
    return f'<span class="dm-score"><b>{label}</b> {shown}</span>'


def _safe_url(url: str) -> str:
    return url if url.lower().startswith(("https://", "http://")) else ""


def _claim_tags(n: int, checks: Sequence[ClaimCheck]) -> str:
    """How the answer's claims that cite or lean on source ``n`` read against it."""
    mine = [c for c in checks if c.source_index == n or n in c.cited]
    tags = []
    for status, label in (("supported", "supports"), ("unsupported", "does not state"),
                          ("contradicted", "contradicts")):
        count = sum(1 for c in mine if c.status == status and (c.source_index == n or status == "unsupported"))
        if count:
            style = f' style="{_FLAGGED_STYLE[status]}"' if status in _FLAGGED_STYLE else ""
            tags.append(f'<span class="dm-tag dm-tag-claims-{status}"{style}>{label} {count} '
                        f'claim{"s" if count != 1 else ""}</span>')
    return " " + " ".join(tags) if tags else ""


def source_card_html(n: int, source: RetrievedChunk, run_id: str = "run", answer: str = "",
                     cited: bool | None = None, checks: Sequence[ClaimCheck] = ()) -> str:
    """Source card ``n``: document, origin, per-stage scores, how the answer's claims read against it
    (``checks``: the run's claim checks) and the chunk with the cited span marked."""
    claims = citing_sentences(answer, n) if answer else []
    is_cited = bool(claims) if cited is None else cited
    spans = cited_spans(source.text, claims)
    origin = "web" if source.origin == "web" else ("memory" if source.origin == "memory" else "kb")
    origin_label = {"web": "Web", "memory": "Memory", "kb": "KB"}[origin]
    url = _safe_url(source.url)
    link = (f' <a class="dm-source-url" href="{escape_html(url, " ")}" target="_blank" '
            f'rel="noopener noreferrer">{escape_html(url)}</a>' if url else "")
    s = source.scores
    classes = f"dm-source dm-origin-{origin}" + (" dm-cited" if is_cited else "")
    expanded = ' <span class="dm-tag">parent block</span>' if source.expanded else ""
    expanded += ' <span class="dm-tag dm-tag-cited">cited</span>' if is_cited else ""
    expanded += _claim_tags(n, checks)
    full = ""
    if len(source.text) > 2 * _EXCERPT_CONTEXT + 240:  # <details> opens without JavaScript
        full = (f'<details class="dm-full"><summary>Whole chunk ({len(source.text)} characters)</summary>'
                f'<div class="dm-source-text">{highlighted_html(source.text, spans)}</div></details>')
    return (
        f'<div class="{classes}" id="{anchor_id(run_id, n)}">'
        f'<div class="dm-source-head"><span class="dm-source-n">[{n}]</span> '
        f'<span class="dm-source-doc">{escape_html(source.cited_as)}</span> '
        f'<span class="dm-tag dm-tag-{origin}">{origin_label}</span>{expanded}{link}</div>'
        f'<div class="dm-scores">{_score("vector", s.vector)}{_score("keyword", s.keyword, 2)}'
        f'{_score("fused", s.fused)}{_score("rerank", s.rerank)}</div>'
        f'<div class="dm-source-text">{excerpt_html(source.text, spans)}</div>'
        f"{full}</div>"
    )
