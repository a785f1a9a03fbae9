"""The access matrix: every Workbench method x every kind of actor x (for KBs) every visibility.

One table (ROWS) says, for each facade method, which rule decides it; the test is generated from
it and checks allow/refuse through the real Engine.  A public Workbench method without a row fails
``test_every_facade_method_has_a_row``, so a new method cannot skip the matrix.

Cast: root (admin); alice (member, research) owns every object; bob (member, research: same
department); carol (member, sales: other department); and a signed-out visitor.
"""

from __future__ import annotations

import inspect
import itertools
import json
import uuid
from dataclasses import dataclass, field
from typing import Callable

import pytest

from docmind_core.engine import Engine
from docmind_core.errors import AccessDenied, SignInRequired
from docmind_core.accounts.users import SIGNED_OUT, UserStore
from docmind_core.workbench import Workbench
from tests.access_world import FAST_HASHER, PASSWORD
from tests.experiment_access_rows import EXPERIMENT_ROWS

ACTORS = ("admin", "owner", "same_dept", "other_dept", "signed_out")
VISIBILITIES = ("private", "department", "public")


# -- who may: the rules ------------------------------------------------------------------------

def may_read_kb(actor: str, visibility: str) -> bool:
    return {"admin": True, "owner": True, "signed_out": False,
            "same_dept": visibility in ("department", "public"), "other_dept": visibility == "public"}[actor]


def may_manage_kb(actor: str, visibility: str) -> bool:
    return actor in ("admin", "owner")


def owner_only(actor: str, visibility: str) -> bool:
    return actor == "owner"


def owner_or_admin(actor: str, visibility: str) -> bool:
    return actor in ("owner", "admin")


def admin_only(actor: str, visibility: str) -> bool:
    return actor == "admin"


def default_selection(actor: str, visibility: str) -> bool:
    # root (the admin) is in no department: alice's department KB is not among the admin's defaults
    return {"admin": visibility == "public", "owner": True, "signed_out": False,
            "same_dept": visibility in ("department", "public"), "other_dept": visibility == "public"}[actor]


def signed_in(actor: str, visibility: str) -> bool:
    return actor != "signed_out"


# -- the world -----------------------------------------------------------------------------------

@dataclass
class World:
    engine: Engine
    people: dict
    files: object
    read_only_kbs: dict = field(default_factory=dict)

    def bench(self, actor: str) -> Workbench:
        user = SIGNED_OUT if actor == "signed_out" else self.people[actor]
        return Workbench(self.engine, user, channel="cli")

    @property
    def alice(self) -> Workbench:
        return self.bench("owner")

    def kb(self, visibility: str):
        """A fresh KB of alice's with one small document."""
        kb = self.alice.create_kb(f"kb-{uuid.uuid4().hex[:8]}", visibility=visibility)
        path = self.files / f"{kb.name}.txt"
        path.write_text("The zephyr budget is 40k and the launch is in March.", encoding="utf-8")
        assert self.alice.ingest(kb.id, [path])[0].status == "added"
        return self.engine.store.get_kb(kb.id)

    def shared_kb(self, visibility: str):
        """One KB of alice's per visibility, made like ``kb`` the first time it is asked for, for the rows that
        only read a KB (an ingest through the real encoder and Chroma is most of a row's time); every row that
        changes a KB, its documents or its jobs takes a fresh one from ``kb``."""
        if visibility not in self.read_only_kbs:
            self.read_only_kbs[visibility] = self.kb(visibility)
        return self.engine.store.get_kb(self.read_only_kbs[visibility].id)

    def document(self, visibility: str):
        kb = self.kb(visibility)
        return self.engine.store.list_documents(kb.id)[0]

    def shared_document(self, visibility: str):
        return self.engine.store.list_documents(self.shared_kb(visibility).id)[0]

    def job(self, visibility: str) -> int:
        """A finished ingest job of alice's on a fresh KB."""
        job = self.alice.enqueue_ingest(self.kb(visibility).id, [_job_file()])
        return self.engine.jobs.wait(job.id, 60).id

    def conversation(self) -> str:
        conv = self.alice.start_conversation("alice's plans")
        self.engine.conversations.add_message(conv, "user", "alice's secret question")
        return conv

    def trace(self) -> str:
        events = list(self.alice.ask("What is the zephyr budget?", []))
        return events[0].run_id

    def api_key(self) -> int:
        self.alice.create_api_key("alice", label=uuid.uuid4().hex[:6])
        return max(k.id for k in self.engine.api_keys.list(self.people["owner"].id))


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    base = tmp_path_factory.mktemp("matrix")
    engine = Engine.open(base / "home", env={})
    users = UserStore(engine.db, hasher=FAST_HASHER)
    people = {"admin": users.add("root", PASSWORD, role="admin"),
              "owner": users.add("alice", PASSWORD, department="research"),
              "same_dept": users.add("bob", PASSWORD, department="research"),
              "other_dept": users.add("carol", PASSWORD, department="sales")}
    files = base / "files"
    files.mkdir()
    return World(engine, people, files)


