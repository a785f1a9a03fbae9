"""The workbench's navigation uses Streamlit's public API only (issue 13).

- nothing in app.py, pages/ or docmind_ui/ reaches into Streamlit's private modules (the legacy
  ``pages/``-folder mode was once switched off by patching ``PagesManager``);
- the sign-in screen lists no page; a signed-in user (or anyone, with sign-in off) gets every page in the
  sidebar, with the same titles, icons and order as before;
- a deep link opened before app.py ever ran in the session (a fresh server runs that page alone, in
  Streamlit's ``pages/``-folder mode) lands on that page inside the frame: at once with sign-in off, after
  the sign-in form with sign-in on.

The real browser checks of the same are in test_browser_auth.py (sign-in on) and test_browser.py (off).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from docmind_core.accounts.users import LOCAL_USER, UserStore
from docmind_core.workbench import Workbench
from docmind_ui.auth import TOKEN_KEY
from tests.access_world import FAST_HASHER, PASSWORD
from tests.paths import ROOT
APP = str(ROOT / "app.py")
TIMEOUT = 90
# What the sidebar listed before the page list became the workbench's own (title, icon), in this order.
EXPECTED_PAGES = [
    ("Chat", ":material/chat:"),
    ("Knowledge bases", ":material/library_books:"),
    ("Config", ":material/tune:"),
    ("Traces", ":material/timeline:"),
    ("Experiments", ":material/science:"),
]
# Streamlit's public Python API: the package itself and the documented component/testing entry points.
PUBLIC_STREAMLIT_MODULES = {"streamlit", "streamlit.components.v1", "streamlit.testing.v1"}


def _ui_sources() -> list[Path]:
    return [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py")), *sorted((ROOT / "docmind_ui").glob("*.py"))]


def _private_streamlit_uses(path: Path) -> list[str]:
    """Imports of Streamlit modules outside its public API, and any mention of its PagesManager."""
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = [node.module]
        for module in modules:
            if module.split(".")[0] == "streamlit" and module not in PUBLIC_STREAMLIT_MODULES:
                found.append(f"{path.name}:{node.lineno} imports {module}")
        if isinstance(node, ast.Name) and node.id == "PagesManager":
            found.append(f"{path.name}:{node.lineno} uses PagesManager")
        if isinstance(node, ast.Attribute) and node.attr in {"runtime", "PagesManager", "uses_pages_directory"}:
            found.append(f"{path.name}:{node.lineno} reaches .{node.attr}")
    return found


def test_no_ui_module_reaches_into_streamlit_private_modules():
    sources = _ui_sources()
    assert len(sources) > 10, sources  # the glob found the app
    found = [use for path in sources for use in _private_streamlit_uses(path)]
    assert found == []


def test_the_check_catches_a_private_import(tmp_path):
    """The check above can fail: the import that patched the legacy pages mode is caught."""
    sample = tmp_path / "sample.py"
    sample.write_text("import streamlit as st\nimport streamlit.components.v1 as components\n"
                      "def f():\n    from streamlit.runtime.pages_manager import PagesManager\n"
                      "    PagesManager.uses_pages_directory = False\n", encoding="utf-8")
    assert sorted(_private_streamlit_uses(sample)) == [
        "sample.py:4 imports streamlit.runtime.pages_manager", "sample.py:5 reaches .uses_pages_directory",
        "sample.py:5 uses PagesManager"]


def test_ui_code_never_imports_from_the_pages_folder():
    """docmind_ui is below the pages: it never imports from pages/ (the upward import of issue 13)."""
    for path in [ROOT / "app.py", *sorted((ROOT / "docmind_ui").glob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert node.module.split(".")[0] != "pages", f"{path.name}:{node.lineno} imports {node.module}"


# -- the app (AppTest on app.py) -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def engine(app_engine):
    UserStore(app_engine.db, hasher=FAST_HASHER).add("alice", PASSWORD, department="research")
    return app_engine


def _set_sign_in(engine, enabled: bool) -> None:
    Workbench(engine, LOCAL_USER).set_config({"auth.enabled": enabled})


@pytest.fixture
def sign_in_on(engine):
    _set_sign_in(engine, True)
    yield engine
    _set_sign_in(engine, False)


@pytest.fixture
def sign_in_off(engine):
    _set_sign_in(engine, False)
    return engine


def _listed_pages(at: AppTest) -> list[tuple[str, str]]:
    return [(link.proto.label, link.proto.icon) for link in at.sidebar.get("page_link")]


def _titles(at: AppTest) -> list[str]:
    return [t.value for t in at.title]


def _sign_in(engine, at: AppTest) -> AppTest:
    """What the sign-in form leaves in the session: its token (AppTest re-enters Streamlit's pages/-folder mode
    at every run, which gives the form's widgets other ids than the run that drew them, so the form itself is
    driven in test_auth_gate.py and in the browser, test_browser_auth.py)."""
    _, token = engine.sign_in("alice", PASSWORD)
    at.session_state[TOKEN_KEY] = token
    at.run()
    assert not at.exception, at.exception
    return at


def _deep_link(page: str) -> AppTest:
    """A session whose first run asks for ``page`` (the URL of a deep link), before app.py ever ran in it."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.switch_page(page)
    at.run()
    assert not at.exception, at.exception
    return at


@pytest.mark.slow
def test_the_sign_in_screen_lists_no_page(sign_in_on):
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert not at.exception, at.exception
    assert [t.label for t in at.text_input] == ["User name", "Password"]
    assert at.get("page_link") == [] and at.sidebar.get("page_link") == []


@pytest.mark.slow
def test_after_sign_in_every_page_is_listed_in_order(sign_in_on):
    at = _sign_in(sign_in_on, AppTest.from_file(APP, default_timeout=TIMEOUT).run())
    assert _titles(at) == ["Chat"]
    assert _listed_pages(at) == EXPECTED_PAGES
    at.switch_page("pages/traces.py").run()  # the list stays on every page
    assert not at.exception, at.exception
    assert _titles(at) == ["Traces"] and _listed_pages(at) == EXPECTED_PAGES


@pytest.mark.slow
def test_with_sign_in_off_every_page_is_listed(sign_in_off):
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert not at.exception, at.exception
    assert _titles(at) == ["Chat"] and _listed_pages(at) == EXPECTED_PAGES


@pytest.mark.slow
@pytest.mark.parametrize(("page", "title"), [("pages/traces.py", "Traces"), ("pages/config.py", "Config")])
def test_a_deep_link_with_sign_in_off_loads_that_page_in_the_frame(sign_in_off, page, title):
    at = _deep_link(page)
    assert _titles(at) == [title]
    assert at.sidebar.multiselect[0].label == "Knowledge bases"  # drawn inside app.py's frame
    assert _listed_pages(at) == EXPECTED_PAGES
    at.run()  # and stays there
    assert _titles(at) == [title]


@pytest.mark.slow
@pytest.mark.parametrize(("page", "title"), [("pages/traces.py", "Traces"), ("pages/config.py", "Config")])
def test_a_deep_link_with_sign_in_on_lands_on_that_page_after_sign_in(sign_in_on, page, title):
    at = _deep_link(page)
    assert [t.label for t in at.text_input] == ["User name", "Password"]
    assert _titles(at) == ["DocMind"]  # the form alone: not the page, no list of pages
    assert at.get("page_link") == [] and not at.sidebar.multiselect
    _sign_in(sign_in_on, at)
    assert _titles(at) == [title]
    assert _listed_pages(at) == EXPECTED_PAGES
