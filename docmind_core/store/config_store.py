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

Personal overrides (``user_config``) are a member's own values for the keys in
``settings.PERSONAL_GROUPS``; :meth:`load_for` lays them over the global
settings for that member's runs only.  Who may write which scope is decided by
the access facade (``docmind_core/workbench.py``), not here: this module only
stores, validates and records every change with the acting user.

A stored value that is not even JSON (a hand edit, a broken tool) is skipped
the same way, never raised: reading it must not lock anyone out of the
commands that remove it (``config reset KEY`` / ``--all``).

Every change bumps that key's version (``config_versions``: one per key and
scope, never reused).  A form passes the versions it was drawn from as
``expected``; a write whose keys changed since is refused with
:class:`ConfigConflict` naming who changed them, and nothing is written.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Callable

from pydantic import BaseModel

from docmind_core.errors import ConfigConflict, ConfigError
from docmind_core.settings import Settings, fail_closed, fail_closed_note, is_personal_key
from docmind_core.store.db import Database, utcnow, where_sql

log = logging.getLogger(__name__)


UNREADABLE = "the stored text is not readable (not JSON)"
_SHOWN_RAW_CHARS = 80  # of an unreadable value in a warning: enough to recognise it, never a whole blob


class ConfigProblem(BaseModel):
    """A stored override that was skipped: it no longer validates, or it is not readable at all."""

    key: str
    value: Any  # the stored value; for an unreadable one, the start of its raw text
    message: str
    scope: str = "global"  # global | personal (one user's own value)


@dataclass(frozen=True)
class KeyVersion:
    """What a form was drawn from, for one key: the global value's version and the user's personal one's
    (0: never changed)."""

    global_version: int = 0
    personal_version: int = 0


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
    user_id: int | None = None  # the acting user (0: the local operator / single-user mode)
    scope: str = "global"  # global | personal (then user_id is whose personal value changed)


@dataclass(frozen=True)
class _Scope:
    """One scope's table of stored values: the statements that drop and store a value (a personal one's
    parameters start with the user's id)."""

    name: str  # global | personal
    delete_sql: str
    upsert_sql: str


_GLOBAL = _Scope(
    "global", "DELETE FROM config WHERE key = ?",
    "INSERT INTO config (key, value, updated_at) VALUES (?, ?, ?) "
    "ON CONFLICT(key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at")
_PERSONAL = _Scope(
    "personal", "DELETE FROM user_config WHERE user_id = ? AND key = ?",
    "INSERT INTO user_config (user_id, key, value, updated_at) VALUES (?, ?, ?, ?) "
    "ON CONFLICT(user_id, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at")


