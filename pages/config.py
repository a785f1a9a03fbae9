"""Config: every key, grouped, with its valid range; changes apply to the next run.

Admins change the global config.  Members change only grader.*, agentic.*, retrieval.* and rag.*,
as personal values that apply to their own runs ("yours", next to the global value); an admin can
promote them to global.  The access facade decides; this page only renders what it returns.
"""

from __future__ import annotations

import json
from collections import defaultdict

import pandas as pd
import streamlit as st

from docmind_core.errors import ConfigConflict, DocMindError
from docmind_core.text.visible import escape_markdown, visible_rows
from docmind_core.settings import PERSONAL_GROUPS, KeySpec, Settings, key_specs
from docmind_core.workbench import KeyVersion  # the facade's type: pages import no store
from docmind_ui.session import ensure_frame, workbench

ensure_frame()
bench = workbench()
view = bench.config_view()
is_admin = view.can_edit_global

GROUP_TITLES = {
    "grader": "CRAG grader thresholds", "agentic": "Agentic limits", "retrieval": "Retrieval", "citation": "Citations",
    "rag": "Context and chunking", "memory": "Memory", "llm": "Backend · language model",
    "embedding": "Backend · embeddings", "reranker": "Backend · reranker", "vector_store": "Backend · vector store",
    "keyword": "Backend · keyword index", "web": "Backend · web search", "tracing": "Backend · tracing",
    "sandbox": "Code sandbox", "auth": "Sign-in", "limits": "Input limits", "ingest": "Ingestion limits and jobs",
    "run": "Run deadline", "experiments": "Experiments",
}
ERRORS_KEY = "dm_cfg_errors"
NOTICE_KEY = "dm_cfg_notice"
FAILED_KEY = "dm_cfg_failed"  # a reset or promote that was refused: shown as an error, not a notice
OPEN_KEY = "dm_cfg_open"  # groups whose form is built (open expanders), kept across reruns
OPEN_AT_FIRST = ("grader", "agentic")
# What each drawn widget started from: {key: (value as the widget holds it, KeyVersion)}.  Apply writes only
# the keys whose widget differs from it, and only if their version is still that one (compare-and-set).
BASE_KEY = "dm_cfg_base"


def group_key(group: str) -> str:
    return "cfg-group-" + group


def widget_key(key: str) -> str:
    return "cfg::" + key


def _range(spec: KeySpec) -> str:
    if spec.choices:
        return "one of " + ", ".join(spec.choices)
    if spec.minimum is not None or spec.maximum is not None:
        lo = "−∞" if spec.minimum is None else f"{spec.minimum:g}"
        hi = "∞" if spec.maximum is None else f"{spec.maximum:g}"
        return f"range {lo} … {hi}"
    return spec.type


def _widget_value(spec: KeySpec, current):
    """A setting's value as its widget holds it."""
    if spec.type == "bool":
        return bool(current)
    if spec.type == "int":
        return int(current)
    if spec.type == "float":
        return float(current)
    if spec.type == "choice":
        return current
    return str(current)


def _sync_widget(spec: KeySpec, current, version: KeyVersion) -> None:
    """Give the widget the stored value when it is first drawn or when the value changed since it was drawn
    (by anyone: another tab, the CLI, a promote); otherwise it keeps what this form holds."""
    bases: dict = st.session_state.setdefault(BASE_KEY, {})
    key = widget_key(spec.key)
    base = bases.get(spec.key)
    if key not in st.session_state or base is None or base[1] != version:
        value = _widget_value(spec, current)
        st.session_state[key] = value
        bases[spec.key] = (value, version)


def _widget(spec: KeySpec, current, editable: bool) -> None:
    label = f"{spec.key.split('.', 1)[1]}"
    help_text = f"{spec.description}\n\n{_range(spec)} · default {spec.default!r}"
    disabled = not editable
    key = widget_key(spec.key)
    # the value comes from the session state, set by _sync_widget
    if spec.type == "bool":
        st.checkbox(label, key=key, help=help_text, disabled=disabled)
    elif spec.type == "choice":
        st.selectbox(label, list(spec.choices), key=key, help=help_text, disabled=disabled)
    elif spec.type == "int":
        st.number_input(label, min_value=None if spec.minimum is None else int(spec.minimum),
                        max_value=None if spec.maximum is None else int(spec.maximum), step=1,
                        key=key, help=help_text, disabled=disabled)
    elif spec.type == "float":
        st.number_input(label, min_value=None if spec.minimum is None else float(spec.minimum),
                        max_value=None if spec.maximum is None else float(spec.maximum),
                        step=0.01, format="%.3f", key=key, help=help_text, disabled=disabled)
    else:
        st.text_input(label, key=key, help=help_text, disabled=disabled)
    notes = [] if spec.type == "bool" else [_range(spec)]
    if spec.key in view.personal:
        notes.append(f"yours · global {view.global_settings.get(spec.key)!r}")
    elif current != spec.default:
        notes.append(f"default {spec.default!r}")
    if notes:
        st.caption(" · ".join(notes))


