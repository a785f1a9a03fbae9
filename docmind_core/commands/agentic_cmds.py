"""``docmind eval agentic``: agentic (offline tool policy) vs one-shot retrieval on a multi-hop set."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from docmind_core.commands import Invocation, echo, echo_json, pass_invocation
from docmind_core.commands.eval_cmds import eval_setup


@click.command(name="agentic")
@click.argument("dataset_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--limit", type=int, default=None, help="Evaluate only the first N judged questions")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object")
@pass_invocation
def eval_agentic(invocation: Invocation, dataset_dir, limit, as_json):
    """Share of questions with ALL gold paragraphs in the final context: agentic loop vs one-shot.

    DATASET_DIR is a BEIR folder whose qrels list the paragraphs each question
    needs (HotpotQA: two).  Both modes use the same settings, so the same
    context budget; the agentic mode is driven by the offline tool policy.
    """
    from docmind_core.eval.agentic_eval import run_agentic_eval

    settings, embedder = eval_setup(invocation)
    say = (lambda msg: echo(msg, err=True)) if sys.stderr.isatty() and not as_json else None
    report = run_agentic_eval(dataset_dir, embedder, settings, invocation.home / "cache", limit=limit, progress=say)
    if as_json:
        echo_json(json.dumps(report, ensure_ascii=False, indent=2))
        return
    echo(f"{report['dataset']}: {report['queries']} questions, {report['documents']} documents, "
         f"embedder {report['embedder']}, context {report['context_budget']}")
    cols = ("both_gold_rate", "any_gold_rate", "mean_rounds", "mean_tool_calls", "p50_ms")
    echo(f"{'mode':<10}" + "".join(f"{c:>17}" for c in cols))
    for mode, values in report["modes"].items():
        echo(f"{mode:<10}" + "".join(f"{values[c]:>17}" for c in cols))
    echo(f"agentic - rule_planner (both gold): {report['both_gold_gain_points']:+.1f} points")
