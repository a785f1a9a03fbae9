"""Pure HTML builders for the pages (no Streamlit import, so they are unit-testable).

Every value that came from a document, a file name, a model or a user goes
through :func:`esc` (``docmind_core.text.visible.escape_html``) here; the pages
pass the result to ``st.markdown(..., unsafe_allow_html=True)`` and nothing
else.  The output has no line ends: a blank line would end the HTML block and
let the rest be parsed as Markdown.
"""

from __future__ import annotations

from typing import Sequence

from docmind_core.reports.compare import AnswerDiff, DiffPiece
from docmind_core.reports.pair_verdict import PairVerdict
from docmind_core.events import Verdict
from docmind_core.values import BackendStatus, GradeResult
from docmind_core.text.reasons import describe_reason
from docmind_core.text.visible import escape_html
from docmind_core.reports.timeline import RunDigest, TimelineRow

PAGE_CSS = """
<style>
.dm-answer { line-height: 1.65; font-size: 1.02rem; }
a.dm-cite { display: inline-block; padding: 0 .38em; margin: 0 .08em; border-radius: .6em; font-size: .78em;
  font-weight: 600; text-decoration: none; background: #e0ecff; color: #1d4ed8; border: 1px solid #93c5fd;
  vertical-align: super; line-height: 1.3; }
a.dm-cite:hover { background: #1d4ed8; color: #fff; }
.dm-cite-invalid { display: inline-block; padding: 0 .38em; border-radius: .6em; font-size: .78em;
  background: #fee2e2; color: #b91c1c; border: 1px dashed #ef4444; text-decoration: line-through;
  vertical-align: super; line-height: 1.3; }
.dm-cite-unsupported { color: #92400e; background: #fef3c7; padding: 0 .3em; border-radius: .4em; }
.dm-cite-contradicted { color: #b91c1c; background: #fee2e2; padding: 0 .3em; border-radius: .4em; font-weight: 600; }
.dm-source { border: 1px solid #e5e7eb; border-left: 4px solid #60a5fa; border-radius: 8px; padding: .55rem .75rem;
  margin: .45rem 0; background: #fafafa; scroll-margin-top: 5rem; transition: background .3s, box-shadow .3s; }
.dm-source.dm-origin-web { border-left-color: #f59e0b; }
.dm-source.dm-origin-memory { border-left-color: #a78bfa; }
.dm-source:target, .dm-source.dm-jumped { background: #fff7d6; box-shadow: 0 0 0 3px #f59e0b; }
.dm-source-head { font-weight: 600; margin-bottom: .2rem; }
.dm-source-n { color: #1d4ed8; }
.dm-source-text { font-size: .92rem; white-space: normal; }
.dm-source-url { font-weight: 400; font-size: .8rem; margin-left: .4rem; }
details.dm-full summary { font-size: .78rem; color: #4b5563; cursor: pointer; margin-top: .2rem; }
mark.dm-span { background: #fde68a; padding: 0 .1em; border-radius: 3px; }
.dm-scores { font-size: .78rem; color: #4b5563; margin-bottom: .25rem; }
.dm-score { margin-right: .8rem; }
.dm-tag { font-size: .7rem; padding: .05rem .4rem; border-radius: .5rem; background: #e5e7eb; margin-left: .3rem;
  font-weight: 500; }
.dm-tag-cited { background: #dcfce7; color: #166534; }
.dm-source:not(.dm-cited) { opacity: .8; }
.dm-tag-web { background: #fde68a; } .dm-tag-kb { background: #dbeafe; } .dm-tag-memory { background: #ede9fe; }
.dm-verdict { border-left: 5px solid #6b7280; background: #f9fafb; border-radius: 6px; padding: .4rem .7rem;
  margin: .2rem 0 .45rem 0; font-size: .88rem; color: #1f2937; }
.dm-verdict-label { display: inline-block; padding: .12rem .65rem; border-radius: 1rem; font-weight: 700;
  font-size: .88rem; color: #fff; background: #6b7280; margin-right: .55rem; }
.dm-verdict-score { font-weight: 700; margin-right: .4rem; }
.dm-verdict-meaning, .dm-verdict-why, .dm-verdict-number { margin-top: .15rem; }
.dm-verdict-number, .dm-verdict-why { font-size: .82rem; color: #374151; }
.dm-verdict-supported { border-left-color: #16a34a; } .dm-verdict-supported .dm-verdict-label { background: #16a34a; }
.dm-verdict-partly_supported { border-left-color: #ca8a04; }
.dm-verdict-partly_supported .dm-verdict-label { background: #ca8a04; }
.dm-verdict-not_supported { border-left-color: #dc2626; }
.dm-verdict-not_supported .dm-verdict-label { background: #dc2626; }
.dm-grade-name { font-weight: 600; }
.dm-gradebar { font-size: .85rem; color: #374151; margin: .2rem 0 .4rem 0; }
.dm-gradebar span.dm-kv { margin-right: .9rem; }
.dm-glance { font-size: .85rem; color: #374151; background: #f3f4f6; border-radius: 6px; padding: .35rem .6rem;
  margin: .3rem 0; }
table.dm-timeline { border-collapse: collapse; width: 100%; font-size: .82rem; }
table.dm-timeline td { border-top: 1px solid #e5e7eb; padding: .25rem .4rem; vertical-align: top; }
table.dm-timeline td.dm-t { color: #6b7280; white-space: nowrap; text-align: right; width: 5.5rem; }
table.dm-timeline tr.dm-warn td.dm-step { color: #a16207; } table.dm-timeline tr.dm-error td.dm-step { color: #b91c1c; }
table.dm-timeline td.dm-step { font-weight: 600; width: 16rem; }
table.dm-items { border-collapse: collapse; margin-top: .2rem; font-size: .78rem; }
table.dm-items th, table.dm-items td { border: 1px solid #e5e7eb; padding: .1rem .35rem; }
.dm-fields span { margin-right: .7rem; } .dm-fields b { color: #4b5563; font-weight: 600; }
.dm-dot { display: inline-block; width: .6rem; height: .6rem; border-radius: 50%; margin-right: .35rem; }
.dm-dot-live { background: #16a34a; } .dm-dot-fallback { background: #f59e0b; }
.dm-backend { font-size: .82rem; margin: .15rem 0; } .dm-backend small { color: #6b7280; display: block;
  margin-left: .95rem; }
.dm-route { font-size: .88rem; color: #1f2937; margin: .2rem 0; } .dm-route b { color: #4b5563; }
.dm-rounds { font-size: .84rem; margin: .25rem 0 .4rem 0; } .dm-rounds div { margin: .1rem 0; }
.dm-rounds .dm-call { display: inline-block; background: #eef2ff; border: 1px solid #c7d2fe; border-radius: 5px;
  padding: 0 .35rem; margin: .1rem .3rem .1rem 0; } .dm-rounds .dm-call-bad { background: #fef2f2; border-color: #fecaca; }
.dm-diff { line-height: 1.7; font-size: .95rem; } .dm-diff del { background: #fee2e2; color: #991b1b; }
.dm-diff ins { background: #dcfce7; color: #166534; text-decoration: none; }
table.dm-diff-rows { border-collapse: collapse; width: 100%; font-size: .92rem; line-height: 1.55; }
table.dm-diff-rows th { text-align: left; font-size: .8rem; color: #4b5563; border-bottom: 1px solid #e5e7eb; }
table.dm-diff-rows td { vertical-align: top; padding: .2rem .4rem; border-bottom: 1px solid #f3f4f6; width: 50%; }
table.dm-diff-rows tr.dm-diff-only_a td:first-child { background: #fef2f2; }
table.dm-diff-rows tr.dm-diff-only_b td:last-child { background: #f0fdf4; }
table.dm-diff-rows tr.dm-diff-equal td { color: #6b7280; }
.dm-pair-verdict { border-left: 5px solid #2563eb; background: #eff6ff; border-radius: 6px; padding: .4rem .7rem;
  margin: .3rem 0 .5rem 0; font-size: .9rem; color: #1e3a8a; }
.dm-pair-verdict ul { margin: .2rem 0 0 1rem; padding: 0; font-size: .82rem; color: #374151; }
.st-key-dm-chart-preload { display: none; }
</style>
"""