def _apply(group: str, specs: list[KeySpec]) -> None:
    """Form callback: save the keys changed in this form, at once, so cross-key rules see the final values.

    A key whose widget still holds what it was drawn with is not written (it may have been changed elsewhere
    since), and a changed key whose stored value moved on since the form was drawn is refused.
    """
    acting = workbench()  # re-validated now: the session may have ended since the form was drawn
    bases: dict = st.session_state.get(BASE_KEY, {})
    changes = {s.key: st.session_state[widget_key(s.key)] for s in specs
               if s.key in bases and widget_key(s.key) in st.session_state
               and st.session_state[widget_key(s.key)] != bases[s.key][0]}
    errors = st.session_state.setdefault(ERRORS_KEY, {})
    errors.pop(group, None)
    if not changes:
        st.session_state[NOTICE_KEY] = f"No change in {GROUP_TITLES.get(group, group)}."
        return
    try:
        acting.set_config(changes, expected={k: bases[k][1] for k in changes})
    except ConfigConflict as exc:
        errors[group] = (f"Not saved: {exc}. The form now shows the current value of "
                         f"{', '.join(exc.keys)}; apply again to replace it.")
        return
    except DocMindError as exc:
        errors[group] = f"Not saved: {exc}"
        return
    whose = "the global config" if acting.user.is_admin else "your personal values (your runs only)"
    st.session_state[NOTICE_KEY] = ("Saved " + ", ".join(f"{k} = {v!r}" for k, v in changes.items())
                                    + f" to {whose}. The next run uses it.")


def _reset(keys: list[str], scope: str | None = None) -> None:
    acting = workbench()
    try:
        for key in keys:
            acting.reset_config(key, scope=scope)
            st.session_state.pop(widget_key(key), None)  # let the widget show the default again
    except DocMindError as exc:
        st.session_state[FAILED_KEY] = f"Not reset: {exc}"
        return
    target = "default" if acting.user.is_admin and scope != "personal" else "global value"
    st.session_state[NOTICE_KEY] = f"Back to the {target}: " + ", ".join(keys)


def _reset_all() -> None:
    acting = workbench()
    try:
        acting.reset_config(None)
    except DocMindError as exc:
        st.session_state[FAILED_KEY] = f"Not reset: {exc}"
        return
    for spec in key_specs():
        st.session_state.pop(widget_key(spec.key), None)
    st.session_state[NOTICE_KEY] = ("Every key is back to its default." if acting.user.is_admin
                                    else "Every personal value is gone: your runs use the global config.")


def _promote(username: str, shown: dict) -> None:
    keys = list(shown)
    try:
        workbench().promote_config(username, keys, expected_values=shown)  # what this page showed, or nothing
    except DocMindError as exc:
        st.session_state[FAILED_KEY] = f"Not promoted: {exc}"
        return
    for key in keys:
        st.session_state.pop(widget_key(key), None)
    st.session_state[NOTICE_KEY] = f"Promoted {', '.join(keys)} of {username} to the global config."


# -- page ------------------------------------------------------------------
st.title("Config")
if is_admin:
    st.caption("You edit the global config. Edits are validated as a group and stored; the next question uses "
               "them, no restart needed.")
else:
    st.caption("You can tune grader, agentic, retrieval and context keys as personal values: they apply to your "
               "own runs only, shown as 'yours' next to the global value. Every other key is set by an admin.")
if notice := st.session_state.pop(NOTICE_KEY, None):
    st.success(escape_markdown(notice))  # it quotes values and names people typed
if failed := st.session_state.pop(FAILED_KEY, None):
    st.error(escape_markdown(failed))

# Stored values that are skipped (not readable, or no longer valid): named, with their reset.  The stored
# text is not shown: a global value is not every member's to read.
for problem in view.problems:
    personal = problem.scope == "personal"
    can_reset = personal or is_admin
    with st.container(border=True):
        st.warning(escape_markdown(f"{'Your personal value' if personal else 'The stored value'} of {problem.key} "
                                   f"is ignored: {problem.message}. The {'global value' if personal else 'default'}"
                                   " applies."))
        if can_reset:
            st.button(f"Reset {problem.key}", key=f"dm_cfg_fix_{problem.scope}_{problem.key}", on_click=_reset,
                      args=([problem.key], problem.scope))

