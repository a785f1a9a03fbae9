"""``docmind ask``, ``docmind config`` and ``docmind traces``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from docmind_core.commands import (
    Invocation, as_user_option, echo, echo_json, pass_invocation, text_id_type, write_or_echo_json,
)
from docmind_core.errors import CallerError
from docmind_core.events import Done, Notice, RunStarted, Token
from docmind_core.values import cited_place
from docmind_core.reports.run_summary import summarise, timeline_lines
from docmind_core.settings import coerce, key_specs


def _kb_ids(bench, names: tuple[str, ...]) -> list[int]:
    """The named KBs, or every KB the user may read (the run leaves out, with an event, any it may not)."""
    return bench.kb_ids_for(list(names)) if names else [kb.id for kb in bench.list_kbs()]


@click.command()
@click.argument("question")
@click.option("--kb", "kbs", multiple=True, help="Knowledge base name (repeatable). Default: all.")
@click.option("--mode", type=click.Choice(["auto", "rule", "agentic", "RULE_PLANNER", "AGENTIC", "AUTO"],
                                          case_sensitive=False),
              default="auto", show_default=True, help="The path: auto, RULE_PLANNER (rule) or AGENTIC.")
@click.option("--doc", "docs", multiple=True, help="Select a document by name: read it directly (SELECTED_DOC).")
@click.option("--conversation", default=None, type=text_id_type("conversation id"),
              help="Conversation id to continue (history is used for rewriting).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
@click.option("--timeline/--no-timeline", default=True, show_default=True, help="Print the event timeline.")
@as_user_option
@pass_invocation
def ask(invocation: Invocation, question, kbs, mode, docs, conversation, as_json, timeline, as_user):
    """Ask a question; prints the streamed answer, its sources and the event timeline."""
    bench = invocation.workbench(as_user)
    kb_ids = _kb_ids(bench, kbs)
    doc_ids = _doc_ids(bench, kb_ids, docs)
    events = []
    streaming = not as_json and sys.stdout.isatty()
    for event in bench.ask(question, kb_ids, conversation_id=conversation, mode=mode, selected_doc_ids=doc_ids):
        events.append(event)
        if streaming and isinstance(event, Token):
            echo(event.text, nl=False)
        elif streaming and isinstance(event, Notice):  # DocMind's own note: beside the answer, not in it
            echo(f"[note] {event.text}\n")
    summary = summarise(events)
    asked = list(events[0].kb_ids) if events and isinstance(events[0], RunStarted) else []  # the KBs it could read
    badge = bench.kb_badge(asked) if asked else None
    summary.kb_badge = badge.model_dump(mode="json") if badge is not None else None
    if as_json:
        echo_json(json.dumps(summary.model_dump(mode="json"), ensure_ascii=False, indent=2))
        return
    if not streaming:
        for notice in summary.notices:
            echo(f"[note] {notice['text']}\n")
        echo(summary.answer)
    echo("")
    verdict = summary.verdict or {}
    score = f" {verdict['score']:.2f}" if verdict.get("score") is not None else ""
    echo(f"\n[{summary.mode or 'no retrieval'}] verdict: {verdict.get('label', '-')}{score} "
         f"(evidence grade {summary.tier or '-'}) coverage={_fmt(summary.coverage)} backend={summary.backend}")
    if verdict.get("meaning"):
        echo(f"  {verdict['meaning']}")
    if badge is not None:
        echo(f"  {badge.statement}", single_line=True)
    if verdict.get("reasons"):
        echo("  why: " + "; ".join(verdict["reasons"]))
    if score:
        echo(f"  {score.strip()} is the {verdict['score_meaning']}")
    if summary.claims:
        counts = summary.claim_counts
        echo(f"claims: {counts.get('supported', 0)} supported, {counts.get('unsupported', 0)} unsupported, "
             f"{counts.get('contradicted', 0)} contradicted" + (" (ungrounded)" if summary.ungrounded else ""))
        for claim in summary.claims:
            if claim["status"] in ("unsupported", "contradicted"):
                echo(f"  {claim['status']}: {claim['text'].strip()} ({claim['reason']})", single_line=True)
    if summary.confidence_reason:
        echo(f"confidence: {summary.confidence_reason}")
    route_words = summary.route_explanation or summary.route_reason_words
    if route_words:
        echo(f"route: {route_words}")
    if summary.grade_reason_words:
        echo(f"evidence grade {summary.tier}: {summary.grade_reason_words}")
    if summary.stop_reason_words:
        echo(f"stopped: {summary.stop_reason_words}")
    if summary.sources:
        echo("\nSources:")
        for src in summary.sources:
            rerank = src.scores.get("rerank")
            label = "web" if src.origin == "web" else src.origin
            echo(f"  [{src.index}] {cited_place(src.document, src.location)} ({label}, rerank {_fmt(rerank)})"
                 f"{'  ' + src.url if src.url else ''}", single_line=True)
    if timeline:
        echo("\nTimeline:")
        for line in timeline_lines(events):
            echo("  " + line)


# -- config ---------------------------------------------------------------
@click.group()
def config():
    """Show and change configuration keys (validated; applies to the next run)."""


@config.command("list")
@click.option("--changed", is_flag=True, help="Only keys that differ from their default.")
@as_user_option
@pass_invocation
def config_list(invocation: Invocation, changed, as_user):
    """Every key with its value and range; '*' marks a changed global value, 'yours' a personal one."""
    view = invocation.workbench(as_user).config_view()
    values = view.effective.flat()
    for spec in key_specs():
        value = values[spec.key]
        if changed and value == spec.default:
            continue
        rng = f"[{spec.minimum}..{spec.maximum}]" if spec.minimum is not None or spec.maximum is not None else ""
        if spec.choices:
            rng = "{" + "|".join(spec.choices) + "}"
        mark = "*" if value != spec.default else " "
        yours = f"  yours (global {view.global_settings.get(spec.key)!r})" if spec.key in view.personal else ""
        echo(f"{mark} {spec.key:<38} = {value!r:<24} {rng}{yours}")
    for problem in view.problems:
        whose, flag = ("your personal", " --personal") if problem.scope == "personal" else ("stored", "")
        echo(f"! {whose} {problem.key}={problem.value!r} is ignored: {problem.message} "
             f"(docmind config reset {problem.key}{flag})")


@config.command("get")
@click.argument("key")
@as_user_option
@pass_invocation
def config_get(invocation: Invocation, key, as_user):
    echo(repr(invocation.workbench(as_user).settings().get(key)))


@config.command("set")
@click.argument("key")
@click.argument("value")
@click.option("--personal", is_flag=True,
              help="As your own value (grader/agentic/retrieval/rag keys); the default for members.")
@as_user_option
@pass_invocation
def config_set(invocation: Invocation, key, value, personal, as_user):
    """Change a key: globally (admins, and the operator), or as a member's personal value."""
    bench = invocation.workbench(as_user)
    settings = bench.set_config({key: coerce(key, value)}, scope="personal" if personal else None)
    scope = "yours" if personal or not bench.user.is_admin else "global"
    echo(f"{key} = {settings.get(key)!r} ({scope})")


