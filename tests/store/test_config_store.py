"""ConfigStore: validated run-time overrides in SQLite with a change history."""

from __future__ import annotations

import json
import threading

import pytest

from docmind_core.errors import ConfigError
from docmind_core.settings import Settings
from docmind_core.store.config_store import ConfigStore
from docmind_core.store.db import Database


@pytest.fixture
def store(db):
    return ConfigStore(db)


def test_defaults_when_nothing_is_stored(store):
    assert store.load() == Settings()
    assert store.overrides() == {} and store.history() == []


def test_set_is_seen_by_the_next_load_and_by_another_store(store, db, tmp_path):
    store.set("grader.high_threshold", 0.7, by="alice")
    assert store.load().grader.high_threshold == 0.7
    # A fresh handle on the same file (another session, another process) sees it too.
    assert ConfigStore(Database(tmp_path / "docmind.db")).load().grader.high_threshold == 0.7
    assert store.overrides() == {"grader.high_threshold": 0.7}


def test_low_at_or_above_high_is_refused_and_nothing_is_stored(store):
    with pytest.raises(ConfigError, match="low_threshold .* must be below"):
        store.set("grader.low_threshold", 0.9)
    with pytest.raises(ConfigError):
        store.set("grader.low_threshold", 0.95)
    assert store.overrides() == {} and store.history() == []
    assert store.load().grader.low_threshold == 0.25


@pytest.mark.parametrize("key, value, message", [
    ("agentic.max_iterations", 0, "greater than or equal to 1"),
    ("agentic.max_iterations", 99, "less than or equal to 12"),
    ("web.provider", "bing", "Input should be"),
    ("grader.no_such_key", 1, "unknown config key"),
    ("nogroup", 1, "group.name"),
])
def test_invalid_values_are_refused_with_a_message(store, key, value, message):
    with pytest.raises(ConfigError, match=message):
        store.set(key, value)
    assert store.overrides() == {}


def test_set_many_is_atomic_and_checks_keys_together(store):
    # Raising both thresholds is only valid as one change: low 0.92 alone would exceed high 0.9.
    settings = store.set_many({"grader.low_threshold": 0.92, "grader.high_threshold": 0.95}, by="bob")
    assert (settings.grader.low_threshold, settings.grader.high_threshold) == (0.92, 0.95)
    with pytest.raises(ConfigError):
        store.set_many({"agentic.max_iterations": 6, "grader.low_threshold": 0.95})
    assert store.load().agentic.max_iterations == 4  # the valid half was not stored either
    assert store.overrides() == {"grader.high_threshold": 0.95, "grader.low_threshold": 0.92}


def test_values_are_stored_validated_as_json(store, db):
    store.set("retrieval.mmr_lambda", "0.5")  # text from a form becomes the key's type
    raw = db.db.execute("SELECT value FROM config WHERE key = 'retrieval.mmr_lambda'").fetchone()[0]
    assert json.loads(raw) == 0.5
    store.set("sandbox.enabled", True)
    assert store.load().sandbox.enabled is True


def test_history_records_old_and_new_values_newest_first(store):
    store.set("agentic.max_iterations", 6, by="alice")
    store.set("agentic.max_iterations", 8, by="bob")
    store.set("agentic.max_iterations", 8, by="bob")  # no change: no history row
    store.reset("agentic.max_iterations", by="carol")
    changes = store.history()
    assert [(c.key, c.old_value, c.new_value, c.changed_by) for c in changes] == [
        ("agentic.max_iterations", 8, None, "carol"),
        ("agentic.max_iterations", 6, 8, "bob"),
        ("agentic.max_iterations", None, 6, "alice"),
    ]
    assert len(store.history(limit=1)) == 1
    assert store.history(key="grader.high_threshold") == []


def test_reset_and_reset_all(store):
    store.set_many({"rag.history_turns": 2, "memory.top_k": 9, "llm.model": "qwen-plus"})
    store.reset("rag.history_turns")
    assert store.load().rag.history_turns == 6
    assert set(store.overrides()) == {"memory.top_k", "llm.model"}
    with pytest.raises(ConfigError, match="unknown config key"):
        store.reset("rag.nope")
    assert store.reset_all(by="admin") == Settings()
    assert store.overrides() == {}
    assert {c.key for c in store.history(limit=2)} == {"memory.top_k", "llm.model"}


def test_setting_the_default_removes_the_override(store):
    store.set("retrieval.final_top_k", 12)
    store.set("retrieval.final_top_k", 8)
    assert store.overrides() == {}
    assert [c.new_value for c in store.history()] == [8, 12]


def test_a_stored_value_that_no_longer_validates_is_reported_not_used(store, db):
    # As if a newer version narrowed a range or removed a key after these were stored.
    with db.transaction() as conn:
        conn.execute("INSERT INTO config VALUES ('agentic.max_iterations', '50', 'x')")
        conn.execute("INSERT INTO config VALUES ('grader.removed_key', 'true', 'x')")
        conn.execute("INSERT INTO config VALUES ('memory.top_k', '7', 'x')")
    report = store.load_report()
    assert report.settings.memory.top_k == 7  # the good override still applies
    assert report.settings.agentic.max_iterations == 4
    assert {p.key for p in report.problems} == {"agentic.max_iterations", "grader.removed_key"}
    assert store.load() == report.settings
    store.set("memory.top_k", 8)  # other keys stay editable
    store.reset("grader.removed_key")  # and the stale key can be cleared
    assert {p.key for p in store.load_report().problems} == {"agentic.max_iterations"}


