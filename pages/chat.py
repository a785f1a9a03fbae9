"""Chat: ask the selected knowledge bases; every answer shows how it was found."""

from __future__ import annotations

import time
from dataclasses import dataclass

import streamlit as st

from docmind_core.errors import DocMindError
from docmind_core.text.excerpt import clip_words
from docmind_core.values import RequestedMode
from docmind_core.text.visible import escape_markdown, visible_text
from docmind_core.reports.timeline import RunDigest, progress_words
from docmind_core.workbench import TraceRecord  # the facade's record type; pages never import a store
from docmind_ui.examples import example_questions
from docmind_ui.feedback_view import answer_feedback
from docmind_ui.live import RunPump
from docmind_ui.preload import draw_preload
from docmind_ui.run_view import render_pair, render_run
from docmind_ui.session import ensure_frame, selected_doc_ids, selected_kb_ids, workbench

ensure_frame()
bench = workbench()

SIDE_BY_SIDE = "pair"  # both paths on the same question; not a mode of one run
MODES = {"Auto": RequestedMode.AUTO.value, "RULE_PLANNER": RequestedMode.RULE_PLANNER.value,
         "AGENTIC": RequestedMode.AGENTIC.value, "Side by side": SIDE_BY_SIDE}
CONV_KEY = "dm_conv"  # the open conversation; plain state, so an interrupted run (Stop) cannot lose it
CONV_PICK_KEY = "dm_conv_pick"  # the sidebar picker widget, synced from CONV_KEY before it is drawn
ACTIVE_KEY = "dm_active_run"  # the ActiveRun being answered; kept across reruns of the page
QUEUE_KEY = "dm_question_queue"  # questions typed while an answer is written: (question, requested mode)
TRACE_CACHE = "dm_trace_cache"  # run id -> its stored trace (None: missing), read once per session
DIGEST_CACHE = "dm_digest_cache"  # run id -> its RunDigest, folded once per session
EXPORT_CACHE = "dm_export_cache"  # (conversation id, message count, its Markdown export)
PRELOADED_KEY = "dm_frontend_preloaded"  # this browser tab was given plotly.js and the other pages' element code
IDLE_RUN_KEY = "dm_preload_idle_runs"  # the preload fragment's runs since the page drew it
LOADING_NOTE = "Loading the sources and scores of this answer…"
NEW_CONVERSATION = ""  # the picker's entry for a new conversation (a None value would read "Choose an option")
EXAMPLES_KEY = "dm_example_questions"  # (selected KB ids, the example questions offered for them)
PRELOAD_AFTER_S = 2.0  # on the page this long: the browser is most likely idle (the user reads or types)


@dataclass
class ActiveRun:
    """The question this tab is answering: it outlives a rerun of the page, so a question typed meanwhile waits."""

    question: str
    mode: str
    pumps: list[RunPump]
    pair_id: str | None = None


def _active() -> ActiveRun | None:
    return st.session_state.get(ACTIVE_KEY)


def _queue() -> list[tuple[str, str]]:
    return st.session_state.setdefault(QUEUE_KEY, [])


def _stop_runs() -> None:
    active = _active()
    for pump in active.pumps if active else []:
        pump.stop()


def _ask_now(index: int) -> None:
    """Stop the answer being written and move a waiting question to the front."""
    queue = _queue()
    if 0 <= index < len(queue):
        queue.insert(0, queue.pop(index))
    _stop_runs()


def _drop_queued(index: int) -> None:
    queue = _queue()
    if 0 <= index < len(queue):
        queue.pop(index)


def _new_conversation() -> None:
    st.session_state[CONV_KEY] = None


def _pick_conversation() -> None:
    st.session_state[CONV_KEY] = st.session_state.get(CONV_PICK_KEY) or None


def _settle_stopped_runs() -> None:
    """A run stopped by the user keeps going in its thread until the core ends it; wait for it to be saved.  A
    run that finished while the page was away is in the conversation's history already."""
    active = _active()
    if active is None:
        return
    if any(p.stopped for p in active.pumps):
        for pump in active.pumps:
            pump.stop()
            pump.wait(15)
        st.session_state.pop(ACTIVE_KEY, None)
        st.toast("Run stopped; what was produced so far is saved.")
    elif all(p.finished.is_set() for p in active.pumps):
        st.session_state.pop(ACTIVE_KEY, None)


