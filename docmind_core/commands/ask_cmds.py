"""``docmind ask``, ``docmind config`` and ``docmind traces``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from docmind_core.commands import echo, echo_json
from docmind_core.errors import DocMindError, NotFound
from docmind_core.events import Done, Token
from docmind_core.run_summary import summarise, timeline_lines
from docmind_core.commands.user_cmds import acting_user, as_user_option
from docmind_core.settings import coerce, key_specs


def _kb_ids(engine, names: tuple[str, ...], user) -> list[int]:
    if not names:  # every KB this user may read
        return [kb.id for kb in engine.readable_kbs(user.id)]
    ids = []
    for name in names:
        try:
            ids.append(engine.store.get_kb_by_name(name).id)
        except NotFound:
            raise DocMindError(f"no knowledge base named '{name}' (see: docmind kb list)") from None
    return ids


def register(cli: click.Group, get_engine) -> None:
    @cli.command()
    @click.argument("question")
    @click.option("--kb", "kbs", multiple=True, help="Knowledge base name (repeatable). Default: all.")
    @click.option("--mode", type=click.Choice(["auto", "rule", "agentic"]), default="auto", show_default=True)
    @click.option("--doc", "docs", multiple=True, help="Select a document by name: read it directly (SELECTED_DOC).")
    @click.option("--conversation", default=None, help="Conversation id to continue (history is used for rewriting).")
    @click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
    @click.option("--timeline/--no-timeline", default=True, show_default=True, help="Print the event timeline.")
    @as_user_option
    def ask(question, kbs, mode, docs, conversation, as_json, timeline, as_user):
        """Ask a question; prints the streamed answer, its sources and the event timeline."""
        engine = get_engine()
        user = acting_user(engine, as_user)
        kb_ids = _kb_ids(engine, kbs, user)
        doc_ids = _doc_ids(engine, kb_ids, docs)
        events = []
        streaming = not as_json and sys.stdout.isatty()
        for event in engine.ask(question, kb_ids, conversation_id=conversation, mode=mode, selected_doc_ids=doc_ids,
                                user_id=user.id):
            events.append(event)
            if streaming and isinstance(event, Token):
                echo(event.text, nl=False)
        summary = summarise(events)
        if as_json:
            echo_json(json.dumps(summary.model_dump(mode="json"), ensure_ascii=False, indent=2))
            return
        if not streaming:
            echo(summary.answer)
        click.echo("")
        echo(f"\n[{summary.mode or 'no retrieval'}] reason={summary.route_reason} tier={summary.tier or '-'} "
                   f"confidence={_fmt(summary.confidence)} {summary.band} coverage={_fmt(summary.coverage)} "
                   f"backend={summary.backend}")
        if summary.sources:
            click.echo("\nSources:")
            for src in summary.sources:
                rerank = src.scores.get("rerank")
                label = "web" if src.origin == "web" else src.origin
                echo(f"  [{src.index}] {src.document} ({label}, rerank {_fmt(rerank)})"
                     f"{'  ' + src.url if src.url else ''}", single_line=True)
        if timeline:
            click.echo("\nTimeline:")
            for line in timeline_lines(events):
                click.echo("  " + line)

    # -- config ---------------------------------------------------------------
    @cli.group()
    def config():
        """Show and change configuration keys (validated; applies to the next run)."""

    @config.command("list")
    @click.option("--changed", is_flag=True, help="Only keys that differ from their default.")
    def config_list(changed):
        settings = get_engine().settings
        values = settings.flat()
        for spec in key_specs():
            value = values[spec.key]
            if changed and value == spec.default:
                continue
            rng = f"[{spec.minimum}..{spec.maximum}]" if spec.minimum is not None or spec.maximum is not None else ""
            if spec.choices:
                rng = "{" + "|".join(spec.choices) + "}"
            mark = "*" if value != spec.default else " "
            click.echo(f"{mark} {spec.key:<38} = {value!r:<24} {rng}")

    @config.command("get")
    @click.argument("key")
    def config_get(key):
        click.echo(repr(get_engine().settings.get(key)))

    @config.command("set")
    @click.argument("key")
    @click.argument("value")
    def config_set(key, value):
        engine = get_engine()
        engine.config.set(key, coerce(key, value), by="cli")
        click.echo(f"{key} = {engine.settings.get(key)!r}")

    @config.command("reset")
    @click.argument("key", required=False)
    @click.option("--all", "all_keys", is_flag=True)
    def config_reset(key, all_keys):
        engine = get_engine()
        if all_keys:
            engine.config.reset_all()
        elif key:
            engine.config.reset(key)
        else:
            raise click.UsageError("name a key or pass --all")
        click.echo("reset")

    # -- traces ---------------------------------------------------------------
    @cli.group()
    def traces():
        """List, show, export and import stored runs."""

    @traces.command("list")
    @click.option("--limit", default=20, show_default=True)
    def traces_list(limit):
        for t in get_engine().traces.list(limit=limit):
            echo(f"{t.run_id}  {t.started_at[:19]}  {t.mode:<13} {t.tier:<10} {t.stop_reason:<16} "
                 f"{t.question[:60]}", single_line=True)

    @traces.command("show")
    @click.argument("run_id")
    def traces_show(run_id):
        record = get_engine().traces.get(run_id)
        for line in timeline_lines(record.events):
            click.echo(line)
        done = next((e for e in record.events if isinstance(e, Done)), None)
        if done:
            echo("\n" + done.answer)

    @traces.command("export")
    @click.argument("run_ids", nargs=-1, required=True)
    @click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None)
    def traces_export(run_ids, output):
        text = get_engine().traces.export_json(list(run_ids))
        if output:
            output.write_text(text, encoding="utf-8")
            click.echo(f"wrote {output}")
        else:
            echo_json(text)

    @traces.command("import")
    @click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
    def traces_import(path):
        ids = get_engine().traces.import_json(path.read_text(encoding="utf-8"))
        echo("imported: " + ", ".join(ids))


def _doc_ids(engine, kb_ids: list[int], names: tuple[str, ...]) -> list[int]:
    if not names:
        return []
    by_name = {d.name: d.id for kb_id in kb_ids for d in engine.store.list_documents(kb_id)}
    missing = [n for n in names if n not in by_name]
    if missing:
        raise DocMindError(f"no document named {', '.join(missing)} in the selected knowledge bases")
    return [by_name[n] for n in names]


def _fmt(value) -> str:
    return "n/a" if value is None else f"{value:.3f}"