@config.command("reset")
@click.argument("key", required=False)
@click.option("--all", "all_keys", is_flag=True)
@click.option("--personal", is_flag=True, help="Drop your own value, back to the global one.")
@as_user_option
@pass_invocation
def config_reset(invocation: Invocation, key, all_keys, personal, as_user):
    bench = invocation.workbench(as_user)
    if not all_keys and not key:
        raise click.UsageError("name a key or pass --all")
    bench.reset_config(None if all_keys else key, scope="personal" if personal else None)
    echo("reset")


@config.command("promote")
@click.argument("username")
@click.argument("keys", nargs=-1)
@as_user_option
@pass_invocation
def config_promote(invocation: Invocation, username, keys, as_user):
    """Make a member's personal values global (all of them, or KEYS); admins only."""
    bench = invocation.workbench(as_user)
    bench.promote_config(username, list(keys) or None)
    echo(f"promoted {', '.join(keys) if keys else 'every personal value'} of '{username}' to global")


@config.command("import")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--personal", is_flag=True, help="As your own values.")
@as_user_option
@pass_invocation
def config_import(invocation: Invocation, path, personal, as_user):
    """Set many keys at once from a JSON object {"group.key": value}; validated together."""
    if path.stat().st_size > CONFIG_IMPORT_MAX_BYTES:  # every key's value fits in a few KB
        raise CallerError(f"{path.name} is {path.stat().st_size / 1048576:.1f} MB; a config file to import "
                           f"may hold at most {CONFIG_IMPORT_MAX_BYTES // 1024} KB")
    try:
        changes = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # ValueError: JSON's, or a huge integer
        raise CallerError(f"{path.name} is not a JSON object of config keys: {exc}") from None
    if not isinstance(changes, dict):
        raise CallerError(f"{path.name} must hold one JSON object of config keys")
    bench = invocation.workbench(as_user, channel="import")
    bench.set_config(changes, scope="personal" if personal else None)
    echo(f"imported {len(changes)} keys from {path.name}")


