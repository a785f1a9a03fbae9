"""The composition root: builds every backend and stage once, from settings.

``Engine.open(home)`` is the only place that turns config into objects.  The
UI (through ``st.cache_resource``), the CLI, the MCP server and the tests all
hold one Engine; it is safe to share between threads.  Settings are re-read
from the config store for every run, so edits apply to the next run; when an
edit touches a backend key (model name, endpoint ...), the affected backends
are rebuilt once, here, before that run.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from docmind_core.accounts.removal import RemovalReport, adopt_single_user_rows, remove_account
from docmind_core.text.query_signals import question_entities
from docmind_core.text.pinyin_names import WARM_STEPS as NAME_READING_STEPS
from docmind_core.backends.factory import Backends, backend_key, backend_libraries, build_backends
from docmind_core.backends.protocols import CompletingModel, Embedder, LanguageModel, WebSearch
from docmind_core.errors import NotFound
from docmind_core.events import Done, ErrorRaised, Event, IndexIncomplete
from docmind_core.answer.grade import CragGrader
from docmind_core.answer.judge import ModelJudge
from docmind_core.ingest.check import KbCheckReport
from docmind_core.ingest.jobs import Backfill, IngestJobQueue
from docmind_core.ingest.leases import LeaseBook
from docmind_core.ingest.pipeline import Ingestor
from docmind_core.accounts.limits import check_question
from docmind_core.answer.memory import MemoryStore
from docmind_core.values import BackendStatus, IngestOutcome, IngestProgress, KnowledgeBase, RequestedMode, SearchResult
from docmind_core.answer.pipeline import AnswerPipeline, AskRequest
from docmind_core.prompts import PromptLibrary
from docmind_core.retrieval.hybrid import HybridRetriever
from docmind_core.retrieval.refine import EvidenceRefiner
from docmind_core.settings import Settings
from docmind_core.store.config_store import ConfigStore
from docmind_core.store.conversations import ConversationStore
from docmind_core.store.db import Database
from docmind_core.ingest.job_store import JobStore
from docmind_core.store.kb_store import KnowledgeStore
from docmind_core.store.retired_ids import RetiredId, list_retired
from docmind_core.store.traces import TraceStore
from docmind_core.text.tokens import keyword_tokens, load_segmenter, load_tagger
from docmind_core.accounts.apikeys import ApiKeyStore, ResolvedKey
from docmind_core.accounts.gate import SignInGate, default_home
from docmind_core.accounts.users import User

log = logging.getLogger(__name__)
PACKAGE_ROOT = Path(__file__).resolve().parent.parent
PROMPTS_DIR = PACKAGE_ROOT / "prompts"


def stored_settings(home: Path) -> Settings:
    """The settings stored under ``home``, without building any backend (what ``docmind serve`` checks)."""
    home.mkdir(parents=True, exist_ok=True)
    return ConfigStore(Database(home / "docmind.db")).load()


_ROLES = ("llm", "embedder", "reranker", "vector_store", "keyword_index", "web_search", "tracing")


class Engine:
    """Readiness is explicit: with ``background=True`` the stores answer at once, while the backends, the stages
    wired to them (``memory_store``, ``ingestor``, ``refiner``, ``retriever``, ``toolbox``, ``pipeline``) and
    ``start_report`` come from the opener thread.  Whoever reads those calls ``wait_ready()`` first; the
    engine's own operations (``ask``, ``search``, ``ingest`` ...) do.  ``backends()`` never waits: it says
    "starting…" meanwhile."""

    memory_store: MemoryStore
    start_report: list[str]  # what this start repaired (reconcile), also logged as warnings

    def __init__(self, home: Path, db: Database, config: ConfigStore, env: dict[str, str] | None = None,
                 warm: bool = True, background: bool = False, overrides: Mapping[str, Any] | None = None,
                 open_on_demand: bool = False):
        self.home = home
        self.db = db
        self.config = config
        # laid over the stored settings for this engine only; checked now, so a bad key or value fails the open
        self._overrides = dict(overrides or {})
        if self._overrides:
            config.load().with_overrides(self._overrides)
        self.env = dict(os.environ if env is None else env)
        self.prompts = PromptLibrary(PROMPTS_DIR)
        self.store = KnowledgeStore(db)
        self.conversations = ConversationStore(db)
        self.traces = TraceStore(db)
        self.gate = SignInGate(db, config)  # accounts and browser sessions, as the web app's sign-in form has them
        self.users = self.gate.users
        self.api_keys = ApiKeyStore(db)
        self.sessions = self.gate.sessions
        self.grader = CragGrader()
        self._lock = threading.RLock()
        self._backends: Backends | None = None
        self._opened = threading.Event()
        self._open_error: BaseException | None = None
        self._opener: threading.Thread | None = None
        self._opener_lock = threading.Lock()
        # Background ingest jobs (one worker thread per engine): listed at once; run, resumed or marked interrupted
        # only once the opener's reconcile() has removed what a stopped worker left pending.
        self.leases = LeaseBook(db)  # one per engine: the ingestor (rebuilt with the backends) and the job queue
        self.jobs = IngestJobQueue(JobStore(db), self.leases, home / "uploads", self._run_job_files,
                                   lambda: self.settings, Backfill(self._embedding_left, self._finish_embedding))
        if background:
            # The stores answer now; the encoder, the vector store (with chromadb's import), the start-up repairs
            # and the ingest jobs come in the opener thread: the UI's first page needs only the stores.
            # open_on_demand: the opener waits for start_opening() or for whoever needs the backends (wait_ready:
            # the web app's warm-up, once its first page is drawn), so it never competes with that page.
            if not open_on_demand:
                self.start_opening()
        else:
            self._open_backends()
            if self._open_error is not None:
                raise self._open_error
        if warm:
            self.start_warm_up()

    def _open_backends(self) -> None:
        """Build the backends, repair what interrupted work left (reconcile), then resume the ingest jobs."""
        try:
            self._current(self.settings)
            report: list[str] = []
            try:
                report = self.ingestor.reconcile()
            except Exception as exc:  # noqa: BLE001 - e.g. an unreachable Chroma server: start anyway, retry next start
                log.warning("start-up clean-up skipped: %s", exc)
            try:
                report += self.jobs.recover()
            except Exception as exc:  # noqa: BLE001 - never stop a start for it; the next start tries again
                log.warning("ingest jobs were not recovered: %s", exc)
            self.start_report = report
        except BaseException as exc:  # noqa: BLE001 - handed to whoever needs the backends (wait_ready)
            self._open_error = exc
        finally:
            self._opened.set()

    def start_opening(self) -> None:
        """Start building the backends in the opener thread, once (nothing to do when they are built or
        being built)."""
        with self._opener_lock:
            if self._opener is not None or self._opened.is_set():
                return
            self._opener = threading.Thread(target=self._open_backends, name="docmind-open", daemon=True)
            self._opener.start()

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until the backends are built, the start-up repairs done and the ingest jobs recovered (at once
        for an engine opened in the foreground; an opener not started yet starts now); raises what stopped
        them.  False when ``timeout`` ran out."""
        self.start_opening()
        done = self._opened.wait(timeout)
        if self._open_error is not None:
            raise self._open_error
        return done

    # ------------------------------------------------------------------
    @classmethod
    def open(cls, home: Path | str | None = None, overrides: Mapping[str, Any] | None = None,
             env: dict[str, str] | None = None, warm: bool = True, background: bool = False,
             persist_overrides: bool = False, open_on_demand: bool = False) -> "Engine":
        """``overrides``: dotted keys laid over the stored settings (global and personal) of this engine only;
        the config store, the config page and every other engine on ``home`` never see them.
        ``persist_overrides``: write them to the config store instead (as ``docmind config set`` does), for every
        later engine on ``home``.  ``warm``: warm the encoder and indexes in a background thread (see
        ``warm_up``); ``background``: build the backends in a background thread too (the stores answer at
        once; see ``wait_ready``), which with ``open_on_demand`` starts only at ``start_opening()`` or the
        first ``wait_ready()``."""
        home = Path(home) if home else default_home()
        home.mkdir(parents=True, exist_ok=True)
        db = Database(home / "docmind.db")
        config = ConfigStore(db)
        if overrides and persist_overrides:
            config.set_many(dict(overrides), by="engine.open")
            overrides = None
        return cls(home, db, config, env, warm=warm, background=background, overrides=overrides,
                   open_on_demand=open_on_demand)

    @property
    def settings(self) -> Settings:
        """The stored settings with this engine's overrides on top, read anew at every call."""
        return self._with_overrides(self.config.load())

    def _with_overrides(self, settings: Settings) -> Settings:
        return settings.with_overrides(self._overrides) if self._overrides else settings

    # ------------------------------------------------------------------
    def _build(self, settings: Settings) -> None:
        """Every backend from settings (``backends/factory.py``), then every stage wired to them."""
        self._backends = build_backends(settings, self.home, self.db, self.env, self.prompts)
        self._wire(self._backends)

    def warm_up(self, max_kbs: int = 20, budget_s: float = 10.0,
                before_step: Callable[[], None] | None = None) -> float:
        """Pay the first query's one-off costs now: the encoder's first call, the reranker, and each KB's
        vector index (Chroma loads it on first query) and keyword postings.  The per-KB vector index loads (the
        part that grows with the KBs) are bounded by ``max_kbs`` and ``budget_s`` (time spent in ``before_step``
        not counted); every other step, the one search among them, is taken however long the earlier ones took,
        so a busy machine gets the same warm-up as a quiet one.  A failure is logged and skipped.  Returns the
        seconds spent.

        ``before_step`` is called before each step: the web app passes a wait for a moment with no page run,
        so that seconds of CPU in this thread do not slow the pages a visitor opens meanwhile."""
        started = time.perf_counter()
        waited = 0.0

        def step() -> None:
            nonlocal waited
            if before_step is not None:
                paused = time.perf_counter()
                before_step()
                waited += time.perf_counter() - paused

        def spent() -> float:
            return time.perf_counter() - started - waited

        try:
            for library in backend_libraries(self.settings):  # imported a step at a time, before the build
                step()
                importlib.import_module(library)
            step()
            self.wait_ready()
            settings = self.settings
            b = self._current(settings)
            step()
            b.embedder.embed(["warm up the encoder"])
            kb_ids = [kb.id for kb in self.store.list_kbs()][:max_kbs]
            warm = getattr(b.keyword_index, "warm", None)
            if callable(warm) and kb_ids:
                step()
                warm(kb_ids)
            probe = np.zeros(b.embedder.dim, dtype=np.float32)
            probe[0] = 1.0
            for kb_id in kb_ids:
                if spent() > budget_s:
                    break
                step()
                b.vector_store.query([kb_id], probe, 1)
            # the first question's other one-off costs: jieba's dictionary and part-of-speech tables (the tagger
            # loads both; the offline tool policy's names), the stemmer and one whole search (rerank, MMR,
            # compression).  No Chinese text of the warm-up's goes through the keyword tokeniser: what that
            # tokenises stays the callers' texts alone, even while a warm-up runs beside them.
            for load in (load_segmenter, load_tagger, *NAME_READING_STEPS):  # ~0.5-0.7 s each
                step()
                load()
            step()
            question_entities("海岚数据总部在杭州吗")
            keyword_tokens("warm up the stemmer")
            if kb_ids:
                step()
                self.retriever.search("warm up the search", kb_ids[:1], settings)
        except Exception as exc:  # noqa: BLE001 - warming is an optimisation; the first query pays instead
            log.info("warm-up stopped early: %s", exc)
        return spent()

    def start_warm_up(self) -> threading.Thread:
        """``warm_up`` in a daemon thread, so start-up is not delayed by it."""
        thread = threading.Thread(target=self.warm_up, name="docmind-warm-up", daemon=True)
        thread.start()
        return thread

    def _wire(self, b: Backends) -> None:
        from docmind_core.answer.agentic import AgenticPath
        from docmind_core.answer.rule_planner import RulePlannerPath
        from docmind_core.answer.tools import Toolbox

        self.memory_store = MemoryStore(self.db, b.embedder)
        self.ingestor = Ingestor(self.store, b.embedder, b.vector_store, b.keyword_index, self.leases)
        self.refiner = EvidenceRefiner(self.store, b.reranker)
        self.retriever = HybridRetriever(self.store, b.embedder, b.vector_store, b.keyword_index, self.refiner)
        self.toolbox = Toolbox(self.retriever, web=b.web, memory=self.memory_store, store=self.store)
        rule_planner = RulePlannerPath(self.toolbox, self.refiner, self.grader)
        agentic = AgenticPath(b.llm, self.toolbox, self.refiner, self.grader, self.prompts, rule_planner)
        self.pipeline = AnswerPipeline(
            llm=b.llm, fallback_llm=b.offline_llm, prompts=self.prompts, store=self.store, reranker=b.reranker,
            rule_planner=rule_planner, agentic=agentic, grader=self.grader, memory=self.memory_store,
            judge=ModelJudge(b.llm, self.prompts) if isinstance(b.llm, CompletingModel) else None)

    def refresh(self) -> Settings:
        """Wait until ready, re-read the settings and rebuild the backends if a backend key changed; returns the
        settings.  What the facade calls before it reads the memory store or hands out a tool scope."""
        self.wait_ready()
        settings = self.settings
        self._current(settings)
        return settings

    def _current(self, settings: Settings) -> Backends:
        with self._lock:
            if self._backends is None or self._backends.settings_key != backend_key(settings):
                self._build(settings)
            assert self._backends is not None
            return self._backends

    # -- backends ---------------------------------------------------------
    @property
    def llm(self) -> LanguageModel:
        return self._current(self.settings).llm

    @property
    def embedder(self) -> Embedder:
        return self._current(self.settings).embedder

    @property
    def web(self) -> WebSearch:
        return self._current(self.settings).web

    def backends(self) -> list[BackendStatus]:
        if not self._opened.is_set():  # opening in the background: say so rather than keep a page waiting
            return [BackendStatus(role=role, name="starting…", live=False,
                                  detail="DocMind is still loading its models and opening its stores")
                    for role in _ROLES]
        return self._statuses(self._current(self.settings))

    def _statuses(self, b: Backends) -> list[BackendStatus]:
        return [b.llm.status(), b.embedder.status(), b.reranker.status(), b.vector_store.status(),
                b.keyword_index.status(), b.web.status(), self._tracing_status(b)]

    def backend_notes(self) -> list[str]:
        return list(self._current(self.settings).notes)

    def _tracing_status(self, b: Backends) -> BackendStatus:
        exporter = b.exporter.status()
        detail = f"local SQLite trace store; {exporter.detail or exporter.name}"
        return exporter.model_copy(update={"detail": detail})

    # -- what the access facade builds on --------------------------------------
    # Everything below is unchecked: it does what it is told for whoever asks.  Every entry point
    # (pages, CLI, MCP) goes through ``Workbench(engine, user, channel)``, which owns every access decision.
    def resolve_api_key(self, key: str) -> "ResolvedKey | None":
        """The key's id and user when the key is valid and not revoked (the MCP gate's check)."""
        return self.api_keys.resolve_key(key)

    def sign_in(self, username: str, password: str) -> tuple[User, str] | None:
        """(user, session token) when the password matches; the token keeps a browser signed in."""
        return self.gate.sign_in(username, password, self.settings.auth.session_hours)

    def user_for_session(self, token: str | None) -> User | None:
        """The user a browser's session token stands for, or None (expired, signed out, forged)."""
        return self.gate.user_for_session(token)

    def account(self, username: str) -> User | None:
        """The account with this name (who ``--as`` or a sign-in form names), or None."""
        return self.users.find(username)

    def ensure_admin_from_env(self) -> User | None:
        """Create the admin named by DOCMIND_ADMIN_USER / DOCMIND_ADMIN_PASSWORD when none exists."""
        return self.gate.ensure_admin_from_env()

    def remove_account(self, target: User, transfer_to: User | None, removed_by: str) -> RemovalReport:
        """Remove the account; what it owned goes to ``transfer_to`` or is deleted (KBs through the ingestor)."""
        return remove_account(self.db, self.users, target, transfer_to, self.delete_kb, removed_by)

    def adopt_single_user_rows(self) -> dict[str, int]:
        """Single-user mode's conversations, traces and memories become the first admin's."""
        return adopt_single_user_rows(self.db, self.users)

    def retired_user_ids(self) -> list[RetiredId]:
        return list_retired(self.db.db)

    def has_accounts(self) -> bool:
        return self.gate.has_accounts()

    def settings_for(self, user: User) -> Settings:
        """Global settings with this user's personal overrides laid over them, then this engine's overrides."""
        return self._with_overrides(self.config.load_for(user.owner_key))

    def check_embedder(self, kb_ids: Sequence[int]) -> tuple[list[int], list[str]]:
        """The KBs to search, and a notice for each one built by another encoder than the live one.

        Such a KB stays searchable by keyword only (the retriever leaves it out of vector search);
        the notice names the fix, ``docmind kb reindex NAME``.
        """
        self.wait_ready()
        retriever = self.retriever
        vector_side = set(retriever.vector_kbs(kb_ids))
        problems = [gap.message() for gap in retriever.index_gaps([k for k in kb_ids if k not in vector_side])
                    if gap.built_with]
        return list(dict.fromkeys(kb_ids)), problems

    # -- knowledge bases ----------------------------------------------------
    def create_kb(self, name: str, description: str = "", owner_id: int | None = None,
                  department: str = "", visibility: str = "private") -> KnowledgeBase:
        """A new KB indexed with the live embedder."""
        embedder = self.embedder
        return self.store.create_kb(name, embedder.id, embedder.dim, description=description, owner_id=owner_id,
                                    department=department, visibility=visibility)

    def delete_kb(self, kb_id: int) -> None:
        self.wait_ready()
        self._current(self.settings)
        self.ingestor.delete_kb(kb_id)

    def delete_document(self, doc_id: int) -> None:
        self.wait_ready()
        self._current(self.settings)
        self.ingestor.delete_document(doc_id)

    def ingest(self, kb_id: int, paths: Sequence[Path | str], progress: Callable[[IngestProgress], None] | None = None,
               names: Sequence[str] | None = None, cancel: threading.Event | None = None,
               pause: Callable[[], bool] | None = None) -> list[IngestOutcome]:
        self.wait_ready()
        settings = self.settings
        self._current(settings)
        return self.ingestor.ingest(kb_id, [Path(p) for p in paths], settings, progress=progress,
                                    names=list(names) if names else None, cancel=cancel, pause=pause)

    def _run_job_files(self, kb_id: int, paths: list[Path], names: list[str],
                       progress: Callable[[IngestProgress], None], cancel: threading.Event,
                       pause: Callable[[], bool]) -> list[IngestOutcome]:
        """What the ingest job worker runs for a job's remaining files (after the start-up repairs)."""
        self.wait_ready()
        return self.ingest(kb_id, paths, progress=progress, names=names, cancel=cancel, pause=pause)

    def _embedding_left(self) -> bool:
        return self._backends is not None and self.ingestor.needs_embedding()

    def _finish_embedding(self) -> list[str]:
        """What the ingest job worker runs when idle: the missing vectors of documents a gone process left
        searchable by keyword only (``Ingestor.finish_embedding``)."""
        self.wait_ready()
        settings = self.settings
        self._current(settings)
        return self.ingestor.finish_embedding(settings.embedding.batch_size)

    def reindex_kb(self, kb_id: int) -> int:
        self.wait_ready()
        settings = self.settings
        self._current(settings)
        return self.ingestor.reindex_kb(kb_id, batch_size=settings.embedding.batch_size)

    def check_kb(self, kb_id: int, repair: bool = False) -> KbCheckReport:
        """Compare the KB's chunk rows, keyword rows and vectors per document; ``repair`` fixes them."""
        self.wait_ready()
        self._current(self.settings)
        return self.ingestor.check_kb(kb_id, repair=repair)

    # -- retrieval and answers -----------------------------------------------
    def search(self, query: str, kb_ids: Sequence[int], settings: Settings,
               doc_ids: Sequence[int] | None = None) -> SearchResult:
        """Hybrid retrieval + the refining pass over these KBs (hit testing, ``docmind search``)."""
        check_question(query, settings, what="query")  # InputTooLarge before any work
        self.wait_ready()
        self._current(settings)
        # a KB built by another encoder stays, keyword only: result.index_gaps says so and names the fix
        usable, _notices = self.check_embedder(kb_ids)
        result = self.retriever.search(query, usable, settings, doc_ids=list(doc_ids) if doc_ids else None)
        result.pending = self.store.pending_ingest(usable)  # KBs still being ingested: their 0 hits say less
        return result

    def ask(self, question: str, kb_ids: Sequence[int], *, settings: Settings | None = None, user_id: int | None = None,
            conversation_id: str | None = None, mode: str | RequestedMode = "auto",
            selected_doc_ids: Sequence[int] | None = None, cancel: threading.Event | None = None,
            pair_id: str | None = None, notices: Sequence[str] = (),
            exclude_doc_ids: Sequence[int] | None = None, label: str = "") -> Iterator[Event]:
        """Run the pipeline; every event is recorded in the trace store as it is yielded.

        ``notices`` are problems found before the run (KBs left out, and why): they are reported
        as error events right after the run starts.  ``exclude_doc_ids``: documents no retrieval
        path of this run may return or read (leave-gold-out evaluation); ``label`` tags the trace.
        """
        settings = settings if settings is not None else self.settings
        check_question(question, settings)  # InputTooLarge before any work: no run, no trace
        self.wait_ready()
        backends = self._current(settings)
        pipeline = self.pipeline
        requested = RequestedMode.from_str(mode)
        usable, problems = self.check_embedder(kb_ids)
        problems = [*notices, *problems]
        gaps = [IndexIncomplete(kb_id=g.kb_id, missing_vectors=g.missing_vectors, total=g.total)
                for g in self.retriever.index_gaps(usable) if not g.built_with]  # those have their notice
        history = self.conversations.history_turns(conversation_id, settings.rag.history_turns) \
            if conversation_id else []
        excluded = sorted({int(d) for d in exclude_doc_ids or ()})
        selected = [d for d in (selected_doc_ids or []) if self._doc_kb(d) in usable and d not in excluded]
        request = AskRequest(question=question, kb_ids=usable, requested_mode=requested, selected_doc_ids=selected,
                             user_id=user_id, conversation_id=conversation_id or "", history=history,
                             exclude_doc_ids=excluded, pending=self.store.pending_ingest(usable))
        recorder = self.traces.recorder(run_id=request.run_id, question=question, requested_mode=requested.value,
                                        kb_ids=list(usable), config=settings.flat(), user_id=user_id,
                                        conversation_id=conversation_id, pair_id=pair_id, label=label)
        done: Done | None = None
        try:
            for i, event in enumerate(pipeline.ask(request, settings, self._statuses(backends), cancel)):
                if i == 0 and (problems or gaps):  # right after the run starts: KBs left out or partly indexed
                    yield from (_record(recorder, e) for e in
                                [event] + [ErrorRaised(stage="access", message=p, t_ms=event.t_ms) for p in problems]
                                + [g.model_copy(update={"t_ms": event.t_ms}) for g in gaps])
                    continue
                if isinstance(event, Done):
                    done = event
                yield _record(recorder, event)
        finally:
            recorder.finish()
            if done is not None and conversation_id:
                self.conversations.add_message(conversation_id, "user", question, run_id=request.run_id)
                self.conversations.add_message(conversation_id, "assistant", done.answer, run_id=request.run_id)
            if done is not None:
                backends.exporter.export(self.traces.get(request.run_id))

    def _doc_kb(self, doc_id: int) -> int | None:
        try:
            return self.store.get_document(doc_id).kb_id
        except NotFound:
            return None


def _record(recorder, event: Event) -> Event:
    recorder.record(event)
    return event

