"""Generation: template choice, the messages sent to the language model, and the streamed answer.

:class:`AnswerWriter` streams the answer from the configured model and, when it fails (an error, a
call cut at the run's deadline, a reply that is empty or broke off) or the run already stopped calling
it, from the offline engine over the same prompt, saying why in a notice; when retrieval was
incomplete or KBs are still being ingested the reader is told so first, and with no evidence at all only
that is said.  Those notes are DocMind's own words: they are ``Notice`` events beside the answer, never part
of its text, so the claim checks never read them (with no evidence at all the note is the whole reply, and
``WrittenAnswer.app_written`` keeps it from being graded).

History enters the prompt as plain prior turns (what the user asked, what
DocMind answered) and never with the evidence retrieved for those turns:
stored context from earlier runs would pollute the conversation and crowd out
the current evidence.  Only the current sources are numbered [1..n], in exactly
the order the UI lists them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Generator, Sequence

from docmind_core.answer.run_context import RunContext
from docmind_core.backends.protocols import AnswerPrompt, LanguageModel
from docmind_core.deadline import LLM, bind_model, elapsed_ms
from docmind_core.errors import EmptyReply, IncompleteReply, ModelCallCut
from docmind_core.events import AnswerStarted, AppNotice, ErrorRaised, Event, Fallback, Notice, NoticeCode, Token
from docmind_core.values import GradeResult, PendingIngest, RetrievedChunk, Tier, Turn
from docmind_core.prompts import PromptLibrary, format_sources, language_name
from docmind_core.text.tokens import detect_language, truncate_to_tokens

ANSWER_TEMPLATES = ("knowledge_qa", "low_confidence", "fallback")
DIRECT_TEMPLATES = ("chitchat", "capability", "out_of_scope")
COMPACT_TEMPLATES = ("knowledge_qa", "low_confidence")  # each has a <name>_compact.txt beside it
# How much of each earlier turn a prompt replays, in tokens; both cuts live here, next to format_turns.
# Understanding only resolves references ("it", "the second one") and sits on the path before retrieval,
# so its turns are cut short; the answer may be asked about the earlier answer itself (a follow-up, a
# meta-dialogue question), so it keeps twice as much.
UNDERSTANDING_TURN_TOKENS = 300
ANSWER_TURN_TOKENS = 600


def choose_template(grade: GradeResult | None, sources: Sequence[RetrievedChunk]) -> str:
    """HIGH → knowledge_qa; weak evidence (LOW / AMBIGUOUS) → low_confidence; no evidence → fallback."""
    if not sources:
        return "fallback"
    if grade is None or grade.tier is Tier.HIGH:
        return "knowledge_qa"
    return "low_confidence"


def format_memories(memories: Sequence[str]) -> str:
    return "\n".join(f"- {m.strip()}" for m in memories if m.strip()) or "(none)"


def format_turns(history: Sequence[Turn], assistant: str, empty: str, separator: str, max_tokens: int) -> str:
    """Earlier turns as "User: ..." / "<assistant>: ..." lines, each cut to ``max_tokens``."""
    if not history:
        return empty
    return separator.join(f"{'User' if t.role == 'user' else assistant}: "
                          f"{truncate_to_tokens(t.content.strip(), max_tokens)}" for t in history)


def format_conversation(history: Sequence[Turn]) -> str:
    return format_turns(history, "DocMind", "(the conversation is empty)", "\n\n", ANSWER_TURN_TOKENS)


def _history_messages(history: Sequence[Turn]) -> list[dict[str, str]]:
    return [{"role": "user" if t.role == "user" else "assistant",
             "content": truncate_to_tokens(t.content.strip(), ANSWER_TURN_TOKENS)}
            for t in history if t.content.strip()]


def build_answer_prompt(template: str, question: str, sources: Sequence[RetrievedChunk],
                        history: Sequence[Turn], memories: Sequence[str],
                        prompts: PromptLibrary, compact: bool = False) -> AnswerPrompt:
    """The system + user messages for one answer, with earlier turns in between.

    For ``meta_dialogue`` the conversation is the material itself, so it goes
    into the user message once instead of as separate turns.  ``compact`` (``rag.compact_prompts``) renders
    the short instructions of the two evidence templates; the prompt keeps its template's name.
    """
    language = detect_language(question)
    values: dict[str, str] = {"question": question.strip(), "language": language_name(language)}
    if template in ANSWER_TEMPLATES:
        values["memories"] = format_memories(memories)
        if template != "fallback":
            values["sources"] = format_sources(sources)
    elif template == "meta_dialogue":
        values["conversation"] = format_conversation(history)
    elif template == "memory_ack":
        values["memories"] = format_memories(memories)

    rendered = prompts.render_messages(f"{template}_compact" if compact and template in COMPACT_TEMPLATES
                                       else template, **values)
    system = [m for m in rendered if m["role"] == "system"]
    user = [m for m in rendered if m["role"] != "system"]
    prior = [] if template == "meta_dialogue" else _history_messages(history)
    messages = system + prior + user
    return AnswerPrompt(template=template, messages=messages, question=question,
                        sources=list(sources) if template != "fallback" else [],
                        history=list(history), memories=list(memories), language=language)


def incomplete_notice(question: str, reasons: Sequence[str], evidence: bool) -> str:
    """What the reader is told when retrieval did not finish, in the question's language."""
    what = "; ".join(reasons)
    if detect_language(question) == "zh":
        if evidence:
            return f"注意：本次检索不完整（{what}），以下回答只依据已找到的资料。\n\n"
        return (f"本次检索不完整（{what}），知识库没有被完整搜索，所以无法判断其中是否有相关资料。"
                f"这不是一个回答：请稍后重试。")
    if evidence:
        return f"Note: retrieval was incomplete ({what}); the answer below uses only the evidence that was found.\n\n"
    return (f"Retrieval was incomplete ({what}): the knowledge bases were not fully searched, so DocMind cannot "
            f"tell whether they cover this question. This is not an answer; please try again.")