@config.command("history")
@click.option("--limit", default=20, show_default=True)
@as_user_option
@pass_invocation
def config_history(invocation: Invocation, limit, as_user):
    """Recent changes with who made them."""
    for h in invocation.workbench(as_user).config_history(limit):
        to = "default" if h.new_value is None else repr(h.new_value)
        echo(f"{h.changed_at[:19]}  {h.scope:<8} {h.key:<36} -> {to:<16} by {h.changed_by}", single_line=True)


# -- traces ---------------------------------------------------------------
@click.group()
def traces():
    """List, show, export and import stored runs."""


@traces.command("list")
@click.option("--limit", default=20, show_default=True)
@as_user_option
@pass_invocation
def traces_list(invocation: Invocation, limit, as_user):
    for t in invocation.workbench(as_user).list_traces(limit=limit):
        echo(f"{t.run_id}  {t.started_at[:19]}  {t.mode:<13} {t.tier:<10} {t.stop_reason:<16} "
             f"{t.question[:60]}", single_line=True)


@traces.command("show")
@click.argument("run_id", type=text_id_type("run id"))
@as_user_option
@pass_invocation
def traces_show(invocation: Invocation, run_id, as_user):
    record = invocation.workbench(as_user).get_trace(run_id)
    for line in timeline_lines(record.events):
        echo(line)
    done = next((e for e in record.events if isinstance(e, Done)), None)
    if done:
        echo("\n" + done.answer)


@traces.command("export")
@click.argument("run_ids", nargs=-1, required=True, type=text_id_type("run id"))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None)
@as_user_option
@pass_invocation
def traces_export(invocation: Invocation, run_ids, output, as_user):
    text = invocation.workbench(as_user).export_traces(list(run_ids))
    write_or_echo_json(text, output)


@traces.command("import")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@as_user_option
@pass_invocation
def traces_import(invocation: Invocation, path, as_user):
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CallerError(f"{path.name} is not a DocMind trace export (not UTF-8 text: {exc.reason} at byte "
                           f"{exc.start})") from None
    ids = invocation.workbench(as_user).import_traces(text)
    echo("imported: " + ", ".join(ids))


CONFIG_IMPORT_MAX_BYTES = 1 << 20


def _doc_ids(bench, kb_ids: list[int], names: tuple[str, ...]) -> list[int]:
    if not names:
        return []
    readable = {kb.id for kb in bench.list_kbs()}
    by_name = {d.name: d.id for kb_id in kb_ids if kb_id in readable for d in bench.list_documents(kb_id)}
    missing = [n for n in names if n not in by_name]
    if missing:
        raise CallerError(f"no document named {', '.join(missing)} in the selected knowledge bases")
    return [by_name[n] for n in names]


def _fmt(value) -> str:
    return "n/a" if value is None else f"{value:.3f}"
