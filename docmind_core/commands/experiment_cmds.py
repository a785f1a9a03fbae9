"""``docmind dataset ...`` and ``docmind experiment ...``: labelled datasets, experiments, threshold sweeps.

A tuning session on the command line::

    docmind dataset import data/demo_labelled.jsonl --name demo-set --kb demo
    docmind experiment run --dataset demo-set --name "rule vs agentic" --variant rule:RULE_PLANNER \
        --variant agentic:AGENTIC --leave-gold-out
    docmind experiment show 1                 # metrics with 95% intervals, paired differences
    docmind experiment sweep 1 --objective safe_recall --floor 0.9 --apply
    docmind experiment run --dataset demo-set --variant rule:RULE_PLANNER   # re-run with the applied thresholds
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from docmind_core.commands import (
    Invocation, as_user_option, echo, echo_json, pass_invocation, record_id_type, text_id_type, write_or_echo_json,
)
from docmind_core.experiments.metrics import METRICS, TIERS, ExperimentReport
from docmind_core.experiments.records import MODE_NAMES, Progress, parse_variant
from docmind_core.experiments.sweep import OBJECTIVE_HELP, OBJECTIVES


def _progress_line(p: Progress) -> str:
    # an ETA only while a runner works on it: a cancelled or paused experiment finishes at no time
    eta = f", ETA {p.eta_s:.0f} s" if p.eta_s is not None and p.state == "running" and p.pending + p.running \
        else ""
    return (f"[{p.done + p.failed}/{p.total}] done {p.done}, failed {p.failed}, pending {p.pending}"
            f"{eta}")


def _fmt(value) -> str:
    return "n/a" if value is None else (f"{value:.3f}" if isinstance(value, float) else str(value))


def print_report(report: ExperimentReport, description: str = "") -> None:
    echo(f"experiment #{report.experiment_id}: {report.name}", single_line=True)
    if description:
        echo(description, single_line=True)
    for v in report.variants:
        echo(f"\n== {v.name} (mode {MODE_NAMES.get(v.mode, v.mode)}{', ' + json.dumps(v.overrides) if v.overrides else ''}): "
             f"{v.runs} runs, {v.failed} failed, {v.runs_with_errors} with errors", single_line=True)
        for metric, (label, _on) in METRICS.items():
            echo(f"  {label:<28} {v.metrics[metric].text()}")
        echo(f"  {'cited but unsupported':<28} {v.cited_unsupported} of {v.citations_checked} checked")
        echo(f"  {'tool calls / rounds per run':<28} {_fmt(v.tool_calls_mean)} / {_fmt(v.rounds_mean)}")
        echo(f"  {'latency p50 / p95 (ms)':<28} {_fmt(v.latency_p50_ms)} / {_fmt(v.latency_p95_ms)}")
        echo(f"  {'tokens per run (in / out)':<28} {_fmt(v.prompt_tokens_mean)} / {_fmt(v.completion_tokens_mean)}")
        echo(f"  routes: {', '.join(f'{k} {n}' for k, n in v.routes.items())}", single_line=True)
        echo(f"  stop reasons: {', '.join(f'{k} {n}' for k, n in v.stop_reasons.items())}", single_line=True)
        echo(f"  tier confusion ({' / '.join(TIERS)}):")
        for row, tiers in v.confusion.items():
            echo(f"    {row:<34} " + " ".join(f"{tiers[t]:>5}" for t in TIERS))
    if report.differences:
        echo("\nPaired differences (B - A on the same questions, 95% bootstrap interval; * excludes 0):")
        for d in report.differences:
            mark = "*" if d.significant else " "
            echo(f" {mark} {METRICS[d.metric][0]:<28} {d.b} - {d.a}: {d.difference.text()}", single_line=True)


# -- datasets -----------------------------------------------------------------
@click.group()
def dataset():
    """Labelled datasets: import (JSONL or BEIR), list, show, share, delete, label runs."""


@dataset.command("import")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("--name", required=True, help="Dataset name (unique).")
@click.option("--kb", default="", help="Knowledge base of items that name none (required for BEIR).")
@click.option("--limit", type=int, default=None, help="Keep the first N questions.")
@click.option("--ingest", "ingest_corpus", is_flag=True, help="BEIR: add the corpus to --kb as <id>.txt.")
@click.option("--visibility", type=click.Choice(["private", "department", "public"]), default="private")
@click.option("--if-missing", is_flag=True, help="Do nothing when a dataset of that name exists.")
@click.option("--json", "as_json", is_flag=True)
@as_user_option
@pass_invocation
def dataset_import(invocation: Invocation, path, name, kb, limit, ingest_corpus, visibility, if_missing, as_json,
                   as_user):
    bench = invocation.workbench(as_user)
    found = bench.import_dataset(name, path, kb=kb, visibility=visibility, limit=limit,
                                 ingest_corpus=ingest_corpus, if_missing=if_missing)
    if as_json:
        echo_json(found.model_dump_json())
    else:
        echo(f"dataset #{found.id} {found.name}: {found.item_count} questions", single_line=True)


@dataset.command("list")
@click.option("--json", "as_json", is_flag=True)
@as_user_option
@pass_invocation
def dataset_list(invocation: Invocation, as_json, as_user):
    sets = invocation.workbench(as_user).list_datasets()
    if as_json:
        echo_json(json.dumps([d.model_dump(mode="json") for d in sets], ensure_ascii=False, indent=1))
        return
    for d in sets:
        echo(f"#{d.id:<4} {d.name:<32} {d.item_count:>6} questions  {d.visibility:<10} {d.source} "
             f"{d.kb_name}", single_line=True)


@dataset.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True)
@as_user_option
@pass_invocation
def dataset_show(invocation: Invocation, name, as_json, as_user):
    bench = invocation.workbench(as_user)
    found = bench.get_dataset(name)
    items = bench.dataset_items(found.id)
    if as_json:
        echo_json(json.dumps({"dataset": found.model_dump(mode="json"),
                              "items": [i.model_dump(mode="json") for i in items]}, ensure_ascii=False, indent=1))
        return
    for i in items:
        mark = "A" if i.answerable else "U"
        echo(f"{i.id:>6} {mark} {i.kb or found.kb_name:<12} gold={','.join(i.gold_doc_ids or i.gold_chunk_ids)[:40]:<40}"
             f" {i.question[:70]}", single_line=True)


@dataset.command("share")
@click.argument("name")
@click.option("--visibility", type=click.Choice(["private", "department", "public"]), required=True)
@as_user_option
@pass_invocation
def dataset_share(invocation: Invocation, name, visibility, as_user):
    bench = invocation.workbench(as_user)
    found = bench.share_dataset(bench.get_dataset(name).id, visibility)
    echo(f"dataset {found.name} is {found.visibility}", single_line=True)


@dataset.command("delete")
@click.argument("name")
@as_user_option
@pass_invocation
def dataset_delete(invocation: Invocation, name, as_user):
    bench = invocation.workbench(as_user)
    bench.delete_dataset(bench.get_dataset(name).id)
    echo("deleted")


@dataset.command("label")
@click.argument("run_id", type=text_id_type("run id"))
@click.option("--verdict", type=click.Choice(["right", "correct", "partly", "wrong", "should_abstain"]), required=True,
              help="right (= correct), partly, wrong, or should_abstain (the KB does not hold the answer).")
@click.option("--gold", "gold", multiple=True, help="A source chunk id of the run that holds the answer.")
@click.option("--source-doc", "source_docs", multiple=True,
              help="The right source: a document of the run's knowledge bases, by name.")
@click.option("--dataset", "dataset_name", default=None,
              help="Add the question to this dataset (default: your labelled dataset of the run's KBs).")
@as_user_option
@pass_invocation
def dataset_label(invocation: Invocation, run_id, verdict, gold, source_docs, dataset_name, as_user):
    """Label a run's answer (again: to correct it); its question joins a dataset of labelled runs."""
    label = invocation.workbench(as_user).label_run(run_id, verdict, list(gold), dataset=dataset_name,
                                                    gold_doc_ids=list(source_docs))
    echo(f"run {label.run_id}: {label.verdict} (dataset item #{label.dataset_item_id})", single_line=True)