def failed_answer_reason(exc: BaseException) -> str:
    """Why the model's answer was not used, in a few plain words for the reader."""
    if isinstance(exc, ModelCallCut):
        return "it did not finish before the run's deadline"
    if isinstance(exc, IncompleteReply):
        return "it broke off before its end"
    if isinstance(exc, EmptyReply):
        return "it was empty"
    return f"the model call failed ({type(exc).__name__})"


def fallback_notice(question: str, reason: str, partial: bool) -> str:
    """The notice beside the answer when the offline engine answers instead of the model, in the question's
    language."""
    if detect_language(question) == "zh":
        if partial:
            return f"注意：语言模型的回答不完整（{reason}），其后接着 DocMind 从同一批资料中离线摘录的回答。\n\n"
        return f"注意：语言模型没有给出回答（{reason}），以下是 DocMind 从资料中离线摘录的回答。\n\n"
    if partial:
        return (f"Note: the language model's answer is incomplete ({reason}); what it wrote is followed by "
                f"DocMind's offline answer extracted from the same sources.\n\n")
    return (f"Note: the language model gave no usable answer ({reason}); this is DocMind's offline answer "
            f"extracted from the sources.\n\n")


def pending_notice(question: str, pending: Sequence[PendingIngest], evidence: bool) -> str:
    """What the reader is told while the searched KBs are still being ingested: how many documents are
    pending and what was searched; with no evidence this replaces "nothing relevant", which it is not.
    Chunks still embedding were searched by keyword only: said with their count."""
    count = sum(p.pending_documents for p in pending)
    if not count:
        return embedding_notice(question, pending, evidence)
    embedding = sum(p.embedding_chunks for p in pending)
    text = _documents_pending_notice(question, pending, evidence)
    if embedding:
        extra = embedding_notice(question, pending, evidence=True).strip()
        text = f"{text.rstrip()} {extra}" + ("\n\n" if evidence else "")
    return text


def embedding_notice(question: str, pending: Sequence[PendingIngest], evidence: bool) -> str:
    """Chunks of the searched KBs whose vectors are still being written: found by keyword search only."""
    chunks = sum(p.embedding_chunks for p in pending)
    names = ", ".join(f"'{p.kb_name}'" if p.kb_name else f"#{p.kb_id}" for p in pending)
    if detect_language(question) == "zh":
        if evidence:
            return f"注意：知识库 {names} 中还有 {chunks} 个片段仍在向量化，它们目前只能被关键词检索到。\n\n"
        return (f"知识库 {names} 中还有 {chunks} 个片段仍在向量化，目前只能被关键词检索到；按关键词和已有向量检索，"
                f"暂未找到答案。这不是最终回答：请在向量化完成后再问一次。")
    if evidence:
        return (f"Note: {chunks} chunk(s) in {names} are still embedding: they were searched by keyword only, "
                f"so a passage that matches in meaning but not in words may be missing below.\n\n")
    return (f"{chunks} chunk(s) in {names} are still embedding, so they were searched by keyword only. DocMind "
            f"found nothing on this question by keyword or in the vectors written so far, but a search by meaning "
            f"may find it once they are embedded. This is not a final answer; ask again once the ingest has "
            f"finished.")