_STATUS_ICON = {"ok": "●", "info": "○", "warn": "▲", "error": "✖"}


def esc(value: object, newlines: str = "<br>") -> str:
    """Escaped text on one line; pass ``newlines=" "`` inside an attribute."""
    return escape_html(value, newlines)


def verdict_html(verdict: Verdict | None) -> str:
    """The answer's one verdict: its label (coloured), its number and what the number is, what the label means,
    and why; nothing before the run is done."""
    if verdict is None:
        return ""
    level = verdict.level  # one of VerdictLevel's literals: safe in an attribute as it is
    head = f'<span class="dm-verdict-label">{esc(verdict.label)}</span>'
    number = ""
    if verdict.score is not None:
        head += f'<span class="dm-verdict-score" title="{esc(verdict.score_meaning, " ")}">{verdict.score:.2f}</span>'
        number = f'<div class="dm-verdict-number"><b>{verdict.score:.2f}</b> is the {esc(verdict.score_meaning)}</div>'
    why = f'<div class="dm-verdict-why"><b>why:</b> {esc("; ".join(verdict.reasons))}</div>' if verdict.reasons \
        else ""
    return (f'<div class="dm-verdict dm-verdict-{level}" data-verdict="{level}">{head}'
            f'<div class="dm-verdict-meaning">{esc(verdict.meaning)}</div>{why}{number}</div>')