@dataset.command("unlabel")
@click.argument("run_id", type=text_id_type("run id"))
@as_user_option
@pass_invocation
def dataset_unlabel(invocation: Invocation, run_id, as_user):
    """Take back a run's label (and the dataset item it added)."""
    invocation.workbench(as_user).remove_label(run_id)
    echo(f"run {run_id}: label removed", single_line=True)


@dataset.command("labels")
@click.option("--kb", "kbs", multiple=True, help="Labels of runs that asked only these KBs (repeatable).")
@click.option("--jsonl", "jsonl_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the labels with their runs (question, answer, verdict, evidence, config) as JSONL.")
@click.option("--langfuse", "langfuse_name", default=None, help="Send them as this Langfuse dataset (--kb needed).")
@as_user_option
@pass_invocation
def dataset_labels(invocation: Invocation, kbs, jsonl_path, langfuse_name, as_user):
    """Review the labels of your runs, with each KB group's badge; export them as JSONL or to Langfuse."""
    bench = invocation.workbench(as_user)
    kb_ids = bench.kb_ids_for(list(kbs)) if kbs else None
    if jsonl_path:
        jsonl_path.write_text(bench.export_labels(kb_ids), encoding="utf-8")
        echo(f"wrote {jsonl_path}")
        return
    if langfuse_name is not None:
        if not kb_ids:
            raise click.UsageError("--langfuse needs --kb: the labels of which knowledge bases")
        name, sent = bench.export_labels_to_langfuse(kb_ids, langfuse_name)
        echo(f"sent {sent} label(s) to the Langfuse dataset {name}", single_line=True)
        return
    for row in bench.list_labels(kb_ids):
        label = row.label
        source = ", ".join(label.gold_doc_ids + label.gold_chunk_ids)
        echo(f"{label.run_id[:12]}  {'right' if label.verdict == 'correct' else label.verdict:<14} "
             f"{label.answer_verdict or '-':<16} {' + '.join(row.kb_names):<20} {row.question[:60]}"
             + (f"  [source: {source}]" if source else ""), single_line=True)
    if kb_ids:
        echo(bench.kb_badge(kb_ids).statement, single_line=True)