class ConfigStore:
    def __init__(self, db: Database):
        self._db = db
        self._warned: set[tuple[str, str]] = set()  # load() runs for every run: warn once per problem

    # -- reading -------------------------------------------------------------
    def _raw_global(self) -> dict[str, str]:
        return dict(self._db.db.execute("SELECT key, value FROM config ORDER BY key").fetchall())

    def _raw_personal(self, user_id: int) -> dict[str, str]:
        return dict(self._db.db.execute("SELECT key, value FROM user_config WHERE user_id = ? ORDER BY key",
                                        [user_id]).fetchall())

    def overrides(self) -> dict[str, Any]:
        """The readable stored overrides as stored (valid or not), by dotted key."""
        return _readable(self._raw_global())[0]

    def load(self) -> Settings:
        """Defaults plus every stored override that still validates."""
        report = self.load_report()
        self._warn(report.problems)
        return report.settings

    def _warn(self, problems: list[ConfigProblem], user_id: int | None = None) -> None:
        for problem in problems:
            seen = (problem.scope, user_id, problem.key, problem.message)
            if seen not in self._warned:
                self._warned.add(seen)
                whose = f"user #{user_id}'s personal" if problem.scope == "personal" else "stored"
                reset = f"config reset {problem.key}" + (" --personal" if problem.scope == "personal" else "")
                log.warning("ignoring %s config %s=%r: %s (%s)", whose, problem.key, problem.value,
                            problem.message, reset)

    def load_report(self) -> ConfigReport:
        """The settings in effect and the stored overrides that were skipped, with why.  A skipped security key
        (``settings.FAIL_CLOSED``) takes its safe value, not the default, and its problem says so."""
        readable, unreadable = _readable(self._raw_global())
        settings, problems, _accepted = _valid_layer(Settings(), readable)
        problems = unreadable + problems
        settings, closed = fail_closed(settings, (p.key for p in problems))
        problems = [p.model_copy(update={"message": f"{p.message}; {fail_closed_note(p.key)}"})
                    if p.key in closed else p for p in problems]
        return ConfigReport(settings=settings, problems=problems)

    def history(self, limit: int = 100, key: str | None = None,
                personal_of: int | None = None) -> list[ConfigChange]:
        """Changes, newest first; with ``personal_of``, global changes plus that user's personal ones only."""
        where, params = where_sql({"key = ?": key, "(scope = 'global' OR user_id = ?)": personal_of})
        sql = ("SELECT id, key, old_value, new_value, changed_by, changed_at, user_id, scope FROM config_history"
               + where + " ORDER BY id DESC LIMIT ?")
        params.append(int(limit))
        return [
            ConfigChange(id=row[0], key=row[1], old_value=_decode(row[2]), new_value=_decode(row[3]),
                         changed_by=row[4], changed_at=row[5], user_id=row[6], scope=row[7] or "global")
            for row in self._db.db.execute(sql, params).fetchall()
        ]

    # -- personal overrides ----------------------------------------------------
    def personal_overrides(self, user_id: int) -> dict[str, Any]:
        """One user's readable stored personal values, by dotted key."""
        return _readable(self._raw_personal(user_id))[0]

    def users_with_overrides(self) -> dict[int, dict[str, Any]]:
        """Every user's readable personal values (for the admin's promote view)."""
        out: dict[int, dict[str, Any]] = {}
        for user_id, key, value in self._db.db.execute(
                "SELECT user_id, key, value FROM user_config ORDER BY user_id, key").fetchall():
            decoded = _readable({key: value})[0]
            if decoded:
                out.setdefault(user_id, {}).update(decoded)
        return out

    def load_for(self, user_id: int | None) -> Settings:
        """The settings one user's runs use: global, then their personal values that still validate."""
        return self.load_for_report(user_id).settings

    def load_for_report(self, user_id: int | None) -> ConfigReport:
        """One user's settings, and their personal values that were skipped (global problems: ``load_report``)."""
        settings = self.load()
        if not user_id:
            return ConfigReport(settings=settings)
        readable, unreadable = _readable(self._raw_personal(user_id), scope="personal")
        personal = {k: v for k, v in readable.items() if is_personal_key(k)}
        # A global change can make a personal value invalid (say, low >= the new high threshold):
        # the personal values that still fit apply, rather than none.
        settings, invalid, _accepted = _valid_layer(settings, personal)
        problems = unreadable + [p.model_copy(update={"scope": "personal"}) for p in invalid]
        self._warn(problems, user_id)
        return ConfigReport(settings=settings, problems=problems)

    def versions(self, keys: list[str], user_id: int | None = None) -> dict[str, KeyVersion]:
        """The current version of each key as ``user_id`` sees it (global, and their personal value)."""
        return {key: KeyVersion(g, p) for key, (g, _g_by, p, _p_by) in
                self._version_rows(self._db.db, keys, user_id).items()}

    @staticmethod
    def _version_rows(db, keys: list[str], user_id: int | None) -> dict[str, tuple[int, str, int, str]]:
        """Per key: the global version and who made it, the personal version and who made it."""
        owners = [0] + ([user_id] if user_id else [])
        found: dict[tuple[int, str], tuple[int, str]] = {}
        for start in range(0, len(keys), 400):  # within SQLite's limit of bound variables
            chunk = keys[start:start + 400]
            sql = (f"SELECT owner_id, key, version, changed_by FROM config_versions WHERE owner_id IN "
                   f"({','.join('?' * len(owners))}) AND key IN ({','.join('?' * len(chunk))})")
            for owner, key, version, by in db.execute(sql, [*owners, *chunk]).fetchall():
                found[(owner, key)] = (version, by)
        return {key: (*found.get((0, key), (0, "")), *(found.get((user_id, key), (0, "")) if user_id else (0, "")))
                for key in keys}

    def _check_versions(self, db, changes: dict[str, Any], expected: dict[str, KeyVersion] | None,
                        user_id: int | None) -> None:
        """Refuse the whole write when a key it changes moved on since ``expected`` was read."""
        if not expected:
            return
        keys = [k for k in changes if k in expected]
        moved: list[tuple[str, str]] = []
        for key, (g, g_by, p, p_by) in self._version_rows(db, keys, user_id).items():
            base = expected[key]
            if p != base.personal_version:
                moved.append((key, p_by))
            elif g != base.global_version:
                moved.append((key, g_by))
        if moved:
            text = "; ".join(f"{key} was changed by {by or 'someone'}" for key, by in moved)
            raise ConfigConflict(f"{text} since you opened this page: nothing was saved", [k for k, _ in moved])

    def set_personal(self, user_id: int, changes: dict[str, Any], by: str = "",
                     expected: dict[str, KeyVersion] | None = None) -> Settings:
        """Validate and store personal values (only PERSONAL_GROUPS keys); returns that user's settings.

        With ``expected`` (the versions a form was drawn from), a key changed since is refused
        (:class:`ConfigConflict`) and nothing is written.
        """
        outside = [k for k in changes if not is_personal_key(k)]
        if outside:
            raise ConfigError(f"{', '.join(outside)} cannot be a personal value: only grader.*, agentic.*, "
                              "retrieval.* and rag.* keys can")
        with self._db.transaction() as db:
            self._check_versions(db, changes, expected, user_id)
            raw = self._raw_personal(user_id)
            stored = _readable(raw)[0]
            base = self.load()
            new_settings = base.with_overrides({**stored, **changes})  # ConfigError: nothing written
            # the global value is each key's default here: a personal value equal to it is not kept
            self._write(db, _PERSONAL, changes, new_settings, raw, base.get, by, user_id)
        return self.load_for(user_id)

    def reset_personal(self, user_id: int, key: str | None = None, by: str = "") -> Settings:
        """Drop one personal value (or all of them with ``key=None``): that user is back on the global value."""
        with self._db.transaction() as db:
            stored = self._raw_personal(user_id)  # as stored: an unreadable value is removed like any other
            keys = list(stored) if key is None else [key]
            if key is not None and key not in stored and key not in Settings().flat():
                raise ConfigError(f"unknown config key: {key}")
            now = utcnow()
            for k in keys:
                if k in stored:
                    db.execute("DELETE FROM user_config WHERE user_id = ? AND key = ?", [user_id, k])
                    self._log(db, k, stored[k], None, by, now, user_id, "personal")
        return self.load_for(user_id)

    def promote(self, user_id: int, keys: list[str] | None = None, by: str = "",
                acting_user_id: int | None = None, expected_values: dict[str, Any] | None = None) -> Settings:
        """Make a user's personal values global (all, or ``keys``); they stop being personal.

        With ``expected_values`` (what a page showed), a value changed since is refused (:class:`ConfigConflict`).
        """
        personal = self.personal_overrides(user_id)
        keys = list(personal) if keys is None else keys
        missing = [k for k in keys if k not in personal]
        if missing:
            raise ConfigError(f"user #{user_id} has no personal value for {', '.join(missing)}")
        if expected_values is not None:
            moved = [k for k in keys if k not in expected_values or personal[k] != expected_values[k]]
            if moved:
                who = self._version_rows(self._db.db, moved, user_id)
                text = "; ".join(f"{k} was changed by {who[k][3] or 'someone'}" for k in moved)
                raise ConfigConflict(f"{text} since you opened this page: nothing was promoted", moved)
        if not keys:
            return self.load()
        settings = self.set_many({k: personal[k] for k in keys}, by=by, user_id=acting_user_id)
        for key in keys:
            self.reset_personal(user_id, key, by=by)
        return settings

    @staticmethod
    def _log(db, key: str, old: str | None, new: str | None, by: str, now: str, user_id: int | None,
             scope: str) -> None:
        db.execute("INSERT INTO config_history (key, old_value, new_value, changed_by, changed_at, user_id, scope) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?)", [key, old, new, by, now, user_id, scope])
        # every recorded change is a new version of that key in its scope (0: global)
        db.execute("INSERT INTO config_versions (owner_id, key, version, changed_by) VALUES (?, ?, 1, ?) "
                   "ON CONFLICT(owner_id, key) DO UPDATE SET version = version + 1, changed_by = excluded.changed_by",
                   [user_id if scope == "personal" else 0, key, by])

    # -- writing -------------------------------------------------------------
    def _write(self, db, scope: _Scope, changes: dict[str, Any], new_settings: Settings, raw: dict[str, str],
               default_of: Callable[[str], Any], by: str, user_id: int | None) -> None:
        """Store the keys of ``changes`` as ``new_settings`` validated them (0.5, not the text "0.5" typed into
        a form), each with its history row and new version; the caller holds the transaction.

        ``raw`` is the scope's stored text before the change.  ``default_of(key)`` is what a key is without a
        value of its own in this scope: a value equal to it is dropped rather than stored, so the stored values
        stay minimal.  ``user_id``: the acting user for a global value, the owner for a personal one.
        """
        stored = _readable(raw)[0]
        owner = [user_id] if scope is _PERSONAL else []
        now = utcnow()
        for key in changes:
            value = new_settings.get(key)
            old = stored.get(key)
            if key in stored and old == value:
                continue
            default = default_of(key)
            if key not in raw and value == default:
                continue  # setting a value that is already in effect changes nothing
            if value == default:
                db.execute(scope.delete_sql, [*owner, key])
            else:
                db.execute(scope.upsert_sql, [*owner, key, _encode(value), now])
            self._log(db, key, _encode(old) if key in stored else raw.get(key), _encode(value), by, now,
                      user_id, scope.name)

    def set(self, key: str, value: Any, by: str = "", user_id: int | None = None) -> Settings:
        """Validate and store one override; raises ConfigError (nothing stored) when refused."""
        return self.set_many({key: value}, by=by, user_id=user_id)

    def set_many(self, changes: dict[str, Any], by: str = "", user_id: int | None = None,
                 expected: dict[str, KeyVersion] | None = None) -> Settings:
        """Validate all changes together and store them atomically; returns the new settings.

        With ``expected`` (the versions a form was drawn from, as ``user_id`` saw them), a key changed
        since is refused (:class:`ConfigConflict`) and nothing is written.
        """
        if not changes:
            return self.load()
        with self._db.transaction() as db:
            self._check_versions(db, changes, expected, user_id)
            raw = self._raw_global()
            stored = _readable(raw)[0]
            # built as load() builds it, over every stored override that validates: a key set by hand keeps
            # winning over a profile's preset, here as after the write
            accepted = _valid_layer(Settings(), stored)[2]
            new_settings = Settings().with_overrides({**accepted, **changes})  # raises ConfigError: nothing written
            # What each key would be without an override of its own: the defaults, with the chosen llm.profile's
            # presets (so setting a key back to its plain default under a profile is stored, and wins).
            profile = new_settings.llm.profile
            under_profile = Settings() if profile == "default" else Settings().with_overrides({"llm.profile": profile})

            def default_of(key: str) -> Any:
                return (Settings() if key == "llm.profile" else under_profile).get(key)

            self._write(db, _GLOBAL, changes, new_settings, raw, default_of, by, user_id)
        return new_settings

    def reset(self, key: str, by: str = "", user_id: int | None = None) -> Settings:
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
                self._log(db, key, row[0], None, by, utcnow(), user_id, "global")
        return self.load()

    def reset_all(self, by: str = "", user_id: int | None = None) -> Settings:
        """Drop every override, each recorded in the history."""
        with self._db.transaction() as db:
            rows = db.execute("SELECT key, value FROM config ORDER BY key").fetchall()
            now = utcnow()
            for key, value in rows:
                self._log(db, key, value, None, by, now, user_id, "global")
            db.execute("DELETE FROM config")
        return Settings()


