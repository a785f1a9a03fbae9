"""Conversations and their messages, per user, in SQLite.

Messages hold what was said — the question and the answer text — and never
the retrieved context: history given back to understanding and generation
must not be polluted by old evidence.  The evidence of an answer lives in the
run's trace (``run_id`` links them), which is also where the Markdown export
takes the numbered sources from.

Owner checks: every read or change of one conversation names the user asking;
a conversation belongs to the user who created it (``None`` is the single-user
mode's owner), and anyone else gets :class:`AccessDenied`.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from typing import Literal, Sequence

from pydantic import BaseModel

from docmind_core.values import Turn
from docmind_core.errors import AccessDenied, NotFound
from docmind_core.values import RetrievedChunk
from docmind_core.text.excerpt import clip_words
from docmind_core.store.db import Database, utcnow
from docmind_core.text.tokens import CITATION_MARKER_RE

Role = Literal["user", "assistant"]

# Every marker form the citation parser counts, with the space before it.
_CITATION_RE = re.compile(r"\s*" + CITATION_MARKER_RE.pattern)
_TITLE_CHARS = 60
_EXCERPT_CHARS = 280


class Conversation(BaseModel):
    id: str
    user_id: int | None = None
    title: str = ""
    created_at: str
    updated_at: str
    message_count: int = 0


class Message(BaseModel):
    id: int
    conversation_id: str
    role: Role
    content: str
    run_id: str | None = None
    created_at: str


class ConversationStore:
    def __init__(self, db: Database):
        self._db = db

    # -- conversations -------------------------------------------------------
    def create(self, user_id: int | None = None, title: str = "") -> str:
        conv_id = uuid.uuid4().hex
        now = utcnow()
        with self._db.transaction() as db:
            db.execute("INSERT INTO conversations (id, user_id, title, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
                       [conv_id, user_id, title.strip(), now, now])
        return conv_id

    def get(self, conv_id: str, user_id: int | None) -> Conversation:
        """The conversation if ``user_id`` owns it; NotFound / AccessDenied otherwise."""
        row = self._db.db.execute(
            "SELECT c.id, c.user_id, c.title, c.created_at, c.updated_at, "
            "(SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id) "
            "FROM conversations c WHERE c.id = ?", [conv_id]).fetchone()
        if row is None:
            raise NotFound(f"conversation {conv_id} does not exist")
        conversation = _conversation(row)
        if conversation.user_id != user_id:
            raise AccessDenied("this conversation belongs to another user")
        return conversation

    def owner_of(self, conv_id: str) -> int | None:
        """Who owns the conversation (None: the local user of single-user mode); NotFound when it does not exist."""
        row = self._db.db.execute("SELECT user_id FROM conversations WHERE id = ?", [conv_id]).fetchone()
        if row is None:
            raise NotFound(f"conversation {conv_id} does not exist")
        return row[0]

    def list(self, user_id: int | None) -> list[Conversation]:
        """The user's conversations, most recently active first."""
        where = "c.user_id IS NULL" if user_id is None else "c.user_id = ?"
        params = [] if user_id is None else [user_id]
        rows = self._db.db.execute(
            "SELECT c.id, c.user_id, c.title, c.created_at, c.updated_at, "
            "(SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id) "
            f"FROM conversations c WHERE {where} "
            # Timestamps tie within a millisecond: the newest message, then the newest row, break ties.
            "ORDER BY c.updated_at DESC, (SELECT MAX(m.id) FROM messages m WHERE m.conversation_id = c.id) DESC, "
            "c.rowid DESC", params).fetchall()
        return [_conversation(r) for r in rows]

    def delete(self, conv_id: str, user_id: int | None = None) -> None:
        """Delete the conversation and its messages (traces stay: they are the audit trail)."""
        self.get(conv_id, user_id)
        with self._db.transaction() as db:
            db.execute("DELETE FROM messages WHERE conversation_id = ?", [conv_id])
            db.execute("DELETE FROM conversations WHERE id = ?", [conv_id])

    # -- messages ------------------------------------------------------------
    def add_message(self, conv_id: str, role: Role, content: str, run_id: str | None = None) -> int:
        """Append a message; the first question also names an untitled conversation."""
        if role not in ("user", "assistant"):
            raise ValueError(f"role must be 'user' or 'assistant', got {role!r}")
        now = utcnow()
        with self._db.transaction() as db:
            row = db.execute("SELECT title FROM conversations WHERE id = ?", [conv_id]).fetchone()
            if row is None:
                raise NotFound(f"conversation {conv_id} does not exist")
            cursor = db.execute(
                "INSERT INTO messages (conversation_id, role, content, run_id, created_at) VALUES (?, ?, ?, ?, ?)",
                [conv_id, role, content, run_id, now])
            title = row[0] or (_title_from(content) if role == "user" else "")
            db.execute("UPDATE conversations SET updated_at = ?, title = ? WHERE id = ?", [now, title, conv_id])
            return int(cursor.lastrowid)

    def messages(self, conv_id: str) -> list[Message]:
        rows = self._db.db.execute(
            "SELECT id, conversation_id, role, content, run_id, created_at FROM messages "
            "WHERE conversation_id = ? ORDER BY id", [conv_id]).fetchall()
        return [Message(id=r[0], conversation_id=r[1], role=r[2], content=r[3], run_id=r[4], created_at=r[5])
                for r in rows]

    def history_turns(self, conv_id: str, n: int) -> list[Turn]:
        """The last ``n`` messages as turns, oldest first, for understanding and generation.

        Citation markers are removed from answers: the sources they pointed at are not
        part of the history, so ``[2]`` would only mislead the next prompt.
        """
        if n <= 0:
            return []
        rows = self._db.db.execute(
            "SELECT role, content FROM messages WHERE conversation_id = ? ORDER BY id DESC LIMIT ?",
            [conv_id, int(n)]).fetchall()
        turns = []
        for role, content in reversed(rows):
            text = _CITATION_RE.sub("", content).strip() if role == "assistant" else content
            turns.append(Turn(role=role, content=text))
        return turns

    # -- export --------------------------------------------------------------
    def export_markdown(self, conv_id: str, sources_by_run: dict[str, Sequence[RetrievedChunk]] | None = None,
                        user_id: int | None = None, check_owner: bool = False,
                        notes_by_run: dict[str, AnswerNotes] | None = None) -> str:
        """The conversation as Markdown, each answer followed by its numbered sources.

        ``sources_by_run`` maps an answer's run id to its sources in the order they were
        numbered ([1] first), usually taken from the trace store; ``notes_by_run`` the Markdown lines
        put before an answer (its verdict and DocMind's notices on it).
        """
        if check_owner:
            conversation = self.get(conv_id, user_id)
        else:
            row = self._db.db.execute(
                "SELECT c.id, c.user_id, c.title, c.created_at, c.updated_at, 0 FROM conversations c WHERE c.id = ?",
                [conv_id]).fetchone()
            if row is None:
                raise NotFound(f"conversation {conv_id} does not exist")
            conversation = _conversation(row)
        sources_by_run = sources_by_run or {}
        notes_by_run = notes_by_run or {}
        lines = [f"# {conversation.title or 'Conversation'}", "",
                 f"_Started {conversation.created_at}; exported from DocMind {utcnow()}._", ""]
        for message in self.messages(conv_id):
            speaker = "**You**" if message.role == "user" else "**DocMind**"
            lines += [f"### {speaker}", ""]
            notes = notes_by_run.get(message.run_id or "") if message.role == "assistant" else None
            if notes is not None and notes.lead:
                lines += [*notes.lead, ""]
            lines += [message.content.strip(), ""]
            sources = sources_by_run.get(message.run_id or "", []) if message.role == "assistant" else []
            if sources:
                lines += ["Sources:", ""]
                lines += [_source_line(i, chunk) for i, chunk in enumerate(sources, start=1)]
                lines.append("")
        return "\n".join(lines).rstrip() + "\n"


@dataclass(frozen=True)
class AnswerNotes:
    """What the export puts before one answer: Markdown lines (its verdict, DocMind's notices on it)."""

    lead: list[str] = field(default_factory=list)


def _conversation(row) -> Conversation:
    return Conversation(id=row[0], user_id=row[1], title=row[2], created_at=row[3], updated_at=row[4],
                        message_count=row[5])


def _title_from(question: str) -> str:
    return clip_words(question, _TITLE_CHARS, flatten=True)


def _source_line(index: int, chunk: RetrievedChunk) -> str:
    excerpt = clip_words(chunk.text, _EXCERPT_CHARS, flatten=True)
    if chunk.origin == "web":
        where = f"web: [{chunk.document}]({chunk.url})" if chunk.url else f"web: {chunk.document}"
    elif chunk.origin == "memory":
        where = "memory"
    else:
        where = chunk.cited_as  # "memo.pdf, p. 2"
    return f"{index}. **{where}** — {excerpt}"