# -- experiments ----------------------------------------------------------------
@click.group()
def experiment():
    """One dataset x N variants through the normal pipeline; metrics, sweeps, export."""


@experiment.command("run")
@click.argument("experiment_id", type=record_id_type("experiment id"), required=False)
@click.option("--dataset", "dataset_name", default=None, help="Create a new experiment on this dataset.")
@click.option("--variant", "variants", multiple=True,
              help="NAME:MODE[:key=value,...] with MODE AUTO, RULE_PLANNER or AGENTIC (any case; rule and "
                   "agentic too), e.g. deep:AGENTIC:agentic.max_iterations=2 (repeatable)")
@click.option("--name", default="", help="Name of the new experiment (default: the dataset and variant names).")
@click.option("--leave-gold-out", is_flag=True, help="Also ask each question with its gold documents excluded.")
@click.option("--limit", type=int, default=None, help="Only the first N questions.")
@click.option("--parallel", type=int, default=None, help="Runs in flight (at most experiments.max_parallel).")
@click.option("--max-runs", type=int, default=None, help="Stop after N runs (resume later).")
@click.option("--json", "as_json", is_flag=True)
@as_user_option
@pass_invocation
def experiment_run(invocation: Invocation, experiment_id, dataset_name, variants, name, leave_gold_out, limit,
                   parallel, max_runs, as_json, as_user):
    """Run a new experiment (--dataset and --variant), or resume EXPERIMENT_ID where it stopped."""
    bench = invocation.workbench(as_user)
    if experiment_id is None:
        if not dataset_name or not variants:
            raise click.UsageError("give EXPERIMENT_ID to resume, or --dataset and at least one --variant")
        found = bench.get_dataset(dataset_name)
        created = bench.create_experiment(name, found.id, [parse_variant(v) for v in variants],
                                          leave_gold_out=leave_gold_out, limit=limit)
        experiment_id = created.id
        if not as_json:
            echo(f"experiment #{experiment_id} {created.name}", err=True, single_line=True)
            echo(created.description, err=True, single_line=True)

    def show(p: Progress) -> None:
        if not as_json:
            echo(_progress_line(p), err=True)

    try:
        result = bench.run_experiment(experiment_id, progress=show, max_runs=max_runs, parallel=parallel)
    except KeyboardInterrupt:  # rows in flight go back to pending on the next run
        echo(f"interrupted: resume with `docmind experiment run {experiment_id}`", err=True)
        sys.exit(130)
    if as_json:
        echo_json(json.dumps({"experiment_id": experiment_id, "progress": result.model_dump(mode="json")}))
    else:
        echo(f"experiment #{experiment_id}: {result.state}; {_progress_line(result)}")