def _records(run_ids: list[str]) -> dict[str, TraceRecord | None]:
    """The traces of these runs (None: missing or not readable), the ones this session has not read yet in one
    batched read: a reopened conversation costs one read, and its reruns none."""
    cache = st.session_state.setdefault(TRACE_CACHE, {})
    unread = [r for r in run_ids if r not in cache]
    if unread:
        found = {r.run_id: r for r in bench.get_traces(unread).records}
        for run_id in unread:
            cache[run_id] = found.get(run_id)
    return {r: cache[r] for r in run_ids}


def _digest(record: TraceRecord) -> RunDigest:
    """A stored run's digest, folded once per session (a finished run's events never change)."""
    cache = st.session_state.setdefault(DIGEST_CACHE, {})
    if record.run_id not in cache:
        cache[record.run_id] = RunDigest.from_events(record.events)
    return cache[record.run_id]


def _export(conv_id: str, size: int) -> str:
    """The conversation as Markdown, made again only when the conversation has grown (``size``: its message count,
    from the conversation list the sidebar reads anyway): the export reads every run's sources, and the page runs
    at every click.  (Not a callable given to the download button: Streamlit's deferred download kept the
    browser's network busy after each answer, and the side-by-side browser test never reached network idle under
    load.)"""
    cached = st.session_state.get(EXPORT_CACHE)
    if cached is None or cached[:2] != (conv_id, size):
        cached = (conv_id, size, bench.export_conversation(conv_id))
        st.session_state[EXPORT_CACHE] = cached
    return cached[2]


def _history(conv_id: str) -> None:
    """The stored conversation: every question and answer text first, straight from the conversation, then each
    answer's full view (badge, citations, timeline, scores, sources) replayed from its trace in its place (pairs
    side by side).  The texts are on screen while the traces are read and the panels drawn."""
    messages = bench.conversation_messages(conv_id)
    questions: dict[str, str] = {}
    answers: dict[str, str] = {}
    run_ids: list[str] = []  # each run once, in the order the conversation first mentions it
    seen: set[str] = set()
    turns: list[str | list[str]] = []  # a question asked without a run, or the runs of one turn (a pair: two)
    for message in messages:
        if message.role == "user" and not message.run_id:
            turns.append(message.content)
        elif message.role == "user":
            questions[message.run_id] = message.content
        elif message.run_id:
            answers[message.run_id] = message.content
        if message.run_id and message.run_id not in seen:
            seen.add(message.run_id)
            run_ids.append(message.run_id)
            turns.append([message.run_id])
    # the runs' rows only (no events): which of them were asked side by side
    pair_of = {t.run_id: t.pair_id for t in bench.list_traces(conversation_id=conv_id, limit=max(1, len(run_ids)))
               if t.pair_id}
    grouped: list[str | list[str]] = []
    first_of_pair: dict[str, list[str]] = {}  # pair id -> the turn its first run opened
    for turn in turns:
        pair = pair_of.get(turn[0]) if isinstance(turn, list) else None
        if pair and len(first_of_pair.get(pair, ())) == 1:
            first_of_pair[pair].extend(turn)
            continue
        if pair:
            first_of_pair[pair] = turn
        grouped.append(turn)
    slots: list[tuple[list[str], st.delta_generator.DeltaGenerator, st.delta_generator.DeltaGenerator]] = []
    for turn in grouped:  # first pass: the texts
        with st.chat_message("user"):
            st.text(visible_text(turn if isinstance(turn, str) else questions.get(turn[0], "")))
        if isinstance(turn, list):
            with st.chat_message("assistant"):
                slot = st.empty()
                with slot.container():
                    for column, run_id in zip(st.columns(len(turn)), turn):
                        column.text(visible_text(answers.get(run_id, "")))
                # apart from the slot, and emptied explicitly: the browser keeps a replaced container's children
                # that the new one does not overwrite, so a note inside the slot outlived its answer's full view
                loading = st.empty()
                loading.caption(LOADING_NOTE)
            slots.append((turn, slot, loading))
    records = _records(run_ids)  # one batched read for the runs this session has not read yet
    for turn, slot, loading in slots:  # second pass: each answer's full view in place of its text
        loading.empty()
        found = [records[r] for r in turn]
        with slot.container():
            if any(record is None for record in found):
                for column, run_id in zip(st.columns(len(turn)), turn):
                    column.text(visible_text(answers.get(run_id, "")))
                st.warning("The trace of this answer is missing: its sources and scores cannot be shown.")
            elif len(found) == 2:
                first, second = found
                if first.meta.requested_mode != RequestedMode.RULE_PLANNER.value:
                    first, second = second, first
                render_pair(first.events, second.events, first.config, second.config, key=first.meta.pair_id)
            else:
                digest = _digest(found[0])
                render_run(digest, found[0].config, page_image=_page_image)
                answer_feedback(bench, digest)