# -- the table -----------------------------------------------------------------------------------
# Each row: (facade method, per visibility?, rule, action(world, bench, visibility) -> bool).
# The action returns whether the actor got at the object (False: it was silently not there, as in a
# listing); an AccessDenied raised means refused.

Action = Callable[[World, Workbench, str], bool]


def _page_image_reaches_the_document(w, b, v) -> bool:
    """The shared document is Markdown, so a reader is told it has no page images: the refusal of what it is,
    after the read check passed (a reader of no KB is refused before that)."""
    from docmind_core.errors import NotFound
    try:
        b.page_image(w.shared_document(v).id, 1)
    except NotFound as not_a_pdf:
        return "no page images" in str(not_a_pdf)
    return True


def _ask_sees_kb(w: World, b: Workbench, v: str) -> bool:
    kb = w.shared_kb(v)
    events = list(b.ask("What is the zephyr budget?", [kb.id]))
    refused = any(e.kind == "error" and e.stage == "access" for e in events)
    used = kb.id in events[0].kb_ids
    assert refused != used  # refused KBs are left out with an event, never silently
    return used


def _tool_scope(w: World, b: Workbench, v: str) -> bool:
    kb = w.shared_kb(v)
    return kb.id in b.tool_scope([kb.id]).context.run.kb_ids


def _get_traces(w: World, b: Workbench, v: str) -> bool:
    run_id = w.trace()
    batch = b.get_traces(["no-such-run", run_id])
    # every run not given back is refused by name, as get_trace refuses it; none is silently dropped
    assert [str(e).split()[:2] for e in batch.refused][:1] == [["run", "no-such-run"]]
    assert len(batch.records) + len(batch.refused) == 2
    return [r.run_id for r in batch.records] == [run_id]


def _run_tool(w: World, b: Workbench, v: str) -> bool:
    kb = w.shared_kb(v)
    scope = b.tool_scope([kb.id])
    return bool(b.run_tool("keywordSearch", scope, query="zephyr budget").chunks)


def _ask_in_conversation(w: World, b: Workbench, v: str) -> bool:
    conversation = w.conversation()
    events = list(b.ask("What is the zephyr budget?", [], conversation_id=conversation))
    return events[-1].kind == "done" and len(w.alice.conversation_messages(conversation)) == 3


def _promote(w: World, b: Workbench, v: str) -> bool:
    w.alice.set_config({"grader.coverage_high": 0.77})
    try:
        b.promote_config("alice", ["grader.coverage_high"])
    finally:
        w.alice.reset_config()
        Workbench(w.engine, w.people["admin"]).reset_config("grader.coverage_high")
    return True


def _set_global(w: World, b: Workbench, v: str) -> bool:
    b.set_config({"auth.session_hours": 5.0}, scope="global")
    Workbench(w.engine, w.people["admin"]).reset_config("auth.session_hours")
    return True


def _set_personal(w: World, b: Workbench, v: str) -> bool:
    if b.user.is_admin:
        b.set_config({"grader.coverage_high": 0.79})  # an admin's change is global
        b.reset_config("grader.coverage_high")
    else:
        assert b.set_config({"grader.coverage_high": 0.79}).grader.coverage_high == 0.79
        b.reset_config()
    return True