@experiment.command("list")
@click.option("--json", "as_json", is_flag=True)
@as_user_option
@pass_invocation
def experiment_list(invocation: Invocation, as_json, as_user):
    bench = invocation.workbench(as_user)
    found = bench.list_experiments()
    if as_json:
        rows = [{**e.model_dump(mode="json"), "progress": bench.experiment_progress(e.id).model_dump(mode="json")}
                for e in found]
        echo_json(json.dumps(rows, ensure_ascii=False, indent=1))
        return
    for e in found:
        p = bench.experiment_progress(e.id)
        echo(f"#{e.id:<4} {e.state:<10} {p.done}/{p.total} dataset #{e.dataset_id} "
             f"{', '.join(v.name for v in e.variants)}  {e.name}", single_line=True)
        if e.description:
            echo(f"      {e.description}", single_line=True)


@experiment.command("show")
@click.argument("experiment_id", type=record_id_type("experiment id"))
@click.option("--compare", "compare_item", type=record_id_type("dataset item id"), default=None,
              help="Drill down: the step-aligned comparison of two variants' runs of this dataset item.")
@click.option("--a", "variant_a", default=None)
@click.option("--b", "variant_b", default=None)
@click.option("--gold-left-out", is_flag=True, help="With --compare: the leave-gold-out run of the item.")
@click.option("--json", "as_json", is_flag=True)
@as_user_option
@pass_invocation
def experiment_show(invocation: Invocation, experiment_id, compare_item, variant_a, variant_b, gold_left_out, as_json,
                    as_user):
    """Metrics per variant with 95% intervals, paired differences, tier confusion; or one question's runs."""
    bench = invocation.workbench(as_user)
    if compare_item is not None:
        names = [v.name for v in bench.get_experiment(experiment_id).variants]
        a, b = variant_a or names[0], variant_b or names[-1]
        comparison = bench.compare_experiment_runs(experiment_id, compare_item, a, b, gold_left_out)
        if as_json:
            echo_json(comparison.to_json())
            return
        echo(f"question (item #{compare_item}): {comparison.a.question}", single_line=True)
        echo(f"gold left out: {'yes: asked without its gold documents' if gold_left_out else 'no'}")
        for row in comparison.summary_rows():
            echo(f"  {row['metric']:<26} {row['A']:<14} {row['B']}", single_line=True)
        for step in comparison.steps:
            left = step.a.title if step.a else "—"
            right = step.b.title if step.b else "—"
            echo(f"  {step.kind:<16} {left[:50]:<52} {right[:50]}", single_line=True)
        return
    report = bench.experiment_report(experiment_id)
    if as_json:
        echo_json(json.dumps({**report.to_dict(),
                              "progress": bench.experiment_progress(experiment_id).model_dump(mode="json")},
                             ensure_ascii=False, indent=1, default=str))
        return
    print_report(report, bench.get_experiment(experiment_id).description)


