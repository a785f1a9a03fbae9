"""Removing an account: everything it owned is either handed to another account or deleted, and said so.

Nothing the account owned stays behind under its id.  Its ids are never handed
out again (AUTOINCREMENT, migration m012), and the id is recorded in
``retired_user_ids``, but a removal leaves no row for that to protect: either
``transfer_to`` receives the account's knowledge bases, datasets, experiments,
conversations and traces, or they are deleted (knowledge bases through the
ingestor, with their documents, vectors and keyword rows).  Either way its
sessions and API keys are deleted first, so it can no longer act, and its
memories and personal config values are deleted: they are about this person
and would change the other account's answers.

Also here: single-user mode's rows (conversations and traces with no owner,
memories of user 0) become the first admin's when sign-in is switched on, so
they are not left visible to nobody.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from docmind_core.errors import DocMindError, RuntimeFailure, UserError
from docmind_core.store.db import Database
from docmind_core.store.retired_ids import retire
from docmind_core.accounts.users import User, UserStore

# What a removal reports, in this order.
REPORT_ORDER = ("knowledge bases", "documents", "datasets", "experiments", "conversations", "traces", "memories",
                "personal config values", "API keys", "sessions")


@dataclass(frozen=True)
class RemovalReport:
    """What ``remove_account`` did, with counts."""

    username: str
    user_id: int
    transferred_to: str | None = None
    transferred: dict[str, int] = field(default_factory=dict)
    deleted: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        parts = [f"removed '{self.username}' (id {self.user_id}, never handed out again)"]
        if self.transferred_to is not None:
            parts.append(f"transferred to '{self.transferred_to}': {_counts(self.transferred)}")
        parts.append(f"deleted: {_counts(self.deleted)}")
        return "; ".join(parts)


_SINGULAR = {"knowledge bases": "knowledge base", "memories": "memory",
             "personal config values": "personal config value"}


def _counts(counts: dict[str, int]) -> str:
    def noun(kind: str, n: int) -> str:
        return kind if n != 1 else _SINGULAR.get(kind, kind[:-1])

    return ", ".join(f"{counts[k]} {noun(k, counts[k])}" for k in REPORT_ORDER if k in counts) or "nothing"


def remove_account(db: Database, users: UserStore, target: User, transfer_to: User | None,
                   delete_kb: Callable[[int], None], removed_by: str) -> RemovalReport:
    """Remove ``target``; ``transfer_to`` receives what it owned, else that is deleted.

    ``delete_kb`` is the engine's (the ingestor's) delete, which removes vectors and keyword rows as well.
    A knowledge base that cannot be deleted now (being written) stops the removal with its message; the
    account then still exists, without sessions or keys, and the command can be run again.
    """
    if transfer_to is not None and transfer_to.id == target.id:
        raise UserError("cannot transfer an account's data to itself: name another account")
    users.check_removable(target.id)
    uid = target.id
    deleted: dict[str, int] = {}
    with db.transaction() as tx:  # first: the account can no longer act, whatever happens next
        deleted["sessions"] = tx.execute("DELETE FROM auth_sessions WHERE user_id = ?", [uid]).rowcount
        deleted["API keys"] = tx.execute("DELETE FROM api_keys WHERE user_id = ?", [uid]).rowcount

    def count(sql: str) -> int:
        return db.db.execute(sql, [uid]).fetchone()[0]

    owned = {
        "knowledge bases": count("SELECT COUNT(*) FROM knowledge_bases WHERE owner_id = ?"),
        "documents": count("SELECT COUNT(*) FROM documents d JOIN knowledge_bases k ON k.id = d.kb_id "
                           "WHERE k.owner_id = ?"),
        "datasets": count("SELECT COUNT(*) FROM datasets WHERE owner_id = ?"),
        "experiments": count("SELECT COUNT(*) FROM experiments WHERE owner_id = ?"),
        "conversations": count("SELECT COUNT(*) FROM conversations WHERE user_id = ?"),
        "traces": count("SELECT COUNT(*) FROM traces WHERE user_id = ?"),
    }
    transferred: dict[str, int] = {}
    if transfer_to is None:
        kb_ids = [r[0] for r in db.db.execute("SELECT id FROM knowledge_bases WHERE owner_id = ?", [uid])]
        for kb_id in kb_ids:
            try:
                delete_kb(kb_id)
            except DocMindError as exc:
                raise RuntimeFailure(f"'{target.username}' was not removed: knowledge base #{kb_id} could not be "
                                     f"deleted ({exc}); its sessions and API keys are gone, run the removal "
                                     "again later") from exc
        deleted.update(owned)
    else:
        transferred = owned
    with db.transaction() as tx:
        if transfer_to is None:
            # experiments on the account's datasets go with them (foreign key cascade); the rest by owner
            tx.execute("DELETE FROM datasets WHERE owner_id = ?", [uid])
            tx.execute("DELETE FROM experiments WHERE owner_id = ?", [uid])
            tx.execute("DELETE FROM messages WHERE conversation_id IN "
                       "(SELECT id FROM conversations WHERE user_id = ?)", [uid])
            tx.execute("DELETE FROM conversations WHERE user_id = ?", [uid])
            tx.execute("DELETE FROM trace_events WHERE run_id IN (SELECT run_id FROM traces WHERE user_id = ?)",
                       [uid])
            tx.execute("DELETE FROM traces WHERE user_id = ?", [uid])
        else:
            new = transfer_to.id
            for table, column in (("knowledge_bases", "owner_id"), ("datasets", "owner_id"),
                                  ("experiments", "owner_id"), ("conversations", "user_id"),
                                  ("traces", "user_id"), ("ingest_jobs", "user_id")):
                tx.execute(f"UPDATE {table} SET {column} = ? WHERE {column} = ?", [new, uid])
        deleted["memories"] = tx.execute("DELETE FROM memories WHERE user_id = ?", [uid]).rowcount
        deleted["personal config values"] = tx.execute("DELETE FROM user_config WHERE user_id = ?",
                                                       [uid]).rowcount
        # ended again inside the last transaction: a sign-in between the first one and now ends too
        deleted["sessions"] += tx.execute("DELETE FROM auth_sessions WHERE user_id = ?", [uid]).rowcount
        deleted["API keys"] += tx.execute("DELETE FROM api_keys WHERE user_id = ?", [uid]).rowcount
        tx.execute("DELETE FROM users WHERE id = ?", [uid])
        report = RemovalReport(target.username, uid, transfer_to.username if transfer_to else None,
                               transferred, deleted)
        retire(tx, uid, target.username, f"removed by {removed_by}: {report.summary()}")
    return report


def adopt_single_user_rows(db: Database, users: UserStore) -> dict[str, int]:
    """Give the conversations, traces and memories made in single-user mode to the first admin.

    With sign-in on nobody acts as the local operator, so these rows would be visible to nobody (traces: to
    admins only).  The first admin is the earliest account with the admin role.  Knowledge bases and datasets
    with no owner stay as they are: every admin manages them already.  Returns the counts moved; nothing is
    written when there is nothing to move or no admin yet.
    """
    def pending() -> bool:
        return bool(db.db.execute(
            "SELECT EXISTS (SELECT 1 FROM conversations WHERE user_id IS NULL OR user_id = 0) "
            "OR EXISTS (SELECT 1 FROM traces WHERE user_id IS NULL OR user_id = 0) "
            "OR EXISTS (SELECT 1 FROM memories WHERE user_id = 0)").fetchone()[0])

    if not pending():
        return {}
    admin = users.first_admin()
    if admin is None:
        return {}
    moved = {}
    with db.transaction() as tx:
        moved["conversations"] = tx.execute(
            "UPDATE conversations SET user_id = ? WHERE user_id IS NULL OR user_id = 0", [admin.id]).rowcount
        moved["traces"] = tx.execute(
            "UPDATE traces SET user_id = ? WHERE user_id IS NULL OR user_id = 0", [admin.id]).rowcount
        moved["memories"] = tx.execute("UPDATE memories SET user_id = ? WHERE user_id = 0", [admin.id]).rowcount
    return moved