def _config_history_of_others(w: World, b: Workbench, v: str) -> bool:
    w.alice.set_config({"grader.coverage_low": 0.11})
    w.alice.reset_config()
    return any(h.scope == "personal" and h.user_id == w.people["owner"].id for h in b.config_history(500))


def _set_password(w: World, b: Workbench, v: str) -> bool:
    b.set_password("alice", PASSWORD)
    return True


def _remove_user(w: World, b: Workbench, v: str) -> bool:
    name = f"temp-{uuid.uuid4().hex[:6]}"
    UserStore(w.engine.db, hasher=FAST_HASHER).add(name, PASSWORD)
    b.remove_user(name)
    return True


def _add_user(w: World, b: Workbench, v: str) -> bool:
    b.add_user(f"new-{uuid.uuid4().hex[:6]}", PASSWORD)
    return True



def _memory_listed(w: World, b: Workbench, v: str) -> bool:
    text = f"alice keeps her notes in drawer {uuid.uuid4().hex[:6]}"
    w.engine.refresh()
    # a near-identical memory of an earlier row may be returned instead (deduplication): look for what was kept
    kept = w.engine.memory_store.add(w.people["owner"].id, text).memory
    return any(m.id == kept.id for m in b.list_memories())


def _forget_memory(w: World, b: Workbench, v: str) -> bool:
    text = f"alice parks on level {uuid.uuid4().hex[:6]}"
    w.engine.refresh()
    memory = w.engine.memory_store.add(w.people["owner"].id, text).memory
    b.forget_memory(memory.id)
    return not any(m.text == text for m in w.alice.list_memories())


def _forget_all_memories(w: World, b: Workbench, v: str) -> bool:
    """Each user clears only their own memories: alice's survive anyone else's clear."""
    w.engine.refresh()
    # by id: two locker codes embed as near-duplicates, so the store may hand back an earlier row's memory, one
    # this row's text was never stored as (the check by text then passed for any actor)
    memory = w.engine.memory_store.add(w.people["owner"].id, f"alice's locker code is {uuid.uuid4().hex[:6]}").memory
    b.forget_all_memories()
    return not any(m.id == memory.id for m in w.alice.list_memories())


def _job_file():
    from docmind_core.ingest.jobs import JobInput

    return JobInput("notes.txt", data=b"The zephyr budget is 40k and the launch is in March.")


def _retry_job(w: World, b: Workbench, v: str) -> bool:
    from docmind_core.ingest.jobs import JobInput

    job = w.alice.enqueue_ingest(w.kb(v).id, [JobInput("broken.pdf", data=b"%PDF-1.4 not a pdf")])
    w.engine.jobs.wait(job.id, 60)
    return b.retry_job(job.id).id == job.id