def _valid_layer(base: Settings, overrides: dict[str, Any]) -> tuple[Settings, list[ConfigProblem], dict[str, Any]]:
    """``base`` with ``overrides``; when some no longer validate, each is tried in turn so the good ones still
    apply, and the refused ones come back as problems.  Also returns the overrides that were applied."""
    try:
        return base.with_overrides(overrides), [], dict(overrides)
    except ConfigError:
        pass
    accepted: dict[str, Any] = {}
    problems: list[ConfigProblem] = []
    for key, value in overrides.items():
        try:
            base.with_overrides({**accepted, key: value})
        except ConfigError as exc:
            problems.append(ConfigProblem(key=key, value=value, message=str(exc)))
        else:
            accepted[key] = value
    return base.with_overrides(accepted), problems, accepted


def _readable(raw: dict[str, str], scope: str = "global") -> tuple[dict[str, Any], list[ConfigProblem]]:
    """Stored JSON texts decoded, and a problem for each one that is not JSON (skipped, never raised)."""
    values: dict[str, Any] = {}
    problems: list[ConfigProblem] = []
    for key, text in raw.items():
        try:
            values[key] = json.loads(text)
        except (ValueError, TypeError, RecursionError):  # ValueError: JSON's, or a huge integer
            shown = str(text)[:_SHOWN_RAW_CHARS] + ("…" if len(str(text)) > _SHOWN_RAW_CHARS else "")
            problems.append(ConfigProblem(key=key, value=shown, message=UNREADABLE, scope=scope))
    return values, problems


def _encode(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _decode(text: str | None) -> Any:
    """A history value; one that is not JSON (an unreadable value that was reset) is shown as its text."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except (ValueError, TypeError, RecursionError):
        return str(text)