def test_concurrent_writers_do_not_lose_changes(store):
    keys = ["memory.top_k", "rag.history_turns", "retrieval.final_top_k", "agentic.max_tool_calls"]
    errors: list[BaseException] = []

    def write(key):
        try:
            for value in range(2, 7):
                store.set(key, value)
        except BaseException as exc:  # pragma: no cover - surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(k,)) for k in keys]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert store.overrides() == {k: 6 for k in keys if Settings().get(k) != 6}


def test_a_key_set_back_to_its_plain_default_under_a_profile_wins(tmp_path):
    from docmind_core.store.config_store import ConfigStore
    from docmind_core.store.db import Database

    store = ConfigStore(Database(tmp_path / "docmind.db"))
    store.set("llm.profile", "local_small")
    assert store.load().agentic.max_iterations == 2  # the profile's value
    store.set("agentic.max_iterations", 4)  # the plain default, chosen by hand
    assert store.load().agentic.max_iterations == 4
    assert store.overrides()["agentic.max_iterations"] == 4
    store.set("agentic.max_iterations", 2)  # the profile's own value again: no override needed
    assert "agentic.max_iterations" not in store.overrides() and store.load().agentic.max_iterations == 2


def test_setting_a_profile_returns_the_settings_that_are_stored(store):
    """A key set by hand wins over the profile's preset in what set() returns, as in what load() reads after."""
    store.set("llm.timeout_s", 60)
    store.set("run.deadline_ms", 60_000)
    returned = store.set("llm.profile", "local_small")
    loaded = store.load()
    assert returned.llm.timeout_s == loaded.llm.timeout_s == 60
    assert returned.run.deadline_ms == loaded.run.deadline_ms == 60_000
    assert returned.flat() == loaded.flat()


# -- issue 19: unreadable values and compare-and-set ---------------------------------------------------------

from docmind_core.errors import ConfigConflict  # noqa: E402


def test_a_value_that_is_not_json_is_skipped_and_reset(store, db):
    db.db.execute("INSERT INTO config (key, value, updated_at) VALUES ('grader.high_threshold', '{0.8', 'x')")
    report = store.load_report()
    assert report.settings == Settings()
    assert [(p.key, p.value, p.scope) for p in report.problems] == [("grader.high_threshold", "{0.8", "global")]
    assert store.overrides() == {}
    store.set("grader.high_threshold", 0.8, by="alice")  # a set over it replaces it, history and all
    assert store.overrides() == {"grader.high_threshold": 0.8}
    assert store.history()[0].old_value == "{0.8"
    db.db.execute("UPDATE config SET value = 'nope' WHERE key = 'grader.high_threshold'")
    store.reset_all(by="alice")
    assert store.overrides() == {} and store.load_report().problems == []


def test_a_write_from_a_stale_version_is_refused_and_writes_nothing(store):
    seen = store.versions(["grader.high_threshold", "grader.low_threshold"])
    store.set("grader.high_threshold", 0.8, by="root (cli)")
    with pytest.raises(ConfigConflict, match=r"grader.high_threshold was changed by root \(cli\) since you opened"):
        store.set_many({"grader.high_threshold": 0.7, "grader.low_threshold": 0.3}, by="boss (web)", expected=seen)
    assert store.overrides() == {"grader.high_threshold": 0.8}
    store.set_many({"grader.low_threshold": 0.3}, by="boss (web)", expected=seen)  # untouched since: accepted
    assert store.load().grader.low_threshold == 0.3


def test_a_reset_and_a_new_value_never_repeat_a_version(store):
    seen = store.versions(["grader.high_threshold"])
    store.set("grader.high_threshold", 0.8, by="a")
    store.reset("grader.high_threshold", by="a")  # back to no override at all
    with pytest.raises(ConfigConflict):
        store.set_many({"grader.high_threshold": 0.7}, by="b", expected=seen)


def test_a_personal_form_sees_a_global_change_and_its_own(store):
    seen = store.versions(["grader.low_threshold"], user_id=5)
    store.set("grader.low_threshold", 0.2, by="boss (cli)")
    with pytest.raises(ConfigConflict, match="changed by boss"):
        store.set_personal(5, {"grader.low_threshold": 0.3}, by="alice (web)", expected=seen)
    seen = store.versions(["grader.low_threshold"], user_id=5)
    store.set_personal(5, {"grader.low_threshold": 0.3}, by="alice (cli)")
    with pytest.raises(ConfigConflict, match=r"changed by alice \(cli\)"):
        store.set_personal(5, {"grader.low_threshold": 0.35}, by="alice (web)", expected=seen)
    assert store.personal_overrides(5) == {"grader.low_threshold": 0.3}


def test_a_personal_value_equal_to_the_global_one_is_not_kept(store):
    store.set("grader.high_threshold", 0.8, by="boss")
    store.set_personal(7, {"grader.high_threshold": 0.8}, by="ann")  # already in effect: nothing to store
    assert store.personal_overrides(7) == {} and store.history(personal_of=7)[0].scope == "global"
    store.set_personal(7, {"grader.high_threshold": 0.85}, by="ann")
    assert store.personal_overrides(7) == {"grader.high_threshold": 0.85}
    assert (store.load_for(7).grader.high_threshold, store.load().grader.high_threshold) == (0.85, 0.8)
    store.set_personal(7, {"grader.high_threshold": 0.8}, by="ann")  # back to the global value: dropped
    assert store.personal_overrides(7) == {} and store.load_for(7).grader.high_threshold == 0.8
    personal = [(h.old_value, h.new_value, h.changed_by, h.user_id) for h in store.history(personal_of=7)
                if h.scope == "personal"]
    assert personal == [(0.85, 0.8, "ann", 7), (None, 0.85, "ann", 7)]
    assert store.versions(["grader.high_threshold"], user_id=7)["grader.high_threshold"].personal_version == 2
