"""The access facade: everything one acting user may do, and nothing else.

Every entry point goes through a :class:`Workbench`: the Streamlit pages (the
signed-in user, ``LOCAL_USER`` in single-user mode, ``SIGNED_OUT`` before
sign-in), the CLI (``--as USERNAME``, else the operator) and the MCP server
(the API key's user).  None of them touches a store.  Every access decision is
taken here, from one typed value, ``self.user``:

| object                       | read                                   | change                          |
|------------------------------|----------------------------------------|---------------------------------|
| knowledge base, its documents| admin, owner, its department, or all   | admin or owner                  |
|                              | signed-in users when public            |                                 |
| conversation, memory         | the owner only                         | the owner only                  |
| trace                        | the owner and admins                   | import: anyone signed in (owns) |
| global config                | everyone signed in                     | admin                           |
| personal config (grader,     | the owner (admins see all)             | the owner; admin promotes       |
| agentic, retrieval, rag)     |                                        | to global                       |
| users                        | admin (yourself: everyone)             | admin (your password: you)      |
| API keys                     | admin, or the key's user               | admin, or the key's user        |

A signed-out visitor is refused everything with :class:`SignInRequired`.  A
refusal is an :class:`AccessDenied` whose message names the object only by id
(the name of something you may not read is itself private).
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Literal, Sequence

from docmind_core.accounts.access import (
    KbAccessGuard, can_read_conversation, can_read_trace, denied_message, look_alike_message,
    name_unavailable_message, require_signed_in,
)
from docmind_core.accounts.ids import record_id
from docmind_core.accounts.limits import require_text
from docmind_core.accounts.names import name_skeleton, storable_name
from docmind_core.accounts.removal import RemovalReport
from docmind_core.accounts.apikeys import ApiKey
from docmind_core.reports.compare import RunComparison
from docmind_core.reports.run_summary import answer_lead_markdown
from docmind_core.errors import AccessDenied, CallerError, ConfigError, DocMindError, NotFound
from docmind_core.ingest.page_image import PageImage, render_page
from docmind_core.events import Event
from docmind_core.experiments.datasets import Dataset, DatasetItem, DatasetStore, RunLabel
from docmind_core.experiments.badge import KbBadge
from docmind_core.experiments.label_export import LabelRow
from docmind_core.experiments.experiment_store import ExperimentStore
from docmind_core.experiments.facade import DatasetsAsKbs, UserExperiments
from docmind_core.experiments.metrics import ExperimentReport
from docmind_core.experiments.records import Experiment, Progress, Variant
from docmind_core.experiments.results import ExperimentResults
from docmind_core.experiments.sweep import SweepPoint, SweepResult
from docmind_core.values import (
    BackendStatus, ChunkRecord, DocumentRecord, IngestOutcome, IngestProgress, KnowledgeBase, PendingIngest,
    RequestedMode, SearchResult,
)
from docmind_core.settings import GraderPatch, Settings, is_personal_key
from docmind_core.store.config_store import ConfigChange, ConfigProblem, KeyVersion
from docmind_core.answer.memory import Memory
from docmind_core.store.conversations import AnswerNotes, Conversation, Message
from docmind_core.store.retired_ids import RetiredId
from docmind_core.store.traces import TraceRecord, TraceSummary
from docmind_core.answer.tools import ToolContext, ToolOutput
from docmind_core.accounts.users import User

if TYPE_CHECKING:
    from docmind_core.engine import Engine
    from docmind_core.ingest.check import KbCheckReport
    from docmind_core.ingest.jobs import JobInput
    from docmind_core.ingest.job_types import IngestJob

Channel = Literal["web", "cli", "mcp", "import"]
ConfigScope = Literal["global", "personal"]


@dataclass(frozen=True)
class ConfigView:
    """What the Config page and ``docmind config list`` show one user."""

    global_settings: Settings  # every user's runs start from these
    effective: Settings  # this user's runs: global + their personal values
    personal: dict[str, Any]  # this user's personal values (always empty for admins' global edits)
    problems: list[ConfigProblem]  # stored global overrides and this user's personal ones that were skipped
    can_edit_global: bool


@dataclass(frozen=True)
class TraceBatch:
    """Runs read together (``Workbench.get_traces``)."""

    records: list[TraceRecord]  # the ones this user may read, in the order asked
    refused: list[AccessDenied]  # one per other run id (someone else's, or missing), as get_trace raises it


@dataclass(frozen=True)
class ToolScope:
    """One MCP call's context: the KBs it may search and the tool state."""

    context: ToolContext
    knowledge_bases: list[KnowledgeBase] = field(default_factory=list)
    pending: list[PendingIngest] = field(default_factory=list)  # of those KBs, the ones still being ingested