ROWS: list[tuple[str, bool, Callable[[str, str], bool], Action]] = [
    # knowledge bases and their documents
    ("list_kbs", True, may_read_kb, lambda w, b, v: (kb := w.shared_kb(v)).id in {k.id for k in b.list_kbs()}),
    ("get_kb", True, may_read_kb, lambda w, b, v: b.get_kb(w.shared_kb(v).id) is not None),
    ("kb_by_name", True, may_read_kb, lambda w, b, v: b.kb_by_name(w.shared_kb(v).name) is not None),
    ("find_kb", True, may_read_kb, lambda w, b, v: b.find_kb(w.shared_kb(v).name) is not None),
    ("kb_ids_for", True, may_read_kb, lambda w, b, v: b.kb_ids_for([(kb := w.shared_kb(v)).name]) == [kb.id]),
    ("list_documents", True, may_read_kb, lambda w, b, v: len(b.list_documents(w.shared_kb(v).id)) == 1),
    ("document_chunks", True, may_read_kb, lambda w, b, v: bool(b.document_chunks(w.shared_document(v).id))),
    ("document_text", True, may_read_kb,
     lambda w, b, v: "zephyr" in b.document_text(w.shared_document(v).id).lower()),
    ("page_image", True, may_read_kb, _page_image_reaches_the_document),
    ("search", True, may_read_kb, lambda w, b, v: b.search("zephyr budget", [w.shared_kb(v).id]) is not None),
    ("ask", True, may_read_kb, _ask_sees_kb),
    # the offline baseline of `eval answers` rebuilds the process's shared backends: admins only
    ("ask_offline", False, admin_only, lambda w, b, v: list(b.ask_offline("zephyr budget?", []))[-1].backend == "offline"),
    ("tool_scope", True, may_read_kb, _tool_scope),
    ("run_tool", True, may_read_kb, _run_tool),
    ("create_kb", False, signed_in, lambda w, b, v: b.create_kb(f"own-{uuid.uuid4().hex[:6]}") is not None),
    # a KB name to ingest into: only one this user may change (any other is refused alike, read or not)
    ("kb_to_write", True, may_manage_kb, lambda w, b, v: b.kb_to_write(w.shared_kb(v).name)[1] is False),
    # the chat's default selection: what the actor reads without an admin's reach
    ("default_kbs", True, default_selection, lambda w, b, v: (kb := w.shared_kb(v)).id in {k.id for k in b.default_kbs()}),
    ("set_visibility", True, may_manage_kb,
     lambda w, b, v: b.set_visibility(w.kb(v).id, "private").visibility == "private"),
    ("may_manage_kb", True, may_manage_kb, lambda w, b, v: b.may_manage_kb(w.shared_kb(v).id)),
    ("delete_kb", True, may_manage_kb, lambda w, b, v: b.delete_kb(w.kb(v).id) is None),
    ("ingest", True, may_manage_kb, lambda w, b, v: b.ingest(w.kb(v).id, []) == []),
    ("reindex_kb", True, may_manage_kb, lambda w, b, v: b.reindex_kb(w.kb(v).id) >= 1),
    ("check_kb", True, may_manage_kb, lambda w, b, v: b.check_kb(w.kb(v).id) is not None),
    ("delete_document", True, may_manage_kb, lambda w, b, v: b.delete_document(w.document(v).id) is None),
    # background ingest jobs: the ingest rule (owner or admin)
    ("enqueue_ingest", True, may_manage_kb, lambda w, b, v: b.enqueue_ingest(w.kb(v).id, [_job_file()]).id > 0),
    ("list_jobs", True, may_manage_kb, lambda w, b, v: (j := w.job(v)) in {x.id for x in b.list_jobs()}),
    ("get_job", True, may_manage_kb, lambda w, b, v: b.get_job(w.job(v)).id > 0),
    ("cancel_job", True, may_manage_kb, lambda w, b, v: b.cancel_job(w.job(v)).id > 0),
    ("retry_job", True, may_manage_kb, _retry_job),
    # conversations: the owner only (not even admins)
    ("list_conversations", False, owner_only,
     lambda w, b, v: (c := w.conversation()) in {x.id for x in b.list_conversations()}),
    ("start_conversation", False, signed_in, lambda w, b, v: bool(b.start_conversation("mine"))),
    ("conversation_messages", False, owner_only, lambda w, b, v: bool(b.conversation_messages(w.conversation()))),
    ("export_conversation", False, owner_only,
     lambda w, b, v: "alice's secret question" in b.export_conversation(w.conversation())),
    ("delete_conversation", False, owner_only, lambda w, b, v: b.delete_conversation(w.conversation()) is None),
    # memories: the owner only
    ("list_memories", False, owner_only, _memory_listed),
    ("forget_memory", False, owner_only, _forget_memory),
    ("forget_all_memories", False, owner_only, _forget_all_memories),
    # traces: the owner and admins
    ("list_traces", False, owner_or_admin, lambda w, b, v: (t := w.trace()) in {x.run_id for x in b.list_traces()}),
    ("get_trace", False, owner_or_admin, lambda w, b, v: b.get_trace(w.trace()) is not None),
    ("get_traces", False, owner_or_admin, _get_traces),
    ("export_traces", False, owner_or_admin, lambda w, b, v: (t := w.trace()) in b.export_traces([t])),
    ("new_pair_id", False, signed_in, lambda w, b, v: b.new_pair_id().startswith("pair-")),
    ("import_traces", False, signed_in,
     lambda w, b, v: len(b.import_traces(w.alice.export_traces([w.trace()]))) == 1),
    # config: global keys by admins; grader/agentic/retrieval/rag as anyone's personal values
    ("settings", False, signed_in, lambda w, b, v: b.settings() is not None),
    ("config_view", False, signed_in, lambda w, b, v: b.config_view() is not None),
    ("config_versions", False, signed_in, lambda w, b, v: b.config_versions(["grader.high_threshold"]) is not None),
    ("set_config", False, admin_only, _set_global),
    ("reset_config", False, signed_in, lambda w, b, v: b.reset_config("grader.coverage_high") is not None),
    ("config_history", False, owner_or_admin, _config_history_of_others),
    ("personal_overrides_by_user", False, admin_only, lambda w, b, v: isinstance(b.personal_overrides_by_user(),
                                                                                  dict)),
    ("promote_config", False, admin_only, _promote),
    # users and API keys
    ("list_users", False, admin_only, lambda w, b, v: bool(b.list_users())),
    ("add_user", False, admin_only, _add_user),
    ("remove_user", False, admin_only, _remove_user),
    ("list_retired_accounts", False, admin_only, lambda w, b, v: isinstance(b.list_retired_accounts(), list)),
    ("user_count", False, admin_only, lambda w, b, v: b.user_count() >= 4),
    ("set_password", False, owner_or_admin, _set_password),
    ("create_api_key", False, owner_or_admin, lambda w, b, v: b.create_api_key("alice").startswith("dm_")),
    ("list_api_keys", False, owner_or_admin,
     lambda w, b, v: (k := w.api_key()) in {x.id for x in b.list_api_keys()}),
    ("revoke_api_key", False, owner_or_admin, lambda w, b, v: b.revoke_api_key(w.api_key()) is not None),
    # sessions and status
    ("sign_out_everywhere", False, signed_in, lambda w, b, v: b.sign_out_everywhere() >= 0),
    ("backends", False, signed_in, lambda w, b, v: bool(b.backends())),
]
# Rows whose "other actor" check is in a second, personal-value row (members may set these as their own).
EXTRA_ROWS: list[tuple[str, bool, Callable[[str, str], bool], Action]] = [
    ("set_config[personal]", False, signed_in, _set_personal),
    # a run in someone else's conversation would read their history into the prompt and append to it
    ("ask[conversation]", False, owner_only, _ask_in_conversation),
]

