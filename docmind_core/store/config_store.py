"""Run-time configuration: defaults from ``settings.py`` plus overrides stored in SQLite.

Only overrides are stored (``config`` table, values as JSON); every change is
validated against the *whole* resulting settings first — so cross-key rules
such as ``grader.low_threshold < grader.high_threshold`` see the final values —
and written in one transaction together with its ``config_history`` row.  A
refused change leaves nothing behind.  Each run calls :meth:`ConfigStore.load`,
so a change applies to the next run without a restart.

Stored overrides that no longer validate (a key removed or a range narrowed in
a newer version) are *not* used and do not break start-up: :meth:`load` skips
them and :meth:`load_report` lists them, so the config page and ``docmind
config`` can show the problem and offer a reset.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from pydantic import BaseModel

from docmind_core.errors import ConfigError
from docmind_core.settings import Settings
from docmind_core.store.db import Database, utcnow

log = logging.getLogger(__name__)


class ConfigProblem(BaseModel):
    """A stored override that was skipped because it no longer validates."""

    key: str
    value: Any
    message: str


class ConfigReport(BaseModel):
    settings: Settings
    problems: list[ConfigProblem] = []


class ConfigChange(BaseModel):
    """One row of the change history; ``None`` means "the default"."""

    id: int
    key: str
    old_value: Any = None
    new_value: Any = None
    changed_by: str = ""
    changed_at: str


class ConfigStore:
    def __init__(self, db: Database):
        self._db = db
        self._warned: set[tuple[str, str]] = set()  # load() runs for every run: warn once per problem

    # -- reading -------------------------------------------------------------
    def overrides(self) -> dict[str, Any]:
        """The stored overrides exactly as stored (valid or not), by dotted key."""
        rows = self._db.db.execute("SELECT key, value FROM config ORDER BY key").fetchall()
        return {key: json.loads(value) for key, value in rows}

    def load(self) -> Settings:
        """Defaults plus every stored override that still validates."""
        report = self.load_report()
        for problem in report.problems:
            if (problem.key, problem.message) not in self._warned:
                self._warned.add((problem.key, problem.message))
                log.warning("ignoring stored config %s=%r: %s", problem.key, problem.value, problem.message)
        return report.settings

    def load_report(self) -> ConfigReport:
        """The settings in effect and the stored overrides that were skipped, with why."""
        stored = self.overrides()
        try:
            return ConfigReport(settings=Settings().with_overrides(stored))
        except ConfigError:
            pass
        # Something no longer validates: add overrides one at a time so the good ones still apply.
        accepted: dict[str, Any] = {}
        problems: list[ConfigProblem] = []
        for key, value in stored.items():
            try:
                Settings().with_overrides({**accepted, key: value})
            except ConfigError as exc:
                problems.append(ConfigProblem(key=key, value=value, message=str(exc)))
            else:
                accepted[key] = value
        return ConfigReport(settings=Settings().with_overrides(accepted), problems=problems)

    def history(self, limit: int = 100, key: str | None = None) -> list[ConfigChange]:
        """Changes, newest first."""
        sql = "SELECT id, key, old_value, new_value, changed_by, changed_at FROM config_history"
        params: list[Any] = []
        if key is not None:
            sql += " WHERE key = ?"
            params.append(key)
        sql += " ORDER BY id DESC LIMIT ?"
        params.append(int(limit))
        return [
            ConfigChange(id=row[0], key=row[1], old_value=_decode(row[2]), new_value=_decode(row[3]),
                         changed_by=row[4], changed_at=row[5])
            for row in self._db.db.execute(sql, params).fetchall()
        ]

    # -- writing -------------------------------------------------------------
    def set(self, key: str, value: Any, by: str = "") -> Settings:
        """Validate and store one override; raises ConfigError (nothing stored) when refused."""
        return self.set_many({key: value}, by=by)

    def set_many(self, changes: dict[str, Any], by: str = "") -> Settings:
        """Validate all changes together and store them atomically; returns the new settings."""
        if not changes:
            return self.load()
        with self._db.transaction() as db:
            current = self.load_report().settings
            new_settings = current.with_overrides(changes)  # raises ConfigError: nothing written
            defaults = Settings()
            stored = self.overrides()
            now = utcnow()
            for key in changes:
                # Store the validated value (e.g. 0.5, not the text "0.5" typed into a form).
                value = new_settings.get(key)
                old = stored.get(key)
                if key in stored and old == value:
                    continue
                if key not in stored and value == defaults.get(key):
                    continue  # setting a default that is already in effect changes nothing
                if value == defaults.get(key):
                    db.execute("DELETE FROM config WHERE key = ?", [key])  # back to the default: keep overrides minimal
                else:
                    db.execute(
                        "INSERT INTO config (key, value, updated_at) VALUES (?, ?, ?) "
                        "ON CONFLICT(key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                        [key, _encode(value), now],
                    )
                db.execute(
                    "INSERT INTO config_history (key, old_value, new_value, changed_by, changed_at) VALUES (?, ?, ?, ?, ?)",
                    [key, _encode(old) if key in stored else None, _encode(value), by, now],
                )
        return new_settings

    def reset(self, key: str, by: str = "") -> Settings:
        """Drop one override (back to the default); unknown keys are refused.

        A stored key that a newer version no longer knows can still be reset: that is how a
        problem reported by :meth:`load_report` is cleared.
        """
        with self._db.transaction() as db:
            row = db.execute("SELECT value FROM config WHERE key = ?", [key]).fetchone()
            if row is None and key not in Settings().flat():
                raise ConfigError(f"unknown config key: {key}")
            if row is not None:
                db.execute("DELETE FROM config WHERE key = ?", [key])
                db.execute(
                    "INSERT INTO config_history (key, old_value, new_value, changed_by, changed_at) VALUES (?, ?, NULL, ?, ?)",
                    [key, row[0], by, utcnow()],
                )
        return self.load()

    def reset_all(self, by: str = "") -> Settings:
        """Drop every override, each recorded in the history."""
        with self._db.transaction() as db:
            rows = db.execute("SELECT key, value FROM config ORDER BY key").fetchall()
            now = utcnow()
            for key, value in rows:
                db.execute(
                    "INSERT INTO config_history (key, old_value, new_value, changed_by, changed_at) VALUES (?, ?, NULL, ?, ?)",
                    [key, value, by, now],
                )
            db.execute("DELETE FROM config")
        return Settings()


def _encode(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _decode(text: str | None) -> Any:
    return None if text is None else json.loads(text)