settings: Settings = view.effective
by_group: dict[str, list[KeySpec]] = defaultdict(list)
for spec in key_specs():
    by_group[spec.group].append(spec)
errors = st.session_state.get(ERRORS_KEY, {})

# A group's form is built only while its expander is open (~100 widgets in all made the first switch to this
# page slow); opening one reruns the page.  What is open is remembered here, because an expander's label (its
# "changed" count) is part of its identity: a new label would otherwise start closed.
opened: set[str] = st.session_state.setdefault(OPEN_KEY, set(OPEN_AT_FIRST))
for group in GROUP_TITLES:
    specs = by_group.get(group, [])
    if not specs:
        continue
    changed = sum(1 for s in specs if settings.get(s.key) != s.default)
    title = GROUP_TITLES[group] + (f" · {changed} changed" if changed else "")
    editable = is_admin or group in PERSONAL_GROUPS
    if not editable:
        title += " · admin only"
    box = st.expander(title, expanded=group in opened or group in errors, key=group_key(group), on_change="rerun")
    (opened.add if box.open else opened.discard)(group)
    with box:
        if box.open:
            versions = bench.config_versions([spec.key for spec in specs])
            with st.form(f"cfg-form-{group}"):
                columns = st.columns(2)
                for i, spec in enumerate(specs):
                    _sync_widget(spec, settings.get(spec.key), versions[spec.key])
                    with columns[i % 2]:
                        _widget(spec, settings.get(spec.key), editable)
                st.form_submit_button(f"Apply {group}" if is_admin or not editable else f"Apply {group} (yours)",
                                      on_click=_apply, args=(group, specs), disabled=not editable)
        if group in errors:
            st.error(escape_markdown(errors[group]))

def _json(value) -> str:
    return json.dumps(value, ensure_ascii=False)


def _reset_controls(keys: list[str], pick_label: str, one_label: str, all_label: str) -> None:
    pick = st.multiselect(pick_label, keys, key="dm_cfg_reset_pick")
    left, right = st.columns(2)
    left.button(one_label, disabled=not pick, on_click=_reset, args=(pick,))
    right.button(all_label, on_click=_reset_all)


if not is_admin:
    st.subheader("Your personal values")
    if view.personal:
        st.dataframe(pd.DataFrame(visible_rows([{"key": k, "yours": _json(v),
                                                 "global": _json(view.global_settings.get(k))}
                                                for k, v in view.personal.items()])),
                     hide_index=True, key="dm_cfg_personal")
        _reset_controls(list(view.personal), "Keys back to the global value", "Use the global value",
                        "Drop all my values")
    else:
        st.caption("None: your runs use the global config.")

st.subheader("Difference from defaults")
diff = settings.diff_from_defaults()
if diff:
    rows = [{"key": k, "default": _json(d), "current": _json(v)} for k, (d, v) in diff.items()]
    if not is_admin:  # a member sees whose value each one is; only admins reset global keys
        rows = [{**row, "whose": "yours" if row["key"] in view.personal else "global"} for row in rows]
    st.dataframe(pd.DataFrame(visible_rows(rows)), hide_index=True, key="dm_cfg_diff")
    if is_admin:
        _reset_controls(list(diff), "Keys to reset", "Reset selected to default", "Reset everything")
else:
    st.caption("Every key has its default value.")

st.subheader("Change history")
history = bench.config_history(100)
if history:
    st.dataframe(pd.DataFrame(visible_rows([
        {"when": h.changed_at[:19].replace("T", " "), "scope": h.scope, "key": h.key,
         "from": "default" if h.old_value is None else json.dumps(h.old_value),
         "to": "default" if h.new_value is None else json.dumps(h.new_value),
         "by": h.changed_by} for h in history])), hide_index=True, key="dm_cfg_history")
else:
    st.caption("No change yet.")

if is_admin:
    st.subheader("Members' personal values")
    by_user = bench.personal_overrides_by_user()
    if not by_user:
        st.caption("No member has personal values.")
    for username, values in by_user.items():
        with st.container(border=True):
            st.markdown(f"**{escape_markdown(username)}**")
            st.dataframe(pd.DataFrame(visible_rows([{"key": k, "theirs": _json(v),
                                                     "global": _json(view.global_settings.get(k))}
                                                    for k, v in values.items()])),
                         hide_index=True, key=f"dm_cfg_pv_{username}")
            st.button(f"Promote {escape_markdown(username)}'s values to global", key=f"dm_cfg_promote_{username}",
                      on_click=_promote, args=(username, dict(values)))