ROWS += EXPERIMENT_ROWS  # datasets, run labels and experiments (tests/experiment_access_rows.py)


# make test-fast checks every row for every actor on department KBs (where bob is let in and carol is not);
# the private and public cells, each a fresh KB with an ingest, run in the full suite, and so do the rows that
# first wait for a background ingest job to finish (enqueue_ingest keeps the job rule in the fast tier).
FAST_VISIBILITIES = ("-", "department")
JOB_WAITING_ROWS = ("list_jobs", "get_job", "cancel_job", "retry_job")


def _cases():
    for name, per_visibility, rule, action in ROWS + EXTRA_ROWS:
        for actor, visibility in itertools.product(ACTORS, VISIBILITIES if per_visibility else ("-",)):
            yield pytest.param(name, actor, visibility, rule, action, id=f"{name}-{actor}-{visibility}",
                               marks=() if visibility in FAST_VISIBILITIES and name not in JOB_WAITING_ROWS
                               else pytest.mark.slow)


@pytest.mark.parametrize("name, actor, visibility, rule, action", list(_cases()))
def test_access_matrix(world, name, actor, visibility, rule, action):
    expected = rule(actor, visibility)
    bench = world.bench(actor)
    try:
        got = action(world, bench, visibility)
    except SignInRequired:
        assert actor == "signed_out", f"{name}: a signed-in {actor} was told to sign in"
        got = False
    except AccessDenied as exc:
        got = False
        message = str(exc)
        assert "zephyr budget is 40k" not in message  # a refusal never carries the object's content
        if name in ("get_kb", "list_documents", "search", "delete_kb", "set_visibility", "ingest", "reindex_kb",
                    "check_kb"):
            assert "#" in message and "kb-" not in message, message  # a KB refused by id, never by name
    assert got is expected, f"{name} for {actor} on {visibility}: expected {'allow' if expected else 'refuse'}"


