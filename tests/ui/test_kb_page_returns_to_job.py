"""Issue 23 item 3: leaving the Knowledge bases page and coming back opened it on the first KB ("demo"), and a
running ingest job of another KB was out of sight until that KB was picked again. The page now opens on the KB
whose job is running (AppTest, real engine)."""

from __future__ import annotations

import pytest

pytest.importorskip("docmind_core.engine")

from tests.markdown_probe import text_of  # noqa: E402
from tests.pending_jobs import pending_job  # noqa: E402
from tests.ui.app_support import started_app  # noqa: E402

pytestmark = pytest.mark.slow  # whole app runs (AppTest) on a real engine


def _picked(at) -> int:
    return at.selectbox(key="dm_manage_kb").value


def test_the_page_returns_to_the_kb_whose_ingest_job_is_running(app_engine):
    engine = app_engine
    first = engine.create_kb("aardvark", "first by name: where the page opens without a job")
    busy = engine.create_kb("zeta-incoming", "a KB being filled")
    at = started_app()
    at.switch_page("pages/knowledge_bases.py").run()
    assert not at.exception, at.exception
    assert _picked(at) == first.id  # no job: the first KB, as before
    with pending_job(engine.db, busy.id, 3) as job_id:
        at = started_app()  # the user comes back in a new session
        at.switch_page("pages/knowledge_bases.py").run()
        assert not at.exception, at.exception
        assert _picked(at) == busy.id
        assert any(f"Job #{job_id}" in text_of(m.value) for m in at.markdown)  # the job is in sight
        at.selectbox(key="dm_manage_kb").set_value(first.id).run()  # a KB the user picks stays picked
        assert _picked(at) == first.id
        at.switch_page("pages/chat.py").run()  # leaving the page forgets its choice ...
        at.switch_page("pages/knowledge_bases.py").run()
        assert not at.exception, at.exception
        assert _picked(at) == busy.id  # ... and coming back returns to the running job
