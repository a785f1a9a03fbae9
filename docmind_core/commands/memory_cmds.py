"""``docmind memory list|forget|clear`` and ``docmind conversation list|delete``: what DocMind keeps about
the acting user, readable and removable by that user.

Memories are short facts the agentic loop stores (``storeMemory``) and recalls in later runs; a user must be
able to see and delete them.  Every command acts through the acting user's ``Workbench``, so only their own
memories and conversations are listed or deleted.
"""

from __future__ import annotations

import json

import click

from docmind_core.commands import (
    Invocation, as_user_option, confirm, echo, echo_json, pass_invocation, record_id_type, text_id_type,
)


@click.group("memory")
def memory_group() -> None:
    """What DocMind remembers about you (recalled in later runs)."""


@memory_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@as_user_option
@pass_invocation
def memory_list(invocation: Invocation, as_json: bool, as_user: str | None) -> None:
    """Your memories, newest first."""
    memories = invocation.workbench(as_user).list_memories()
    if as_json:
        echo_json(json.dumps([m.model_dump() for m in memories], ensure_ascii=False, indent=2))
        return
    if not memories:
        echo("no memories")
    for m in memories:
        source = f"  ({m.source})" if m.source else ""
        echo(f"#{m.id:<5} {m.created_at}  {m.text}{source}", single_line=True)


@memory_group.command("forget")
@click.argument("memory_id", type=record_id_type("memory id"))
@as_user_option
@pass_invocation
def memory_forget(invocation: Invocation, memory_id: int, as_user: str | None) -> None:
    """Delete one of your memories by its number (see: docmind memory list)."""
    invocation.workbench(as_user).forget_memory(memory_id)
    echo(f"forgot memory #{memory_id}")


@memory_group.command("clear")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@as_user_option
@pass_invocation
def memory_clear(invocation: Invocation, yes: bool, as_user: str | None) -> None:
    """Delete all of your memories."""
    if not yes:
        confirm("Forget everything DocMind remembers about you?")
    count = invocation.workbench(as_user).forget_all_memories()
    echo(f"forgot {count} memories")


@click.group("conversation")
def conversation_group() -> None:
    """Your chat conversations."""


@conversation_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@as_user_option
@pass_invocation
def conversation_list(invocation: Invocation, as_json: bool, as_user: str | None) -> None:
    """Your conversations, newest first."""
    found = invocation.workbench(as_user).list_conversations()
    if as_json:
        echo_json(json.dumps([c.model_dump() for c in found], ensure_ascii=False, indent=2, default=str))
        return
    if not found:
        echo("no conversations")
    for c in found:
        echo(f"{c.id}  {c.title or '(untitled)'}", single_line=True)


@conversation_group.command("delete")
@click.argument("conversation_id", type=text_id_type("conversation id"))
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@as_user_option
@pass_invocation
def conversation_delete(invocation: Invocation, conversation_id: str, yes: bool, as_user: str | None) -> None:
    """Delete one of your conversations and its messages (the runs' traces stay)."""
    if not yes:
        confirm(f"Delete conversation {conversation_id}?")
    invocation.workbench(as_user).delete_conversation(conversation_id)
    echo(f"deleted conversation {conversation_id}")