def test_every_facade_method_has_a_row():
    public = {n for n, m in inspect.getmembers(Workbench, inspect.isfunction) if not n.startswith("_")}
    covered = {row[0] for row in ROWS}
    assert public - covered == set(), f"facade methods without an access-matrix row: {public - covered}"


def test_refusals_of_kbs_name_them_by_id_only(world):
    secret = world.kb("private")
    with pytest.raises(AccessDenied) as refused:
        world.bench("other_dept").get_kb(secret.id)
    assert f"#{secret.id}" in str(refused.value) and secret.name not in str(refused.value)


def test_config_history_records_the_acting_user_and_channel(world):
    admin = Workbench(world.engine, world.people["admin"], channel="web")
    admin.set_config({"agentic.max_iterations": 3})
    world.alice.set_config({"grader.high_threshold": 0.7})
    rows = world.bench("admin").config_history(10)
    global_row = next(r for r in rows if r.key == "agentic.max_iterations")
    personal_row = next(r for r in rows if r.key == "grader.high_threshold")
    assert (global_row.changed_by, global_row.scope, global_row.user_id) == ("root (web)", "global",
                                                                            world.people["admin"].id)
    assert (personal_row.changed_by, personal_row.scope, personal_row.user_id) == ("alice (cli)", "personal",
                                                                                  world.people["owner"].id)
    admin.reset_config("agentic.max_iterations")
    world.alice.reset_config()
    assert json.dumps([r.model_dump() for r in rows])  # rows serialise for the page and the CLI


def test_a_member_changes_no_global_key_and_every_tuning_key_as_their_own(world):
    """Every key, not a sample: grader/agentic/retrieval/rag are personal; every other key (auth.*, backends,
    limits ...) is global, changed by an admin only, as the value itself, a reset or a personal value."""
    from docmind_core.errors import ConfigError
    from docmind_core.settings import key_specs

    bob = world.bench("same_dept")
    global_keys = [s for s in key_specs() if s.group not in ("grader", "agentic", "retrieval", "rag")]
    assert {"auth", "llm", "embedding", "reranker", "vector_store", "limits"} <= {s.group for s in global_keys}
    for spec in global_keys:
        for change in (lambda: bob.set_config({spec.key: spec.default}),
                       lambda: bob.set_config({spec.key: spec.default}, scope="global"),
                       lambda: bob.reset_config(spec.key)):
            with pytest.raises(AccessDenied, match="only an admin"):
                change()
    assert bob.config_view().personal == {}
    tuning = [s for s in key_specs() if s.group in ("grader", "agentic", "retrieval", "rag")]
    refused = set()
    for spec in tuning:
        try:
            bob.set_config({spec.key: _another_valid_value(spec)})
        except ConfigError as exc:  # a cross-key rule may refuse a value next to another one: not access
            assert "only an admin" not in str(exc), spec.key
            refused.add(spec.key)
        else:
            assert spec.key in bob.config_view().personal, spec.key  # stored as bob's own value
            bob.reset_config(spec.key)  # one at a time: the next key's cross-key rules see the defaults
    assert len(refused) <= len(tuning) // 4, refused  # cross-key refusals are the exception
    bob.reset_config()
    assert world.engine.settings == Workbench(world.engine, world.people["admin"]).config_view().global_settings


def _another_valid_value(spec):
    """A value of the key other than its default, inside its range (what a member tuning it would set)."""
    if spec.type == "bool":
        return not spec.default
    if spec.type == "choice":
        return next(c for c in spec.choices if c != spec.default)
    if spec.type == "int":
        return spec.default + 1 if spec.maximum is None or spec.default + 1 <= spec.maximum else spec.default - 1
    if spec.type == "float":
        step = 0.05 if (spec.maximum is not None and spec.maximum <= 1.0) else 1.0
        return round(spec.default + step, 4) if spec.maximum is None or spec.default + step <= spec.maximum \
            else round(spec.default - step, 4)
    return spec.default + "x"