@experiment.command("cancel")
@click.argument("experiment_id", type=record_id_type("experiment id"))
@as_user_option
@pass_invocation
def experiment_cancel(invocation: Invocation, experiment_id, as_user):
    echo(invocation.workbench(as_user).cancel_experiment(experiment_id))


@experiment.command("export")
@click.argument("experiment_id", type=record_id_type("experiment id"))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option("--json", "as_json", is_flag=True, help="(the export is always JSON)")
@as_user_option
@pass_invocation
def experiment_export(invocation: Invocation, experiment_id, output, as_json, as_user):
    text = invocation.workbench(as_user).export_experiment(experiment_id)
    write_or_echo_json(text, output)


@experiment.command("sweep")
@click.argument("experiment_id", type=record_id_type("experiment id"))
@click.option("--objective", type=click.Choice(list(OBJECTIVES)), default="f1", show_default=True,
              help="; ".join(f"{k}: {v}" for k, v in OBJECTIVE_HELP.items()))
@click.option("--floor", type=click.FloatRange(0, 1), default=None,
              help="Recommend only points keeping unanswerable questions not HIGH in at least this share of "
                   "their runs (default: experiments.sweep_floor, 0.9).")
@click.option("--variant", default=None, help="Only this variant's runs (default: all).")
@click.option("--apply", "apply_it", is_flag=True,
              help="Apply the recommended thresholds (your personal values; global for an admin).")
@click.option("--json", "as_json", is_flag=True)
@as_user_option
@pass_invocation
def experiment_sweep(invocation: Invocation, experiment_id, objective, floor, variant, apply_it, as_json, as_user):
    """Re-grade the stored runs over a threshold grid (no model call) and recommend thresholds that keep
    unanswerable questions not HIGH at or above the safety floor."""
    bench = invocation.workbench(as_user)
    result = bench.sweep_experiment(experiment_id, variant)
    floor = bench.settings().experiments.sweep_floor if floor is None else floor
    advice = result.recommendation(objective, floor)
    best = advice.point
    if apply_it and best is not None:
        bench.apply_thresholds(best)
    if as_json:
        echo_json(json.dumps({**result.to_dict(), **advice.to_dict(), "objective_help": OBJECTIVE_HELP[objective],
                              "applied": bool(apply_it and best)}, ensure_ascii=False, default=str))
    else:
        echo(f"{result.runs} runs ({result.positives} answerable with gold in context, "
             f"{result.unanswerable} unanswerable, {result.skipped} not graded); {len(result.points)} points")
        echo(f"objective {objective}: {OBJECTIVE_HELP[objective]}")
        echo(f"safety floor: not HIGH on unanswerable >= {floor:.2f}")
        rows = [("live", advice.live), (f"recommended ({objective})", best)]
        if best is None and advice.safest is not None:
            rows.append(("safest (below floor)", advice.safest))
        for label, point in rows:
            if point is not None:
                echo(f"{label:<26} high={point.high:.2f} low={point.low:.2f} {point.mode:<15} "
                     f"precision={_fmt(point.precision)} recall={_fmt(point.recall)} "
                     f"unanswerable not-HIGH={_fmt(point.unanswerable_not_high)}")
        echo(advice.reason, single_line=True)
        if best is not None:
            for rate, (before, after) in advice.change().items():
                echo(f"predicted {rate}: {_fmt(before)} -> {_fmt(after)}")
        if apply_it and best is not None:
            echo(f"applied: grader.high_threshold={best.high} grader.low_threshold={best.low} "
                 f"grader.gray_zone_mode={best.mode}")
    if apply_it and best is None:
        raise click.ClickException(f"nothing applied: {advice.reason}")