def _page_image(source, page: int, passage: str):
    """A page of a PDF source as an image (run_view's "Show a cited page")."""
    return bench.page_image(source.doc_id, page, passage)


def _stream_into(pump: RunPump) -> RunDigest:
    """Show progress lines and stream the answer's tokens while the run goes on."""
    placeholder = st.empty()
    with placeholder.container():
        progress = st.empty()
        progress.caption("Starting…")
        notes = st.container()  # DocMind's own notices, above the answer as it streams (never in its text)
        started = time.perf_counter()
        last = ["Starting"]

        def show() -> None:  # also called while waiting: each call lets Streamlit notice a Stop click
            progress.caption(f"{escape_markdown(last[0])} · {time.perf_counter() - started:.1f} s")

        def tokens():
            for event in pump.stream(idle=show):
                if event.kind == "token":
                    yield escape_markdown(event.text)  # write_stream renders Markdown: the answer is text
                else:
                    if event.kind == "notice":
                        notes.info(escape_markdown(event.text), icon=":material/info:")
                    last[0] = progress_words(event)
                    show()

        st.write_stream(tokens())
    placeholder.empty()
    return RunDigest.from_events(pump.events)


def _start(question: str, mode: str) -> ActiveRun:
    kb_ids, doc_ids = selected_kb_ids(), selected_doc_ids()
    conv_id = st.session_state.get(CONV_KEY)
    if not conv_id:
        conv_id = bench.start_conversation(title=clip_words(question, 60, flatten=True))
        st.session_state[CONV_KEY] = conv_id

    def start(requested: str, pair_id: str | None = None):
        return lambda cancel: bench.ask(question, kb_ids, conversation_id=conv_id, mode=requested,
                                        selected_doc_ids=doc_ids or None, cancel=cancel, pair_id=pair_id)

    if mode == SIDE_BY_SIDE:
        pair_id = bench.new_pair_id()
        pumps = [RunPump(start(m.value, pair_id), m.value) for m in (RequestedMode.RULE_PLANNER, RequestedMode.AGENTIC)]
        active = ActiveRun(question, mode, pumps, pair_id)
    else:
        active = ActiveRun(question, mode, [RunPump(start(mode), mode)])
    st.session_state[ACTIVE_KEY] = active
    return active


def _waiting_list(key: str) -> None:
    """The questions typed while an answer is written: they run in turn, or one can stop the current answer."""
    queue = _queue()
    if not queue:
        return
    st.caption(f"{len(queue)} question{'s' if len(queue) != 1 else ''} waiting for this answer to finish:")
    for index, (question, _mode) in enumerate(queue):
        text, now, drop = st.columns([6, 2, 1], vertical_alignment="center")
        text.text(f"{index + 1}. {visible_text(question)}")
        now.button("Stop this answer, ask now", key=f"dm_ask_now_{key}_{index}", on_click=_ask_now, args=(index,))
        drop.button("Remove", key=f"dm_drop_{key}_{index}", on_click=_drop_queued, args=(index,))


def _show(active: ActiveRun) -> None:
    """Stream the active run (from its first event, also after a rerun of the page) and then render it."""
    key = str(id(active.pumps[0]))  # one script run may show several runs: their widgets need their own keys
    with st.chat_message("user"):
        st.text(visible_text(active.question))
    with st.chat_message("assistant"):
        live = st.empty()
        with live.container():  # the Stop button and the waiting list live with the stream
            st.button("Stop", key=f"dm_stop_{key}", icon=":material/stop_circle:", on_click=_stop_runs)
            _waiting_list(key)
            if active.mode == SIDE_BY_SIDE:
                left, right = st.columns(2)
                with left:
                    _stream_into(active.pumps[0])
                with right:
                    _stream_into(active.pumps[1])
            else:
                _stream_into(active.pumps[0])
        live.empty()
        with live.container():
            settings = bench.settings().flat()
            if active.mode == SIDE_BY_SIDE:
                render_pair(active.pumps[0].events, active.pumps[1].events, settings, settings, key=active.pair_id)
            else:
                digest = RunDigest.from_events(active.pumps[0].events)
                render_run(digest, settings, page_image=_page_image)
                answer_feedback(bench, digest)
    st.session_state.pop(ACTIVE_KEY, None)


