"""``docmind search`` (per-stage scores), ``docmind eval retrieval`` (BEIR metrics) and ``docmind eval answers``
(a language model's answers against labelled gold facts, per mode)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from docmind_core.backends.protocols import Embedder
from docmind_core.commands import Invocation, as_user_option, echo, echo_json, pass_invocation
from docmind_core.errors import CallerError, DocMindError
from docmind_core.settings import Settings, coerce
from docmind_core.accounts.users import LOCAL_USER
from docmind_core.workbench import Workbench


def _fmt(value, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _print_search(result) -> None:
    for gap in result.index_gaps:  # a KB with missing vectors: its vector side sees only part of it
        echo(f"warning: {gap.message()}")
    for pending in result.pending:  # a KB still being ingested: its pending documents were not searched
        echo(f"warning: {pending.message()}")
    echo(f"{len(result.chunks)} chunk(s) kept, {result.used_tokens} tokens; "
         + " ".join(f"{k}={v:.1f}ms" for k, v in result.timings_ms.items()))
    header = f"{'#':>2} {'cut_by':<7} {'vector':>7} {'v#':>3} {'bm25':>7} {'k#':>3} {'fused':>6} {'rerank':>6} " \
             f"{'mmr':>6}  document / text"
    echo(header)
    for n, c in enumerate(result.candidates, start=1):
        s = c.scores
        text = " ".join(c.text.split())[:70]
        echo(f"{n:>2} {(c.cut_by or 'kept'):<7} {_fmt(s.vector):>7} {_fmt(s.vector_rank):>3} "
             f"{_fmt(s.keyword, 2):>7} {_fmt(s.keyword_rank):>3} {_fmt(s.fused):>6} {_fmt(s.rerank):>6} "
             f"{_fmt(s.mmr):>6}  {c.cited_as}{' [expanded]' if c.expanded else ''}"
             f"{' [across languages]' if s.rerank_across else ''}: {text}", single_line=True)


def eval_setup(invocation: Invocation, overrides: tuple[str, ...] = ()) -> tuple[Settings, Embedder]:
    """(settings with ``--set KEY=VALUE`` overrides, embedder) for an evaluation run.

    Evaluations build their own throw-away index (embeddings cached under the invocation's home), so they
    also work without a usable home (defaults then).
    """
    from docmind_core.backends.factory import build_embedder

    try:
        engine = invocation.engine()
        settings = Workbench(engine, LOCAL_USER, channel="cli").settings()
        embedder = getattr(engine, "embedder", None)
    except DocMindError:
        raise
    except Exception:  # no usable home: evaluate with defaults
        settings, embedder = Settings(), None
    pairs = {}
    for item in overrides:
        if "=" not in item:
            raise CallerError(f"--set expects KEY=VALUE, got {item!r}")
        key, raw = item.split("=", 1)
        pairs[key.strip()] = coerce(key.strip(), raw.strip())
    settings = settings.with_overrides(pairs) if pairs else settings
    if embedder is None or pairs.keys() & {"embedding.provider", "embedding.model"}:
        embedder, note = build_embedder(settings.embedding)
        if note:
            echo(f"note: {note}", err=True)
    return settings, embedder


@click.command()
@click.argument("query")
@click.option("--kb", "kbs", multiple=True, required=True, help="Knowledge base name (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the SearchResult as JSON.")
@as_user_option
@pass_invocation
def search(invocation: Invocation, query, kbs, as_json, as_user):
    """Hybrid search with every candidate's per-stage scores and the stage that cut it."""
    bench = invocation.workbench(as_user)
    kb_ids = [bench.kb_by_name(name).id for name in kbs]
    result = bench.search(query, kb_ids)  # access and embedder checks included
    if as_json:
        echo_json(json.dumps(result.model_dump(mode="json"), ensure_ascii=False, indent=2))
    else:
        _print_search(result)


@click.group(name="eval")
def eval_group():
    """Quality evaluations."""


@eval_group.command(name="retrieval")
@click.argument("dataset_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--systems", default="bm25,vector,hybrid,hybrid_rerank", show_default=True,
              help="Comma-separated: bm25, vector, hybrid, hybrid_rerank")
@click.option("--k", default=10, show_default=True, help="Cut-off for nDCG and MRR")
@click.option("--limit", type=int, default=None, help="Evaluate only the first N judged queries")
@click.option("--answers", is_flag=True, help="Also report chunk-level answer recall@k (needs answers)")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Config override for this run, e.g. retrieval.vector_weight=0.3 (repeatable)")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object")
@pass_invocation
def eval_retrieval(invocation: Invocation, dataset_dir, systems, k, limit, answers, overrides, as_json):
    """nDCG@k, Recall@5/10/100 and MRR@k per system on a BEIR folder (corpus.jsonl, queries.jsonl, qrels.tsv)."""
    from docmind_core.eval.retrieval_eval import run_retrieval_eval

    settings, embedder = eval_setup(invocation, overrides)
    names = [s.strip() for s in systems.split(",") if s.strip()]
    say = (lambda msg: echo(msg, err=True)) if sys.stderr.isatty() and not as_json else None
    try:
        report = run_retrieval_eval(dataset_dir, embedder, settings, invocation.home / "cache", systems=names, k=k,
                                    limit=limit, answers=answers, progress=say)
    except ValueError as exc:
        raise CallerError(str(exc)) from None
    if as_json:
        echo_json(json.dumps(report, ensure_ascii=False, indent=2))
        return
    echo(f"{report['dataset']}: {report['queries']} queries, {report['documents']} documents, "
         f"{report['chunks']} chunks, embedder {report['embedder']}")
    metrics = [m for m in next(iter(report["systems"].values())) if m not in ("queries",)]
    echo(f"{'system':<14}" + "".join(f"{m:>18}" for m in metrics))
    for name, values in report["systems"].items():
        echo(f"{name:<14}" + "".join(f"{values[m]:>18}" for m in metrics))