def evidence_grade_html(grade: GradeResult | None, web_compensated: bool = False, cancelled: bool = False) -> str:
    """The evidence grade (the CRAG tier of what retrieval found) with the numbers behind it, in neutral type:
    it grades the evidence, not the answer, whose verdict stands above it."""
    if cancelled or grade is None:
        return ""
    tier = grade.tier.value
    parts = [f'<span class="dm-kv" data-grade="{tier}" title="how well what retrieval found matches the question '
             f'(the CRAG grade); it grades the evidence, not the answer"><span class="dm-grade-name">evidence grade'
             f'</span> {tier}</span>',
             f'<span class="dm-kv"><b>top score</b> {grade.top_score:.3f}</span>',
             f'<span class="dm-kv"><b>lexical coverage</b> {grade.lex_coverage:.2f}</span>',
             f'<span class="dm-kv"><b>web compensation</b> {"ran" if web_compensated else "no"}</span>']
    if grade.reason:
        parts.append(f'<span class="dm-kv"><b>why</b> {esc(describe_reason(grade.reason))}</span>')
    return f'<div class="dm-gradebar">{"".join(parts)}</div>'


def claims_html(digest: RunDigest) -> str:
    """The claim checks behind the verdict: counts, chips for unsupported and contradicted claims, invalid
    references; a reply with no claims (a greeting, DocMind's own note) shows none."""
    done = digest.done
    if done is None:
        return ""
    c = done.citations
    bits = []
    # a reply that searched nothing has no claims; one stored before they were dropped still shows none
    checked = digest.verdict is None or digest.verdict.level != "not_checked"
    if c.claims and checked:
        bits.append(f"<b>claims</b> {c.supported_claims} supported")
        if c.unsupported_claims:
            bits.append(f'<span class="dm-cite-unsupported">{c.unsupported_claims} unsupported</span>')
        if c.contradicted_claims:
            bits.append(f'<span class="dm-cite-contradicted">{c.contradicted_claims} contradicted</span>')
        bits.append(f"<b>cited sentences</b> {c.cited_sentences}/{c.substantive_sentences}")
    if c.invalid_refs:
        bits.append(f'<span class="dm-cite-invalid">{c.invalid_refs} invalid reference'
                    f'{"s" if c.invalid_refs != 1 else ""}</span>')
    if done.cancelled:
        bits.append("<b>stopped by you</b>")
    return '<div class="dm-gradebar">' + " · ".join(bits) + "</div>" if bits else ""