def _documents_pending_notice(question: str, pending: Sequence[PendingIngest], evidence: bool) -> str:
    count = sum(p.pending_documents for p in pending)
    searched = sum(p.searched_documents for p in pending)
    names = ", ".join(f"'{p.kb_name}'" if p.kb_name else f"#{p.kb_id}" for p in pending)
    if detect_language(question) == "zh":
        if evidence:
            return (f"注意：知识库 {names} 仍在导入中，还有 {count} 个文档尚未导入、没有被检索；"
                    f"以下回答只依据其中已导入的 {searched} 个文档。\n\n")
        return (f"知识库 {names} 仍在导入中：还有 {count} 个文档尚未导入，没有被检索。"
                f"已检索其中已导入的 {searched} 个文档，暂未在其中找到答案，"
                f"但尚未导入的文档可能包含答案。这不是最终回答：请在导入完成后再问一次。")
    one = len(pending) == 1
    if evidence:
        return (f"Note: {names} {'is' if one else 'are'} still being ingested: {count} document(s) pending were "
                f"not searched; the answer below uses only the {searched} document(s) indexed there so far.\n\n")
    return (f"The knowledge base{'' if one else 's'} {names} {'is' if one else 'are'} still being ingested: "
            f"{count} document(s) pending were not searched yet. DocMind searched the {searched} document(s) "
            f"already indexed there and found nothing on this question among them, but the pending documents may "
            f"cover it. This is not a final answer; ask again once the ingest has finished.")


@dataclass
class WrittenAnswer:
    text: str
    cancelled: bool = False
    duration_ms: float = 0.0
    offline: bool = False  # the offline engine wrote it (the configured model failed or is the offline engine)
    notices: list[AppNotice] = field(default_factory=list)  # DocMind's notes on it, streamed as Notice events
    app_written: bool = False  # the whole reply is DocMind's own note (nothing was found): nothing to grade


def _notice(code: NoticeCode, text: str, notices: list[AppNotice]) -> Notice:
    """The Notice event for one of DocMind's notes, kept in ``notices`` for the done event."""
    event = Notice(code=code, text=text.strip())
    notices.append(event.notice)
    return event


