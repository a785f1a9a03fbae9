"""Config: every key, grouped, with its valid range; changes apply to the next run."""

from __future__ import annotations

import json
from collections import defaultdict

import pandas as pd
import streamlit as st

from docmind_core.safe_text import escape_markdown
from docmind_core.errors import ConfigError
from docmind_core.settings import KeySpec, Settings, key_specs
from docmind_ui.session import ensure_frame, get_engine

ensure_frame()
engine = get_engine()

GROUP_TITLES = {
    "grader": "CRAG grader thresholds", "agentic": "Agentic limits", "retrieval": "Retrieval", "citation": "Citations",
    "rag": "Context and chunking", "memory": "Memory", "llm": "Backend · language model",
    "embedding": "Backend · embeddings", "reranker": "Backend · reranker", "vector_store": "Backend · vector store",
    "keyword": "Backend · keyword index", "web": "Backend · web search", "tracing": "Backend · tracing",
    "sandbox": "Code sandbox", "auth": "Sign-in", "limits": "Input limits",
}
ERRORS_KEY = "dm_cfg_errors"
NOTICE_KEY = "dm_cfg_notice"


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


def _widget(spec: KeySpec, current) -> None:
    label = f"{spec.key.split('.', 1)[1]}"
    help_text = f"{spec.description}\n\n{_range(spec)} · default {spec.default!r}"
    key = widget_key(spec.key)
    # the stored value is the widget's initial value; after a reset the key is dropped so it shows the default
    if spec.type == "bool":
        st.checkbox(label, value=bool(current), key=key, help=help_text)
    elif spec.type == "choice":
        st.selectbox(label, list(spec.choices), index=list(spec.choices).index(current), key=key, help=help_text)
    elif spec.type == "int":
        st.number_input(label, min_value=None if spec.minimum is None else int(spec.minimum),
                        max_value=None if spec.maximum is None else int(spec.maximum), value=int(current), step=1,
                        key=key, help=help_text)
    elif spec.type == "float":
        st.number_input(label, min_value=None if spec.minimum is None else float(spec.minimum),
                        max_value=None if spec.maximum is None else float(spec.maximum), value=float(current),
                        step=0.01, format="%.3f", key=key, help=help_text)
    else:
        st.text_input(label, value=str(current), key=key, help=help_text)
    if spec.type != "bool":
        st.caption(_range(spec) + ("" if current == spec.default else f" · default {spec.default!r}"))


def _apply(group: str, specs: list[KeySpec]) -> None:
    """Form callback: save the group's changed keys at once, so cross-key rules see the final values."""
    current = engine.settings
    changes = {s.key: st.session_state[widget_key(s.key)] for s in specs
               if st.session_state[widget_key(s.key)] != current.get(s.key)}
    errors = st.session_state.setdefault(ERRORS_KEY, {})
    errors.pop(group, None)
    if not changes:
        st.session_state[NOTICE_KEY] = f"No change in {GROUP_TITLES.get(group, group)}."
        return
    try:
        engine.config.set_many(changes, by="web")
    except ConfigError as exc:
        errors[group] = f"Not saved: {exc}"
        return
    st.session_state[NOTICE_KEY] = ("Saved " + ", ".join(f"{k} = {v!r}" for k, v in changes.items())
                                    + ". The next run uses it.")


def _reset(keys: list[str]) -> None:
    for key in keys:
        engine.config.reset(key, by="web")
        st.session_state.pop(widget_key(key), None)  # let the widget show the default again
    st.session_state[NOTICE_KEY] = "Reset to default: " + ", ".join(keys)


def _reset_all() -> None:
    engine.config.reset_all(by="web")
    for spec in key_specs():
        st.session_state.pop(widget_key(spec.key), None)
    st.session_state[NOTICE_KEY] = "Every key is back to its default."


# -- page ------------------------------------------------------------------
st.title("Config")
st.caption("Edits are validated as a group and stored; the next question uses them, no restart needed.")
if notice := st.session_state.pop(NOTICE_KEY, None):
    st.success(escape_markdown(notice))  # it quotes values and names people typed

settings: Settings = engine.settings
by_group: dict[str, list[KeySpec]] = defaultdict(list)
for spec in key_specs():
    by_group[spec.group].append(spec)
errors = st.session_state.get(ERRORS_KEY, {})

for group in GROUP_TITLES:
    specs = by_group.get(group, [])
    if not specs:
        continue
    changed = sum(1 for s in specs if settings.get(s.key) != s.default)
    title = GROUP_TITLES[group] + (f" · {changed} changed" if changed else "")
    with st.expander(title, expanded=group in ("grader", "agentic") or group in errors):
        with st.form(f"cfg-form-{group}"):
            columns = st.columns(2)
            for i, spec in enumerate(specs):
                with columns[i % 2]:
                    _widget(spec, settings.get(spec.key))
            st.form_submit_button(f"Apply {group}", on_click=_apply, args=(group, specs))
        if group in errors:
            st.error(escape_markdown(errors[group]))

st.subheader("Difference from defaults")
diff = settings.diff_from_defaults()
if diff:
    st.dataframe(pd.DataFrame([{"key": k, "default": json.dumps(d, ensure_ascii=False),
                                "current": json.dumps(v, ensure_ascii=False)} for k, (d, v) in diff.items()]),
                 hide_index=True, key="dm_cfg_diff")
    pick = st.multiselect("Keys to reset", list(diff), key="dm_cfg_reset_pick")
    left, right = st.columns(2)
    left.button("Reset selected to default", disabled=not pick, on_click=_reset, args=(pick,))
    right.button("Reset everything", on_click=_reset_all)
else:
    st.caption("Every key has its default value.")

st.subheader("Change history")
history = engine.config.history(100)
if history:
    st.dataframe(pd.DataFrame([{"when": h.changed_at[:19].replace("T", " "), "key": h.key,
                                "from": "default" if h.old_value is None else json.dumps(h.old_value),
                                "to": "default" if h.new_value is None else json.dumps(h.new_value),
                                "by": h.changed_by} for h in history]), hide_index=True, key="dm_cfg_history")
else:
    st.caption("No change yet.")
