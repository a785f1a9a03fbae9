"""A small multi-user DocMind for the access and MCP tests.

Real stores (Database, KnowledgeStore, UserStore, ApiKeyStore) and the real
Toolbox; the retriever, memory and web backends are small in-test stand-ins
that honour the same contracts (KB filtering happens inside the retriever,
memories are looked up by the user id the Toolbox passes), so what the tests
check is the boundary, not ranking quality.

Users: alice and bob in "research", carol in "sales", root (admin).
Knowledge bases (each with one document containing the word "quarterly" and
one word of its own):
    alice_private   owner alice, private      word "zephyr"
    alice_team      owner alice, department   word "yarrow"
    carol_private   owner carol, private      word "xylem"
    carol_public    owner carol, public       word "walrus"
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from argon2 import PasswordHasher

from docmind_core.backends.protocols import WebSearchResult
from docmind_core.values import BackendStatus, ChunkRecord, KnowledgeBase, RetrievedChunk, StageScores
from docmind_core.settings import Settings
from docmind_core.store.db import Database, utcnow
from docmind_core.store.kb_store import KnowledgeStore
from docmind_core.answer.tools import Toolbox
from docmind_core.accounts.apikeys import ApiKeyStore
from docmind_core.store.config_store import ConfigStore
from docmind_core.accounts.users import User, UserStore
from docmind_core.workbench import Workbench

PASSWORD = "correct horse battery"
KB_WORDS = {"alice_private": "zephyr", "alice_team": "yarrow", "carol_private": "xylem", "carol_public": "walrus"}

# Cheap argon2 parameters: these tests are about who sees what, not hash strength.
FAST_HASHER = PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1)


class TermRetriever:
    """Scores child chunks by how many query words they contain, only within the KBs asked for."""

    def __init__(self, store: KnowledgeStore):
        self.store = store
        self.seen_kb_ids: list[list[int]] = []  # every scope it was asked to search, for assertions

    def keyword_candidates(self, query: str, kb_ids: Sequence[int], top_k: int,
                           doc_ids: Sequence[int] | None = None) -> list[RetrievedChunk]:
        self.seen_kb_ids.append(list(kb_ids))
        words = [w for w in query.lower().split() if w]
        found = []
        for kb_id in kb_ids:
            for chunk_id, doc_id, text in self.store.child_texts(kb_id):
                score = sum(text.lower().count(w) for w in words)
                if score:
                    name = self.store.doc_names([doc_id])[doc_id]
                    found.append(RetrievedChunk(chunk_id=chunk_id, kb_id=kb_id, doc_id=doc_id, document=name,
                                                text=text, scores=StageScores(keyword=float(score),
                                                                              fused=float(score))))
        found.sort(key=lambda c: -(c.scores.keyword or 0))
        return found[:top_k]

    def candidates(self, query: str, kb_ids: Sequence[int], settings: Settings,
                   doc_ids: Sequence[int] | None = None) -> list[RetrievedChunk]:
        return self.keyword_candidates(query, kb_ids, settings.retrieval.keyword_top_k, doc_ids)


@dataclass
class NoteMemory:
    """Memories in the real ``memories`` table, recalled by shared words (no embedder needed)."""

    db: Database

    def add(self, user_id: int, text: str, source: str = "") -> None:
        with self.db.transaction() as db:
            db.execute("INSERT INTO memories (user_id, text, embedding, embedder_id, source, created_at) "
                       "VALUES (?, ?, ?, ?, ?, ?)", [user_id, text, b"", "words", source, utcnow()])

    def recall(self, user_id: int, query: str, top_k: int, min_similarity: float) -> list[str]:
        words = set(query.lower().split())
        rows = self.db.db.execute("SELECT text FROM memories WHERE user_id = ? ORDER BY id", [user_id]).fetchall()
        return [r[0] for r in rows if words & set(r[0].lower().split())][:top_k]


@dataclass
class StaticWeb:
    """A web backend that always answers with one page."""

    name: str = "static-web"
    calls: int = 0

    def search(self, query: str, max_results: int) -> WebSearchResult:
        self.calls += 1
        page = RetrievedChunk(chunk_id=f"web:{self.calls}", document="Example page", text=f"web result for {query}",
                              origin="web", url="https://example.invalid/page")
        return WebSearchResult(available=True, chunks=[page])

    def status(self) -> BackendStatus:
        return BackendStatus(role="web_search", name=self.name, live=True)


@dataclass
class World:
    """What the tests need from an Engine: db, store, toolbox, settings, plus the cast."""

    db: Database
    store: KnowledgeStore
    toolbox: Toolbox
    retriever: TermRetriever
    web: StaticWeb
    users: UserStore
    people: dict[str, User]
    kbs: dict[str, KnowledgeBase]
    overrides: dict = field(default_factory=dict)

    @property
    def settings(self) -> Settings:
        return Settings().with_overrides(self.overrides)

    def refresh(self) -> Settings:  # the Engine rebuilds backends here; this world's backends are fixed
        return self.settings

    # -- what the access facade (docmind_core/workbench.py) needs from an Engine ------------------
    @property
    def memory_store(self):
        return self.toolbox.memory

    @property
    def config(self) -> ConfigStore:
        return ConfigStore(self.db)

    @property
    def api_keys(self) -> ApiKeyStore:
        return ApiKeyStore(self.db)

    def settings_for(self, user: User) -> Settings:
        return self.config.load_for(user.owner_key).with_overrides(self.overrides)

    def resolve_api_key(self, key: str):
        return self.api_keys.resolve_key(key)


def build_world(folder: Path, embedder=None) -> World:
    """The cast and KBs above; with an embedder, memories use the real MemoryStore."""
    db = Database(folder / "docmind.db")
    users = UserStore(db, hasher=FAST_HASHER)
    people = {
        "alice": users.add("alice", PASSWORD, department="research"),
        "bob": users.add("bob", PASSWORD, department="research"),
        "carol": users.add("carol", PASSWORD, department="sales"),
        "root": users.add("root", PASSWORD, role="admin"),
    }
    store = KnowledgeStore(db)
    layout = {"alice_private": ("alice", "private"), "alice_team": ("alice", "department"),
              "carol_private": ("carol", "private"), "carol_public": ("carol", "public")}
    kbs = {}
    for name, (owner, visibility) in layout.items():
        kb = store.create_kb(name, "test-embedder", 8, description=f"{name} notes", owner_id=people[owner].id,
                             department=people[owner].department, visibility=visibility)
        _add_document(store, kb.id, f"{name}.txt", f"The quarterly report mentions {KB_WORDS[name]} twice: "
                                                   f"{KB_WORDS[name]}.")
        kbs[name] = store.get_kb(kb.id)
    retriever = TermRetriever(store)
    web = StaticWeb()
    if embedder is not None:
        from docmind_core.answer.memory import MemoryStore

        memory = MemoryStore(db, embedder)
    else:
        memory = NoteMemory(db)
    toolbox = Toolbox(retriever, web=web, memory=memory, store=store)
    return World(db, store, toolbox, retriever, web, users, people, kbs)


def _add_document(store: KnowledgeStore, kb_id: int, name: str, text: str) -> None:
    digest = hashlib.sha256(text.encode()).hexdigest()
    doc_id = store.begin_document(kb_id, name, source_path="", content_hash=digest, mime="text/plain",
                                  size=len(text), text=text)
    store.add_chunks([ChunkRecord(id=f"{kb_id}-{doc_id}-0", kb_id=kb_id, doc_id=doc_id, index=0, text=text,
                                  token_count=len(text.split()), start=0, end=len(text))])
    store.set_document_status(doc_id, "complete")


def build_engine_world(home: Path, files: Path):
    """The real Engine with alice's private KB and bob's public one, each holding one small document.

    Returns (engine, alice, bob, private_kb, public_kb).
    """
    from docmind_core.engine import Engine

    engine = Engine.open(home)
    users = UserStore(engine.db, hasher=FAST_HASHER)
    alice = users.add("alice", PASSWORD, department="research")
    bob = users.add("bob", PASSWORD, department="research")
    private = Workbench(engine, alice).create_kb("alice-notes")
    public = Workbench(engine, bob).create_kb("handbook", visibility="public")
    for kb, name, text in ((private, "plan.txt", "The zephyr project launches in March with a budget of 40k."),
                           (public, "guide.txt", "The handbook says the zephyr office opens at nine.")):
        path = files / name
        path.write_text(text, encoding="utf-8")
        engine.ingest(kb.id, [path])
    return engine, alice, bob, engine.store.get_kb(private.id), engine.store.get_kb(public.id)