@eval_group.command(name="answers")
@click.option("--dataset", "dataset", required=True,
              help="A stored labelled dataset (name or id, e.g. demo) or a JSONL file of labelled questions")
@click.option("--modes", default="rule,agentic,auto", show_default=True,
              help="Comma-separated: rule, agentic, auto")
@click.option("--kb", "kb_name", default="", help="Knowledge base for items that name none (default: the "
                                                  "dataset's)")
@click.option("--limit", type=int, default=None, help="Only the first N questions")
@click.option("--llm", "llm", type=click.Choice(["configured", "offline"]), default="configured",
              show_default=True, help="configured: the model of llm.* (any OpenAI-compatible endpoint); "
                                      "offline: the offline engine, the baseline")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object")
@as_user_option
@pass_invocation
def eval_answers(invocation: Invocation, dataset, modes, kb_name, limit, llm, as_json, as_user):
    """Right answers per mode against the labelled gold facts, with band, citations, tool calls, repairs of
    printed calls and the time of each stage.  Exit 0 when every run ended, 1 when some failed."""
    from docmind_core.experiments.answers_eval import format_report, run_answers_eval
    from docmind_core.experiments.datasets import read_jsonl_file

    bench = invocation.workbench(as_user)
    path = Path(dataset)
    if path.suffix == ".jsonl" and path.is_file():
        items, default_kb = read_jsonl_file(path), kb_name
    else:
        found = bench.get_dataset(dataset)
        items, default_kb = bench.dataset_items(found.id), kb_name or found.kb_name
    items = items[:limit] if limit else items
    kb_ids: dict[str, int] = {}

    def kb_of(item) -> list[int]:
        name = item.kb or default_kb
        if not name:
            raise CallerError(f"question {item.external_id or item.id} names no knowledge base: pass --kb")
        if name not in kb_ids:
            kb_ids[name] = bench.kb_by_name(name).id
        return [kb_ids[name]]

    label = f"eval answers ({llm})"

    def ask(item, mode):
        if llm == "offline":
            return bench.ask_offline(item.question, kb_of(item), mode=mode, label=label)
        return bench.ask(item.question, kb_of(item), mode=mode, label=label)

    for item in items:  # every KB is resolved (and its access checked) before the first, slow, run
        kb_of(item)
    backend = "offline engine" if llm == "offline" else next(
        (f"{b.name}{'' if b.live else ' (not live)'}" for b in bench.backends() if b.role == "llm"), "")
    say = (lambda msg: echo(msg, err=True)) if not as_json else None
    try:
        report = run_answers_eval(ask, items, [m.strip() for m in modes.split(",") if m.strip()],
                                  backend=backend, progress=say)
    except ValueError as exc:
        raise CallerError(str(exc)) from None
    if as_json:
        echo_json(json.dumps(report, ensure_ascii=False, indent=2))
    else:
        echo(format_report(report))
    if any(s["failed"] for s in report["modes"].values()):
        sys.exit(1)