def glance_html(digest: RunDigest) -> str:
    """One line that is always visible: scope, understanding, route and what retrieval did."""
    bits = []
    if digest.scope is not None:
        bits.append(f"<b>scope</b> {esc(digest.scope.scope.value)}")
    if digest.understood is not None:
        u = digest.understood.understanding
        bits.append(f"<b>intent</b> {esc(u.intent.value)} · {esc(u.complexity.value)} · {esc(u.specificity.value)}"
                    + (" · ambiguous" if u.is_ambiguous else ""))
    if digest.routed is not None:
        d = digest.routed.decision
        bits.append(f"<b>route</b> {esc(d.mode.value)}")
        if digest.routed.plan is not None:
            bits.append("<b>planned</b> " + esc(", ".join(digest.routed.plan.tools)))
    if digest.agentic_steps:
        calls = sum(len(s.tool_calls) for s in digest.agentic_steps)
        bits.append(f"<b>agentic</b> {len(digest.agentic_steps)} round(s), {calls} tool call(s)")
    if digest.stop_reason:
        bits.append(f"<b>stop</b> {esc(describe_reason(digest.stop_reason))}")
    bits += [f"<b>judge ({esc(j.target)})</b> {esc(judge_summary(j))}" for j in digest.judgements]
    if digest.fallbacks or digest.errors:
        bits.append(f"<b>fallbacks/errors</b> {len(digest.fallbacks)}/{len(digest.errors)}")
    if digest.done is not None and digest.done.backend:
        bits.append(f"<b>model</b> {esc(digest.done.backend)}")
    return '<div class="dm-glance">' + " · ".join(bits) + "</div>" if bits else ""


def judge_summary(event) -> str:
    """The model judge's verdict in a few words: the evidence verdict and its tier change, or the claim counts."""
    if event.via == "offline":
        return "offline checks kept"
    if event.via == "skipped":
        return "not asked (no verdict could change the tier)"
    if event.evidence is not None:
        score = f" (P(yes) {event.evidence.p_yes:.2f})" if event.evidence.p_yes is not None else ""
        moved = f", {event.tier_before} → {event.tier_after}" if event.tier_before != event.tier_after else ""
        quote = ", its quote checked in the passage" if event.evidence.quote_verified else ""
        return f"{event.evidence.verdict}{score}{quote}{moved}"
    counts = {}
    for claim in event.claims:
        counts[claim.status] = counts.get(claim.status, 0) + 1
    return ", ".join(f"{n} {status.replace('_', ' ')}" for status, n in counts.items()) or "no claim read"


def _items_table(items: Sequence[dict]) -> str:
    if not items:
        return ""
    columns = list(dict.fromkeys(k for item in items for k in item if item.get(k) not in ("", None)))
    head = "".join(f"<th>{esc(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{esc(item.get(c, ''))}</td>" for c in columns) + "</tr>" for item in items)
    return f'<table class="dm-items"><tr>{head}</tr>{body}</table>'


def timeline_html(rows: Sequence[TimelineRow]) -> str:
    """The run timeline as one escaped table: time, step, fields and tool/worker rows."""
    out = ['<table class="dm-timeline">']
    for row in rows:
        duration = f" <small>({row.duration_ms:.0f} ms)</small>" if row.duration_ms else ""
        fields = "".join(f"<span><b>{esc(k)}</b> {esc(v)}</span>" for k, v in row.fields.items())
        out.append(
            f'<tr class="dm-{row.status}" data-kind="{esc(row.kind, " ")}"><td class="dm-t">{row.t_ms:.0f} ms</td>'
            f'<td class="dm-step">{_STATUS_ICON[row.status]} {esc(row.title)}{duration}</td>'
            f'<td><div class="dm-fields">{fields}</div>{_items_table(row.items)}</td></tr>')
    out.append("</table>")
    return "".join(out)


def backend_html(status: BackendStatus) -> str:
    dot = "dm-dot-live" if status.live else "dm-dot-fallback"
    hint = ""
    if not status.live and status.how_to_enable:
        hint = f"<small>to enable: {esc(status.how_to_enable)}</small>"
    elif status.detail:
        hint = f"<small>{esc(status.detail)}</small>"
    return (f'<div class="dm-backend"><span class="dm-dot {dot}"></span><b>{esc(status.role)}</b>: '
            f"{esc(status.name)}{hint}</div>")