# -- page ------------------------------------------------------------------
_settle_stopped_runs()
st.title("Chat")
mode_label = st.segmented_control("Mode", list(MODES), default="Auto", key="dm_chat_mode", required=True)
if not selected_kb_ids():
    st.caption("No knowledge base is selected in the sidebar: questions are answered without retrieval.")

current = st.session_state.get(CONV_KEY)
if current:
    try:
        _history(current)
    except DocMindError as exc:  # not this user's conversation (or gone): start a new one instead
        st.session_state[CONV_KEY] = None
        st.warning(f"{exc}; a new conversation starts.")

@st.fragment(run_every=PRELOAD_AFTER_S)
def _preload_when_idle() -> None:
    """Draws the preload on its first timed run, i.e. after the page has been shown for a while, and nothing on
    the runs after: the browser keeps the code it loaded, and the hidden elements would only weigh on the
    page's later draws.  The page's next full run no longer calls it, which ends its timer."""
    timed_runs = st.session_state.get(IDLE_RUN_KEY, 0)
    if timed_runs == 1:
        draw_preload()
        st.session_state[PRELOADED_KEY] = True
    st.session_state[IDLE_RUN_KEY] = timed_runs + 1


# A hidden empty chart and one example of each element kind the other pages draw (see docmind_ui/preload.py)
# make the browser load plotly.js (lazy, ~1 s to parse) before the first answer's chart needs it, and the other
# pages' element code before the first switch to them, once the page has been shown for PRELOAD_AFTER_S (the user
# reads or types).  Never with the page's draw: there the parse delayed the first page, stalled the user's next
# click by ~1 s (bench/page_speed.py: the switch right after returning to Chat) or, in a question's run, the
# answer's text.
if not st.session_state.get(PRELOADED_KEY):
    st.session_state[IDLE_RUN_KEY] = 0  # the page's own run of the fragment is not a timed one
    _preload_when_idle()

def _ask_example(question: str) -> None:
    _queue().append((question, MODES[st.session_state.get("dm_chat_mode") or "Auto"]))


def _examples() -> list[str]:
    """Example questions for the selected KBs, found once per selection in this session."""
    kb_ids = tuple(selected_kb_ids())
    cached = st.session_state.get(EXAMPLES_KEY)
    if cached is None or cached[0] != kb_ids:
        cached = (kb_ids, example_questions(bench, list(kb_ids)))
        st.session_state[EXAMPLES_KEY] = cached
    return cached[1]


if not st.session_state.get(CONV_KEY) and _active() is None and not _queue():
    examples = _examples()
    if examples:  # an empty Chat: a first question one click away
        st.caption("Try one of these questions about the selected knowledge bases:")
        for n, example in enumerate(examples):
            st.button(escape_markdown(visible_text(example)), key=f"dm_example_{n}", on_click=_ask_example,
                      args=(example,), icon=":material/help:")

question = st.chat_input("Ask about your documents…")
if question:  # never cancels the answer being written: it waits its turn (the user may stop the first)
    _queue().append((question, MODES[mode_label or "Auto"]))
active = _active()
if active is not None:
    _show(active)
while _queue():
    _show(_start(*_queue().pop(0)))

# -- conversation picker and export (drawn last so a new conversation can be selected above) --
with st.sidebar:
    st.divider()
    conversations = bench.list_conversations()
    titles = {c.id: f"{c.title or 'Untitled'} · {c.updated_at[:16].replace('T', ' ')}" for c in conversations}
    sizes = {c.id: c.message_count for c in conversations}
    options = [NEW_CONVERSATION, *titles]
    if st.session_state.get(CONV_KEY) not in titles:
        st.session_state[CONV_KEY] = None
    st.session_state[CONV_PICK_KEY] = st.session_state.get(CONV_KEY) or NEW_CONVERSATION
    st.selectbox("Conversation", options, key=CONV_PICK_KEY, on_change=_pick_conversation,
                 format_func=lambda c: "— new conversation —" if c == NEW_CONVERSATION else
                 visible_text(titles.get(c, c)))
    st.button("New conversation", on_click=_new_conversation, icon=":material/add:")
    conv_id = st.session_state.get(CONV_KEY)
    if conv_id:
        st.download_button("Export as Markdown", _export(conv_id, sizes[conv_id]),
                           file_name=f"docmind-conversation-{conv_id[:8]}.md", mime="text/markdown",
                           icon=":material/download:")