class Workbench:
    """One user's view of DocMind. Cheap to build: make one per request or script run.

    Datasets, run labels and experiments are decided by :class:`~docmind_core.experiments.facade.UserExperiments`,
    which this workbench holds; the methods of the same names here call it.
    """

    def __init__(self, engine: "Engine", user: User, channel: Channel = "web"):
        self._engine = engine
        self.user = user
        self.channel = channel
        self._guard = KbAccessGuard(engine.store, engine.users)

    # ------------------------------------------------------------------ basics
    @property
    def changed_by(self) -> str:
        """How this actor is recorded in the config history."""
        return f"{self.user.username} ({self.channel})"

    def _signed_in(self) -> User:
        return require_signed_in(self.user)

    def _admin(self, what: str) -> User:
        user = self._signed_in()
        if not user.is_admin:
            raise AccessDenied(f"only an admin may {what}")
        return user

    def backends(self) -> list[BackendStatus]:
        self._signed_in()
        return self._engine.backends()

    # ------------------------------------------------------------------ config
    def settings(self) -> Settings:
        """The settings this user's runs use (global + personal overrides)."""
        return self._engine.settings_for(self._signed_in())

    def config_view(self) -> ConfigView:
        user = self._signed_in()
        report = self._engine.config.load_report()
        mine = self._engine.config.load_for_report(user.owner_key)
        personal = self._engine.config.personal_overrides(user.id) if user.owner_key else {}
        return ConfigView(global_settings=report.settings, effective=mine.settings, personal=personal,
                          problems=report.problems + mine.problems, can_edit_global=user.is_admin)

    def config_versions(self, keys: Sequence[str]) -> dict[str, KeyVersion]:
        """The version of each key this user's values come from, for a form's ``expected``."""
        user = self._signed_in()
        return self._engine.config.versions(list(keys), user.owner_key)

    def set_config(self, changes: dict[str, Any], scope: ConfigScope | None = None,
                   expected: dict[str, KeyVersion] | None = None) -> Settings:
        """Change keys: globally (admins), or as personal values (members; only grader/agentic/retrieval/rag).

        ``scope=None`` picks global for admins and personal for members.  Returns this user's settings.
        ``expected``: the versions (:meth:`config_versions`) a form was drawn from; a key changed since is
        refused with ``ConfigConflict`` naming who changed it, and nothing is written.
        """
        user = self._signed_in()
        scope = scope or ("global" if user.is_admin else "personal")
        if scope == "global":
            self._require_global_config(list(changes))
            self._engine.config.set_many(changes, by=self.changed_by, user_id=user.id, expected=expected)
            self._hand_over_single_user_rows()
        else:
            if not user.owner_key:
                raise ConfigError("the local operator has no personal values: change the global config instead")
            global_only = [k for k in changes if not is_personal_key(k)]
            if global_only:
                raise AccessDenied(f"only an admin may change {', '.join(global_only)}: it is global config "
                                   "(grader.*, agentic.*, retrieval.* and rag.* can be set as personal values)")
            self._engine.config.set_personal(user.id, changes, by=self.changed_by, expected=expected)
        return self._engine.settings_for(user)

    def reset_config(self, key: str | None = None, scope: ConfigScope | None = None) -> Settings:
        """Back to the global value (personal) or the default (global); ``key=None`` resets every key."""
        user = self._signed_in()
        scope = scope or ("global" if user.is_admin else "personal")
        if scope == "global":
            self._require_global_config([key or "every key"])
            if key is None:
                self._engine.config.reset_all(by=self.changed_by, user_id=user.id)
            else:
                self._engine.config.reset(key, by=self.changed_by, user_id=user.id)
        elif user.owner_key:
            if key is not None and not is_personal_key(key):
                raise AccessDenied(f"only an admin may reset {key}: it is global config")
            self._engine.config.reset_personal(user.id, key, by=self.changed_by)
        return self._engine.settings_for(user)

    def config_history(self, limit: int = 100) -> list[ConfigChange]:
        """Global changes, plus personal ones: every user's for admins, your own for members."""
        user = self._signed_in()
        return self._engine.config.history(limit, personal_of=None if user.is_admin else user.id)

    def personal_overrides_by_user(self) -> dict[str, dict[str, Any]]:
        """Every member's personal values, by user name (admins, to review and promote them)."""
        self._admin("see other users' personal config")
        names = {u.id: u.username for u in self._engine.users.list()}
        return {names.get(uid, f"#{uid}"): values
                for uid, values in self._engine.config.users_with_overrides().items()}

    def promote_config(self, username: str, keys: Sequence[str] | None = None,
                       expected_values: dict[str, Any] | None = None) -> Settings:
        """Make a member's personal values global (admins only); ``expected_values``: what a page showed (a
        value changed since is refused with ``ConfigConflict``)."""
        admin = self._admin("promote personal config to global")
        member = self._user_named(username)
        return self._engine.config.promote(member.id, list(keys) if keys else None, by=self.changed_by,
                                           acting_user_id=admin.id, expected_values=expected_values)

    def _hand_over_single_user_rows(self) -> None:
        # With sign-in on nobody acts as the local operator: its conversations, traces and memories go to the
        # first admin (at the switch, or when that admin is created), never left visible to nobody.
        if self._engine.settings.auth.enabled:
            self._engine.adopt_single_user_rows()

    def _require_global_config(self, keys: Sequence[str]) -> None:
        if self.user.is_admin:
            return
        personal = [k for k in keys if is_personal_key(k)]
        hint = " (grader.*, agentic.*, retrieval.* and rag.* can be set as your personal values)" if personal else ""
        raise AccessDenied(f"only an admin may change the global config ({', '.join(keys)}){hint}")

    # ------------------------------------------------------------------ knowledge bases
    def list_kbs(self) -> list[KnowledgeBase]:
        return self._guard.readable_kbs(self._signed_in())

    def get_kb(self, kb_id: int) -> KnowledgeBase:
        user = self._signed_in()
        self._guard.require_readable(user, [kb_id])
        return self._engine.store.get_kb(kb_id)

    def kb_by_name(self, name: str) -> KnowledgeBase:
        """A readable KB by name; an unknown and an unreadable name get the same answer."""
        user = self._signed_in()
        kb = self._engine.store.find_kb(name)
        if kb is None or not self._guard.can_read(user, kb):
            raise AccessDenied(f"no knowledge base named '{name}' that {user.username} may read: it does not "
                               f"exist, or {user.username} may not read it (see: docmind kb list)")
        return kb

    def kb_ids_for(self, names: Sequence[str]) -> list[int]:
        """Ids of readable KBs by name; an unknown and an unreadable name are refused alike."""
        return [self.kb_by_name(name).id for name in names]

    def find_kb(self, name: str) -> KnowledgeBase | None:
        """A readable KB by name, or None (also when it exists but is not readable)."""
        try:
            return self.kb_by_name(name)
        except AccessDenied:
            return None

    def create_kb(self, name: str, description: str = "", visibility: str = "private",
                  department: str = "") -> KnowledgeBase:
        """A new KB owned by this user, in their department unless given (single-user mode: no owner).

        A name taken by a KB this user may not change is refused with the words every such name gets,
        whether or not they may read it: the name of a KB you may not read is itself private.  So is a name
        that looks like another KB's (``accounts/names.py``): beside a KB this user may read, the refusal
        names it; beside one they may not read, it is the same refusal as a taken name.
        """
        user = self._signed_in()
        wanted = name.strip()
        taken = self._engine.store.find_kb(wanted)
        if taken is not None and not self._guard.can_manage(user, taken):
            raise AccessDenied(name_unavailable_message(user, name))
        self._refuse_look_alike(user, wanted)
        try:
            return self._engine.create_kb(name, description=description, owner_id=user.owner_key,
                                          department=department or user.department, visibility=visibility)
        except DocMindError:
            raced = self._engine.store.find_kb(wanted)  # created by someone else in between
            if raced is not None and not self._guard.can_manage(user, raced):
                raise AccessDenied(name_unavailable_message(user, name)) from None
            raise

    def _refuse_look_alike(self, user: User, wanted: str) -> None:
        skeleton = name_skeleton(wanted)
        for kb in self._engine.store.list_kbs():
            if kb.name != wanted and name_skeleton(kb.name) == skeleton:
                if self._guard.can_read(user, kb):
                    raise CallerError(look_alike_message(wanted, kb))
                raise AccessDenied(name_unavailable_message(user, wanted))

    def kb_to_write(self, name: str, description: str = "") -> tuple[KnowledgeBase, bool]:
        """The KB named ``name`` that this user may add documents to, created when no KB has the name;
        returns it and whether it was created.  Any other name (a KB someone else owns, readable or not) is
        refused with one message, so the answer does not tell which."""
        user = self._signed_in()
        kb = self._engine.store.find_kb(name.strip())
        if kb is not None:
            if not self._guard.can_manage(user, kb):
                raise AccessDenied(name_unavailable_message(user, name))
            return kb, False
        return self.create_kb(name, description=description), True

    def default_kbs(self) -> list[KnowledgeBase]:
        """The KBs a chat selects before the user picks: their own, shared ones (public, their department)
        and those owned by nobody; never another member's private KB, even for an admin who may read it."""
        user = self._signed_in()
        return [kb for kb in self._guard.readable_kbs(user) if self._guard.is_default_for(user, kb)]

    def may_manage_kb(self, kb_id: int) -> bool:
        """Whether this user may add or delete documents, change the sharing or delete the KB (pages show those
        controls only then; every such call still checks)."""
        return self.user.is_signed_in and self._guard.can_manage(self.user, self.get_kb(kb_id))

    def set_visibility(self, kb_id: int, visibility: str) -> KnowledgeBase:
        return self._guard.set_visibility(self._signed_in(), kb_id, visibility)

    def delete_kb(self, kb_id: int) -> None:
        self._guard.require_manage(self._signed_in(), kb_id)
        self._engine.delete_kb(kb_id)

    def list_documents(self, kb_id: int) -> list[DocumentRecord]:
        self.get_kb(kb_id)
        return self._engine.store.list_documents(kb_id)

    def document_text(self, doc_id: int) -> str:
        """The text the loader extracted from a document (what was chunked), for checking an ingest."""
        self._readable_document(doc_id)
        return self._engine.store.document_text(doc_id)

    def document_chunks(self, doc_id: int, parents: bool = False) -> list[ChunkRecord]:
        self._readable_document(doc_id)
        return self._engine.store.chunks_for_document(doc_id, parents=parents)

    def page_image(self, doc_id: int, page: int, span: str = "") -> PageImage:
        """Page ``page`` of a readable PDF document as an image, ``span`` (a cited passage) marked on it."""
        doc = self._readable_document(doc_id)
        data = self._engine.store.document_file(doc_id) if doc.status in ("complete", "embedding") else None
        if data is None:
            raise NotFound(f"{doc.name}: no page images (not a PDF, or ingested before they were kept: "
                           f"ingest it again)")
        return render_page(data, page, span, name=doc.name)

    def delete_document(self, doc_id: int) -> None:
        doc = self._readable_document(doc_id)
        self._guard.require_manage(self.user, doc.kb_id)
        self._engine.delete_document(doc_id)

    def ingest(self, kb_id: int, paths: Sequence[Path | str],
               progress: Callable[[IngestProgress], None] | None = None,
               names: Sequence[str] | None = None) -> list[IngestOutcome]:
        self._guard.require_manage(self._signed_in(), kb_id)
        names = [storable_name(n) for n in names] if names is not None else None
        return self._engine.ingest(kb_id, paths, progress=progress, names=names)

    def reindex_kb(self, kb_id: int) -> int:
        self._guard.require_manage(self._signed_in(), kb_id)
        return self._engine.reindex_kb(kb_id)

    def check_kb(self, kb_id: int, repair: bool = False) -> "KbCheckReport":
        """``docmind kb check``: the same permission as re-indexing (the KB's owner or an admin)."""
        self._guard.require_manage(self._signed_in(), kb_id)
        return self._engine.check_kb(kb_id, repair=repair)

    # ------------------------------------------------------------------ background ingest jobs
    # The same rule as ingest: the KB's owner or an admin enqueues, sees, cancels and retries its jobs.
    def enqueue_ingest(self, kb_id: int, files: Sequence["JobInput"]) -> "IngestJob":
        """Queue files for ingestion in the background (it survives the page and a server restart)."""
        user = self._signed_in()
        self._guard.require_manage(user, kb_id)
        files = [dataclasses.replace(f, name=storable_name(f.name)) for f in files]  # a browser may send surrogates
        return self._engine.jobs.enqueue(kb_id, user.owner_key, files)

    def list_jobs(self, kb_id: int | None = None, limit: int = 50) -> list["IngestJob"]:
        """Newest first: jobs of the KBs this user may manage (every KB's for admins), or of ``kb_id``."""
        user = self._signed_in()
        if kb_id is not None:
            self._guard.require_manage(user, kb_id)
            return self._engine.jobs.jobs.list([kb_id], limit=limit)
        if user.is_admin:
            return self._engine.jobs.jobs.list(None, limit=limit)
        managed = [kb.id for kb in self._guard.readable_kbs(user) if self._guard.can_manage(user, kb)]
        return self._engine.jobs.jobs.list(managed, limit=limit)

    def get_job(self, job_id: int) -> "IngestJob":
        return self._managed_job(job_id)

    def cancel_job(self, job_id: int) -> "IngestJob":
        self._managed_job(job_id)
        return self._engine.jobs.cancel(job_id)

    def retry_job(self, job_id: int) -> "IngestJob":
        self._managed_job(job_id)
        return self._engine.jobs.retry(job_id)

    def _managed_job(self, job_id: int) -> "IngestJob":
        user = self._signed_in()
        try:
            job = self._engine.jobs.jobs.get(record_id(job_id, "job id"))
        except NotFound:
            job = None
        if job is None or not self._guard.can_manage(user, self._engine.store.get_kb(job.kb_id)):
            raise AccessDenied(f"ingest job #{job_id} is not one {user.username} may manage (or it does not exist)")
        return job

    def _readable_document(self, doc_id: int) -> DocumentRecord:
        user = self._signed_in()
        try:
            doc = self._engine.store.get_document(record_id(doc_id, "document id"))
        except NotFound:
            raise AccessDenied(f"{user.username} may not read document #{doc_id} (or it does not exist)") from None
        kb = self._engine.store.get_kb(doc.kb_id)
        if not self._guard.can_read(user, kb):
            raise AccessDenied(f"{user.username} may not read document #{doc_id} (or it does not exist)")
        return doc

    # ------------------------------------------------------------------ retrieval and answers
    def search(self, query: str, kb_ids: Sequence[int], doc_ids: Sequence[int] | None = None) -> SearchResult:
        """Hit testing: every candidate with its per-stage scores; every KB must be readable."""
        user = self._signed_in()
        require_text(query, "query")
        allowed = self._guard.require_readable(user, kb_ids)
        return self._engine.search(query, allowed, self._engine.settings_for(user), doc_ids=doc_ids)

    def ask(self, question: str, kb_ids: Sequence[int], conversation_id: str | None = None,
            mode: str | RequestedMode = "auto", selected_doc_ids: Sequence[int] | None = None,
            cancel: threading.Event | None = None, pair_id: str | None = None,
            overrides: dict[str, Any] | None = None, exclude_doc_ids: Sequence[int] | None = None,
            label: str = "") -> Iterator[Event]:
        """One run as a stream of events; unreadable KBs are left out with an error event saying so.

        A conversation must be this user's: its history goes into the prompt and the run is
        appended to it.  ``overrides`` are laid over this user's settings for this run only (nothing
        is stored; only the keys a member may tune: grader/agentic/retrieval/rag); ``exclude_doc_ids``
        are documents no retrieval path of this run returns or reads (leave-gold-out evaluation).
        """
        user = self._signed_in()
        require_text(question)
        if conversation_id:
            self._own_conversation(conversation_id)
        settings = self._engine.settings_for(user)
        if overrides:
            shared = [k for k in overrides if not is_personal_key(k)]
            if shared:
                raise ConfigError(f"per-run overrides may only set grader.*, agentic.*, retrieval.* and rag.* "
                                  f"keys, not {', '.join(shared)} (those change backends shared by every run)")
            settings = settings.with_overrides(dict(overrides))
        allowed, denied = self._guard.filter_readable(user, kb_ids)
        notices = [denied_message(user, denied) + "; they were left out of this run"] if denied else []
        return self._engine.ask(question, allowed, settings=settings, user_id=user.owner_key,
                                conversation_id=conversation_id, mode=mode, selected_doc_ids=selected_doc_ids,
                                cancel=cancel, pair_id=pair_id, notices=notices, exclude_doc_ids=exclude_doc_ids,
                                label=label)

    def ask_offline(self, question: str, kb_ids: Sequence[int], mode: str | RequestedMode = "auto",
                    label: str = "") -> Iterator[Event]:
        """One run with the offline engine as its language model: the baseline ``docmind eval answers`` measures
        a model against.  Admin only: it rebuilds the backends this process's runs share."""
        user = self._admin("run questions with the offline engine in place of the configured model")
        require_text(question)
        settings = self._engine.settings_for(user).with_overrides({"llm.provider": "offline"})
        allowed, denied = self._guard.filter_readable(user, kb_ids)
        notices = [denied_message(user, denied) + "; they were left out of this run"] if denied else []
        return self._engine.ask(question, allowed, settings=settings, user_id=user.owner_key, mode=mode,
                                notices=notices, label=label)

    # ------------------------------------------------------------------ conversations
    def list_conversations(self) -> list[Conversation]:
        return self._engine.conversations.list(self._signed_in().owner_key)

    def start_conversation(self, title: str = "") -> str:
        return self._engine.conversations.create(self._signed_in().owner_key, title=title)

    def conversation_messages(self, conversation_id: str) -> list[Message]:
        self._own_conversation(conversation_id)
        return self._engine.conversations.messages(conversation_id)

    def export_conversation(self, conversation_id: str) -> str:
        """The conversation as Markdown, with each answer's numbered sources."""
        self._own_conversation(conversation_id)
        runs = [m.run_id for m in self._engine.conversations.messages(conversation_id) if m.run_id]
        done = self._engine.traces.done_by_run(runs)
        return self._engine.conversations.export_markdown(
            conversation_id, {run_id: list(d.sources) for run_id, d in done.items()},
            notes_by_run={run_id: AnswerNotes(lead=answer_lead_markdown(d)) for run_id, d in done.items()})

    def _own_conversation(self, conversation_id: str) -> None:
        user = self._signed_in()
        try:
            owner = self._engine.conversations.owner_of(conversation_id)
        except NotFound:
            owner = -1  # a missing and someone else's conversation get the same words: probing reveals nothing
        if owner == -1 or not can_read_conversation(user, owner):
            raise AccessDenied(f"conversation {conversation_id} is not one of {user.username}'s conversations")

    def delete_conversation(self, conversation_id: str) -> None:
        self._own_conversation(conversation_id)
        self._engine.conversations.delete(conversation_id, self._signed_in().owner_key)

    # ------------------------------------------------------------------ memories
    def list_memories(self) -> list[Memory]:
        """What DocMind remembers about the acting user (their own memories only), newest first."""
        return self._memory().list(self._signed_in().owner_key)

    def forget_memory(self, memory_id: int) -> None:
        user = self._signed_in()
        try:
            self._memory().delete(user.owner_key, record_id(memory_id, "memory id"))
        except NotFound:  # someone else's and a missing memory look the same
            raise AccessDenied(f"memory #{memory_id} is not one of {user.username}'s memories") from None

    def forget_all_memories(self) -> int:
        return self._memory().clear(self._signed_in().owner_key)

    def _memory(self):
        self._engine.refresh()  # the memory store follows the live embedder
        return self._engine.memory_store

    # ------------------------------------------------------------------ traces
    def list_traces(self, **filters: Any) -> list[TraceSummary]:
        """Runs this user may see, newest first: every run for admins, their own for members."""
        user = self._signed_in()
        filters.pop("user_id", None)  # never the caller's to choose
        if user.is_admin:
            return self._engine.traces.list(**filters)
        return self._engine.traces.list(user_id=user.id, **filters)

    def get_trace(self, run_id: str) -> TraceRecord:
        user = self._signed_in()
        try:
            record = self._engine.traces.get(run_id)
        except NotFound:
            record = None
        if record is None or not can_read_trace(user, record.meta.user_id):
            raise self._trace_refused(run_id)
        return record

    def get_traces(self, run_ids: Sequence[str]) -> TraceBatch:
        """Several runs from batched reads, each decided as :meth:`get_trace` decides it: the readable ones in
        the order asked, and for every other one the refusal ``get_trace`` would raise."""
        user = self._signed_in()
        wanted = list(dict.fromkeys(run_ids))
        readable = {r.run_id: r for r in self._engine.traces.iter_many(wanted) if can_read_trace(user, r.meta.user_id)}
        return TraceBatch([readable[r] for r in wanted if r in readable],
                          [self._trace_refused(r) for r in wanted if r not in readable])

    def _trace_refused(self, run_id: str) -> AccessDenied:
        return AccessDenied(f"run {run_id} is not one {self.user.username} may read (or it does not exist)")

    def new_pair_id(self) -> str:
        self._signed_in()
        return self._engine.traces.new_pair_id()

    def export_traces(self, run_ids: Sequence[str]) -> str:
        """Every run asked for, or the refusal of the first one this user may not read."""
        batch = self.get_traces(run_ids)
        if batch.refused:
            raise batch.refused[0]
        by_id = {r.run_id: r for r in batch.records}
        return self._engine.traces.export_records([by_id[r] for r in run_ids])  # a run named twice: twice

    def import_traces(self, text: str) -> list[str]:
        """Imported runs belong to the importing user."""
        return self._engine.traces.import_json(text, user_id=self._signed_in().owner_key)

    # ------------------------------------------------------------------ datasets, run labels, experiments
    @functools.cached_property
    def _experiments(self) -> UserExperiments:
        # Built at first use: a workbench is made per request, and most requests touch no experiment.
        datasets = DatasetStore(self._engine.db)
        return UserExperiments(self.user, self, datasets, ExperimentStore(self._engine.db),
                               KbAccessGuard(DatasetsAsKbs(datasets), self._engine.users),  # type: ignore[arg-type]
                               self._engine.traces, self._engine.db)

    def list_datasets(self) -> list[Dataset]:
        return self._experiments.list_datasets()

    def get_dataset(self, name_or_id: str | int) -> Dataset:
        return self._experiments.get_dataset(name_or_id)

    def dataset_items(self, dataset_id: int, limit: int | None = None) -> list[DatasetItem]:
        return self._experiments.dataset_items(dataset_id, limit)

    def import_dataset(self, name: str, path: Path | str, kb: str = "", description: str = "",
                       visibility: str = "private", limit: int | None = None, ingest_corpus: bool = False,
                       if_missing: bool = False) -> Dataset:
        return self._experiments.import_dataset(name, path, kb=kb, description=description, visibility=visibility,
                                                limit=limit, ingest_corpus=ingest_corpus, if_missing=if_missing)

    def share_dataset(self, dataset_id: int, visibility: str) -> Dataset:
        return self._experiments.share_dataset(dataset_id, visibility)

    def delete_dataset(self, dataset_id: int) -> None:
        self._experiments.delete_dataset(dataset_id)

    def label_run(self, run_id: str, verdict: str, gold_chunk_ids: Sequence[str] = (),
                  dataset: str | None = None, gold_doc_ids: Sequence[str] = ()) -> RunLabel:
        return self._experiments.label_run(run_id, verdict, gold_chunk_ids, dataset, gold_doc_ids)

    def run_label(self, run_id: str) -> RunLabel | None:
        return self._experiments.run_label(run_id)

    def run_labels(self, run_ids: Sequence[str]) -> dict[str, RunLabel]:
        return self._experiments.run_labels(run_ids)

    def list_labels(self, kb_ids: Sequence[int] | None = None) -> list[LabelRow]:
        return self._experiments.list_labels(kb_ids)

    def remove_label(self, run_id: str) -> RunLabel:
        return self._experiments.remove_label(run_id)

    def export_labels(self, kb_ids: Sequence[int] | None = None) -> str:
        return self._experiments.export_labels(kb_ids)

    def export_labels_to_langfuse(self, kb_ids: Sequence[int], dataset_name: str = "") -> tuple[str, int]:
        return self._experiments.export_labels_to_langfuse(kb_ids, self._engine.env, dataset_name)

    def kb_badge(self, kb_ids: Sequence[int]) -> KbBadge:
        return self._experiments.kb_badge(kb_ids)

    def create_experiment(self, name: str, dataset_id: int, variants: Sequence[Variant],
                          leave_gold_out: bool = False, limit: int | None = None) -> Experiment:
        return self._experiments.create_experiment(name, dataset_id, variants, leave_gold_out, limit)

    def list_experiments(self) -> list[Experiment]:
        return self._experiments.list_experiments()

    def get_experiment(self, experiment_id: int) -> Experiment:
        return self._experiments.get_experiment(experiment_id)

    def run_experiment(self, experiment_id: int, progress: Callable[[Progress], None] | None = None,
                       cancel: threading.Event | None = None, max_runs: int | None = None,
                       parallel: int | None = None) -> Progress:
        return self._experiments.run_experiment(experiment_id, progress=progress, cancel=cancel,
                                                max_runs=max_runs, parallel=parallel)

    def start_experiment(self, experiment_id: int) -> threading.Thread:
        return self._experiments.start_experiment(experiment_id)

    def cancel_experiment(self, experiment_id: int) -> str:
        return self._experiments.cancel_experiment(experiment_id)

    def experiment_progress(self, experiment_id: int) -> Progress:
        return self._experiments.experiment_progress(experiment_id)

    def experiment_results(self, experiment_id: int, reuse: ExperimentResults | None = None) -> ExperimentResults:
        return self._experiments.experiment_results(experiment_id, reuse)

    def experiment_report(self, experiment_id: int) -> ExperimentReport:
        return self._experiments.experiment_report(experiment_id)

    def compare_experiment_runs(self, experiment_id: int, item_id: int, variant_a: str, variant_b: str,
                                gold_left_out: bool = False) -> RunComparison:
        return self._experiments.compare_experiment_runs(experiment_id, item_id, variant_a, variant_b,
                                                         gold_left_out)

    def sweep_experiment(self, experiment_id: int, variant: str | None = None) -> SweepResult:
        return self._experiments.sweep_experiment(experiment_id, variant)

    def apply_thresholds(self, point: SweepPoint | GraderPatch | dict[str, Any]) -> Settings:
        return self._experiments.apply_thresholds(point)

    def export_experiment(self, experiment_id: int) -> str:
        return self._experiments.export_experiment(experiment_id)

    # ------------------------------------------------------------------ users and API keys
    def list_users(self) -> list[User]:
        self._admin("list user accounts")
        return self._engine.users.list()

    def add_user(self, username: str, password: str, department: str = "", role: str = "member") -> User:
        self._admin("create user accounts")
        added = self._engine.users.add(username, password, department=department, role=role)  # type: ignore[arg-type]
        if added.is_admin:
            self._hand_over_single_user_rows()
        return added

    def set_password(self, username: str, password: str) -> None:
        user = self._signed_in()
        target = self._user_named(username)
        if target.id != user.id and not user.is_admin:
            raise AccessDenied("only an admin may change another user's password")
        self._engine.users.set_password(target.id, password)
        self._engine.sessions.end_all(target.id)  # a new password signs every browser out

    def remove_user(self, username: str, transfer_to: str | None = None) -> RemovalReport:
        """Remove the account: what it owned goes to ``transfer_to``, or is deleted; the report says which."""
        self._admin("remove user accounts")
        target = self._user_named(username)
        heir = self._user_named(transfer_to) if transfer_to else None
        return self._engine.remove_account(target, heir, removed_by=self.changed_by)

    def list_retired_accounts(self) -> list[RetiredId]:
        """Ids of removed accounts (never handed out again) and what still carries each."""
        self._admin("list removed accounts")
        return self._engine.retired_user_ids()

    def user_count(self, role: str | None = None) -> int:
        self._admin("count user accounts")
        return self._engine.users.count(role)  # type: ignore[arg-type]

    def create_api_key(self, username: str, label: str = "") -> str:
        """A new key for ``username`` (admins for anyone, members for themselves); shown once."""
        target = self._key_owner(username)
        return self._engine.api_keys.create(target.id, label=label)

    def list_api_keys(self, username: str | None = None) -> list[ApiKey]:
        user = self._signed_in()
        if username is None:
            return self._engine.api_keys.list(None if user.is_admin else user.id)
        return self._engine.api_keys.list(self._key_owner(username).id)

    def revoke_api_key(self, key_id: int) -> ApiKey:
        user = self._signed_in()
        try:
            key = self._engine.api_keys.get(record_id(key_id, "API key id"))
        except NotFound:
            key = None
        if key is None or not (user.is_admin or key.user_id == user.id):
            raise AccessDenied(f"API key #{key_id} is not one {user.username} may revoke (or it does not exist)")
        return self._engine.api_keys.revoke(key_id)

    def _key_owner(self, username: str) -> User:
        user = self._signed_in()
        target = self._user_named(username)
        if target.id != user.id and not user.is_admin:
            raise AccessDenied("only an admin may manage another user's API keys")
        return target

    def _user_named(self, username: str) -> User:
        found = self._engine.users.find(username)
        if found is None:
            raise NotFound(f"no user named '{username}' (see: docmind user list)")
        return found

    # ------------------------------------------------------------------ sessions
    def sign_out_everywhere(self) -> int:
        """End every browser session of this user."""
        user = self._signed_in()
        return self._engine.sessions.end_all(user.id) if user.owner_key else 0

    # ------------------------------------------------------------------ agent tools (MCP)
    def tool_scope(self, kb_ids: Sequence[int] | None, searches_kbs: bool = True) -> ToolScope:
        """The KBs one tool call searches: those asked for (all must be readable), or every readable one.

        ``searches_kbs=False`` (web search, memories): a scope with no KB at all.
        """
        user = self._signed_in()
        scope = self._guard.resolve_scope(user, kb_ids) if searches_kbs else []
        self._engine.refresh()  # rebuild backends first if a backend key changed
        settings = self._engine.settings_for(user)
        context = ToolContext.for_run(scope, user.owner_key, settings)
        return ToolScope(context, [self._engine.store.get_kb(k) for k in scope],
                         self._engine.store.pending_ingest(scope))

    def run_tool(self, name: str, scope: ToolScope, **arguments: Any) -> ToolOutput:
        """Run one of the agentic loop's tools inside ``scope`` (what MCP exposes)."""
        self._signed_in()
        return self._engine.toolbox.call(scope.context, name, arguments)
