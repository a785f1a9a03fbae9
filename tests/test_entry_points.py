"""Entry points (pages, docmind_ui, CLI commands, the MCP server) reach DocMind only through the facade.

Read from the source, not run: no module of theirs imports a store, and none reaches into the
engine's stores or unchecked operations (``engine.store``, ``engine.ask`` ...).  A new page that
forgot an access check would have to do one of these things, so it fails here first.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ENTRY_POINTS = sorted([*ROOT.glob("pages/*.py"), *ROOT.glob("docmind_ui/*.py"),
                       *ROOT.glob("docmind_core/commands/*.py"), ROOT / "docmind_core" / "mcp_server.py",
                       ROOT / "docmind_core" / "cli.py", ROOT / "app.py"])

STORE_MODULES = ("docmind_core.store", "docmind_core.accounts.users", "docmind_core.accounts.apikeys", "docmind_core.answer.memory",
                 "docmind_core.accounts.sessions", "docmind_core.accounts.access")
STORE_NAMES = {"Database", "KnowledgeStore", "ConfigStore", "ConversationStore", "TraceStore", "UserStore",
               "ApiKeyStore", "MemoryStore", "SessionStore", "KbAccessGuard", "JobStore", "LeaseBook",
               "IngestJobQueue", "DatasetStore", "ExperimentStore"}
# ``from docmind_core import store`` names a store module as an imported name
STORE_MODULE_NAMES = {m.rsplit(".", 1)[1] for m in STORE_MODULES}
# What the engine holds or does without an access check: only the facade may touch these.
UNCHECKED = {"store", "db", "config", "conversations", "traces", "users", "api_keys", "sessions", "memory_store",
             "ingestor", "retriever", "refiner", "toolbox", "pipeline", "ask", "search", "ingest", "create_kb",
             "delete_kb", "delete_document", "reindex_kb", "check_kb", "settings_for", "readable_kbs", "jobs",
             "remove_account", "adopt_single_user_rows", "retired_user_ids"}
# Names from the modules above that are plain values, not stores.
ALLOWED_IMPORTS = {"LOCAL_USER", "SIGNED_OUT", "User", "ROLES", "ADMIN_USER_ENV", "ADMIN_PASSWORD_ENV",
                   "ResolvedKey"}


def _imports(tree: ast.AST) -> list[tuple[str, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found += [(node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(alias.name, "") for alias in node.names]
    return found


def store_imports(source: str) -> list[str]:
    return [f"{module}.{name}" for module, name in _imports(ast.parse(source))
            if (module.startswith(STORE_MODULES) and name not in ALLOWED_IMPORTS) or name in STORE_NAMES
            or (module == "docmind_core" and name in STORE_MODULE_NAMES)]


def unchecked_uses(source: str) -> list[str]:
    bad = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in UNCHECKED:
            owner = node.value
            name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", "")
            if "engine" in name.lower() or isinstance(owner, ast.Call):
                bad.append(f"line {node.lineno}: {ast.unparse(node)}")
    return bad


@pytest.mark.parametrize("path", ENTRY_POINTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_entry_point_imports_no_store(path):
    assert not store_imports(path.read_text(encoding="utf-8")), f"{path.name} imports a store"


@pytest.mark.parametrize("path", ENTRY_POINTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_entry_point_uses_no_unchecked_engine_member(path):
    bad = unchecked_uses(path.read_text(encoding="utf-8"))
    assert not bad, f"{path.name} reaches past the facade: {bad}"


def test_the_checks_catch_a_page_written_the_old_way():
    old_page = ("from docmind_core.store.traces import TraceStore\n"
                "from docmind_core.accounts.users import LOCAL_USER, UserStore\n"
                "rows = get_engine().traces.list()\n"
                "engine.conversations.messages(conv_id)\n"
                "bench.list_traces()\n")
    assert store_imports(old_page) == ["docmind_core.store.traces.TraceStore", "docmind_core.accounts.users.UserStore"]
    assert unchecked_uses(old_page) == ["line 3: get_engine().traces", "line 4: engine.conversations"]


def test_the_checks_catch_the_job_dataset_and_experiment_stores():
    page = ("from docmind_core.ingest.job_store import JobStore\n"
            "from docmind_core.experiments.datasets import DatasetStore\n"
            "from docmind_core.experiments.experiment_store import ExperimentStore\n"
            "from docmind_core.experiments.records import parse_variant\n"
            "from docmind_core import store\n"
            "get_engine().jobs.cancel(job_id)\n")
    assert store_imports(page) == ["docmind_core.ingest.job_store.JobStore",
                                   "docmind_core.experiments.datasets.DatasetStore",
                                   "docmind_core.experiments.experiment_store.ExperimentStore", "docmind_core.store"]
    assert unchecked_uses(page) == ["line 6: get_engine().jobs"]