class AnswerWriter:
    """Streams one answer as Token events and returns it whole."""

    def __init__(self, llm: LanguageModel, fallback_llm: LanguageModel, prompts: PromptLibrary):
        self.llm = llm
        self.fallback_llm = fallback_llm  # the offline engine: answers when the configured model fails
        self.prompts = prompts

    def write(self, template: str, question: str, sources: Sequence[RetrievedChunk], history: Sequence[Turn],
              memories: Sequence[str], incomplete: Sequence[str], run: RunContext,
              pending: Sequence[PendingIngest] = ()) -> Generator[Event, None, WrittenAnswer]:
        """The answer, streamed under the run's cancel flag, deadline and meter (``run``)."""
        meter, cancel, guard = run.meter, run.cancel, run.guard
        if pending and template == "fallback":
            # nothing found in what is indexed, while documents are still arriving: never "nothing relevant"
            yield AnswerStarted(prompt="ingest_pending", sources=[], memories=list(memories))
            text = pending_notice(question, pending, evidence=False)
            if incomplete:
                text += "\n\n" + incomplete_notice(question, incomplete, evidence=False)
            yield Token(text=text)
            return WrittenAnswer(text, app_written=True)
        if incomplete and template == "fallback":
            # nothing was found, but not everything was searched: say that, and only that
            yield AnswerStarted(prompt="retrieval_incomplete", sources=[], memories=list(memories))
            text = incomplete_notice(question, incomplete, evidence=False)
            yield Token(text=text)
            return WrittenAnswer(text, app_written=True)
        prompt = build_answer_prompt(template, question, sources, history, memories, self.prompts,
                                     compact=run.settings.rag.compact_prompts)
        yield AnswerStarted(prompt=template, sources=list(sources), memories=list(memories))
        started = time.perf_counter()
        pieces: list[str] = []
        notices: list[AppNotice] = []
        cancelled = False
        if incomplete:  # partial evidence: the reader learns it before the answer
            yield _notice("retrieval_incomplete", incomplete_notice(question, incomplete, evidence=True), notices)
        if pending and template in ANSWER_TEMPLATES:  # documents still arriving: said before the answer
            yield _notice("ingest_pending", pending_notice(question, pending, evidence=True), notices)
        llm = bind_model(self.llm, guard)
        fell_back = self.llm is self.fallback_llm
        if self.llm is not self.fallback_llm and guard is not None and not guard.usable(LLM):
            yield Fallback(stage="generation", reason=f"the language model is not called again in this run: "
                                                      f"{guard.breaker.reason(LLM)}", to=self.fallback_llm.name)
            llm = self.fallback_llm
            fell_back = True
            yield _notice("model_fallback", fallback_notice(question, "it did not answer in time earlier in this run",
                                                            partial=False), notices)
        streamed: list[str] = []  # what the model itself wrote
        try:
            for piece in llm.stream_answer(prompt, meter, cancel):
                if cancel.is_set():
                    cancelled = True
                    break
                streamed.append(piece)
                pieces.append(piece)
                yield Token(text=piece)
            if not cancelled and not cancel.is_set() and not "".join(streamed).strip() \
                    and llm is not self.fallback_llm:
                raise EmptyReply(f"{getattr(llm, 'name', 'the language model')} (answer): no answer text")
        except Exception as exc:
            if llm is self.fallback_llm:
                raise
            reason = failed_answer_reason(exc)
            yield ErrorRaised(stage="generation", message=f"{type(exc).__name__}: {exc}")
            yield Fallback(stage="generation", reason=f"the language model's answer was not used: {reason}",
                           to=self.fallback_llm.name)
            partial = bool("".join(streamed).strip())
            # keep what streamed and say why the offline answer follows it
            yield _notice("model_fallback", fallback_notice(question, reason, partial), notices)
            if partial:
                pieces.append("\n\n")
                yield Token(text="\n\n")
            fell_back = True
            for piece in self.fallback_llm.stream_answer(prompt, meter, cancel):
                pieces.append(piece)
                yield Token(text=piece)
        return WrittenAnswer("".join(pieces), cancelled, elapsed_ms(started), offline=fell_back, notices=notices)

    def offline_reading(self, template: str, question: str, sources: Sequence[RetrievedChunk],
                        history: Sequence[Turn], memories: Sequence[str], run: RunContext) -> str:
        """The offline engine's answer to the same prompt, not streamed: a second opinion the pipeline may show
        instead of the model's answer (answer_check.py)."""
        prompt = build_answer_prompt(template, question, sources, history, memories, self.prompts)
        return "".join(self.fallback_llm.stream_answer(prompt, run.meter, run.cancel))

    def write_after_failure(self, question: str, sources: Sequence[RetrievedChunk], memories: Sequence[str],
                            reasons: Sequence[str], run: RunContext) -> Generator[Event, None, str]:
        """After a failure before the answer: the offline engine answers from whatever evidence there is;
        with none, the reader is told retrieval was incomplete (never "nothing relevant")."""
        meter, cancel = run.meter, run.cancel
        try:
            if not sources:
                yield AnswerStarted(prompt="retrieval_incomplete", sources=[])
                text = incomplete_notice(question, reasons, evidence=False)
                yield Token(text=text)
                return text
            prompt = build_answer_prompt("low_confidence", question, sources, [], memories, self.prompts)
            yield AnswerStarted(prompt=prompt.template, sources=list(sources))
            pieces = []
            for piece in self.fallback_llm.stream_answer(prompt, meter, cancel):
                pieces.append(piece)
                yield Token(text=piece)
            return "".join(pieces)
        except Exception as exc:  # even the fallback failed: say so plainly
            message = f"Sorry, DocMind could not answer this question ({type(exc).__name__}: {exc})."
            yield Token(text=message)
            return message