def route_html(digest: RunDigest) -> str:
    """Why the run took its path, in the words of the route stage (older traces: the machine reason)."""
    if digest.routed is None:
        return ""
    d = digest.routed.decision
    why = d.explanation or f"{describe_reason(d.reason)} -> {d.mode.value}"
    note = f" · {esc(digest.routed.note)}" if digest.routed.note else ""
    return f'<div class="dm-route"><b>Why this route:</b> {esc(why)}{note}</div>'


def rounds_html(digest: RunDigest) -> str:
    """Each agentic round's tool calls on one line: tool, query, hits (new), status when not ok."""
    lines = []
    for step in digest.agentic_steps:
        calls = []
        for call in step.tool_calls:
            query = call.args.get("query") or call.args.get("code") or ""
            label = f"{call.name}" + (f" “{query}”" if query else "")
            outcome = f"{call.result_count} hits ({call.new_chunks} new)"
            if call.status != "ok":
                outcome += f", {call.status}"
            bad = " dm-call-bad" if call.status in ("error", "rejected") else ""
            calls.append(f'<span class="dm-call{bad}">{esc(label)} → {esc(outcome)}</span>')
        lines.append(f"<div><b>Round {step.iteration}</b> " + ("".join(calls) or "no tool call") + "</div>")
    if not lines:
        return ""
    stop = f"<div><small>stopped: {esc(describe_reason(digest.stop_reason))}</small></div>" \
        if digest.stop_reason else ""
    return '<div class="dm-rounds">' + "".join(lines) + stop + "</div>"


_DIFF_TAGS = {"equal": ("", ""), "delete": ("<del>", "</del>"), "insert": ("<ins>", "</ins>")}


def _pieces_html(pieces: Sequence[DiffPiece], keep: tuple[str, ...]) -> str:
    return "".join(f"{_DIFF_TAGS[p.op][0]}{esc(p.text)}{_DIFF_TAGS[p.op][1]}" for p in pieces if p.op in keep)


def answer_diff_html(diff: AnswerDiff, label_a: str = "A", label_b: str = "B") -> str:
    """The two answers sentence by sentence, A left and B right: inside a changed sentence the words only A has
    struck through, those only B has in green.  Answers that share little: the two texts side by side."""
    head = f"<tr><th>A · {esc(label_a)}</th><th>B · {esc(label_b)}</th></tr>"
    if diff.layout == "same" or not diff.rows and diff.layout != "columns":
        body = _pieces_html(diff.pieces, ("equal", "delete", "insert"))
        return f'<div class="dm-diff">{body or "<i>both answers are empty</i>"}</div>'
    if diff.layout == "columns":
        return (f'<table class="dm-diff dm-diff-rows dm-diff-columns">{head}<tr><td>{esc(diff.answer_a)}</td>'
                f"<td>{esc(diff.answer_b)}</td></tr></table>")
    rows = []
    for row in diff.rows:
        if row.op == "changed":
            a, b = _pieces_html(row.pieces, ("equal", "delete")), _pieces_html(row.pieces, ("equal", "insert"))
        else:
            a, b = esc(row.a), esc(row.b)
        rows.append(f'<tr class="dm-diff-{row.op}"><td>{a}</td><td>{b}</td></tr>')
    return f'<table class="dm-diff dm-diff-rows dm-diff-sentences">{head}{"".join(rows)}</table>'


def pair_verdict_html(verdict: PairVerdict) -> str:
    """Which run did better, and each aspect weighed (value A / value B)."""
    items = "".join(f"<li>{esc(a.name)}: A {esc(a.a)} · B {esc(a.b)}"
                    + ("" if a.better == "unknown" else " — tie" if a.better == "tie" else f" — {a.better} better")
                    + "</li>" for a in verdict.aspects)
    return (f'<div class="dm-pair-verdict" data-winner="{esc(verdict.winner)}"><b>Which did better?</b> '
            f"{esc(verdict.line)}<ul>{items}</ul></div>")
