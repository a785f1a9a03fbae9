"""The offline tool policy's later-round queries are well-formed: an entity plus the attribute still missing.

A later-round query (round 2 onwards) is a FRAGMENT when any of these holds (``fragment_reason``):

1. it has fewer than 2 content words (keyword tokens that are neither stop words nor question words such as
   意思, 哪里, 多久, how, much);
2. the question names an entity and the query holds no entity word: none of the question's entities (codes,
   capitalised names, quoted or 《》 titles, Chinese proper nouns) and none of the evidence's (document titles,
   capitalised names inside sentences, Chinese proper nouns), units and currencies (USD, GB, W ...) not
   counting as entities;
3. it is a bare attribute: no content word is an entity word (same as 2 for questions with an entity);
4. it is a bare entity: no content word is an attribute, i.e. a word of the question that is not one of the
   question's own entities (what the question asks about its subject).

The demo questions run through the real engine on the demo KB (forced AGENTIC); a sample of the shared
HotpotQA and CMRC 2018 questions (skipped when ../shared/eval is absent) drives the policy directly with
evidence from each question's own candidate paragraphs.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

import pytest

from docmind_core.backends.offline.tool_policy import OfflineToolPolicy
from docmind_core.text.query_signals import exact_terms
from docmind_core.backends.protocols import AgentTranscript, Observation
from docmind_core.values import RetrievedChunk
from docmind_core.text.tokens import ENGLISH_STOP_WORDS, keyword_tokens
from docmind_core.answer.tools import loop_tool_specs
from tests.demo_world import DEMO, open_demo_engine
from tests.paths import ROOT

SHARED = ROOT.parent / "shared" / "eval"
QUESTION_WORDS = frozenset(
    "什么 意思 哪里 哪儿 多少 多久 怎么 怎么办 怎样 如何 为什么 是否 哪个 哪些 谁 几 吗 呢 应该 是 有 的 了 报 "
    "what which who whom whose where when why how much many does did do is are was were mean means".split())
UNITS = frozenset("usd eur rmb cny gb tb mb kb w kw v mhz ghz ms".split())
MIN_CONTENT_WORDS = 2
_CAPS_RE = re.compile(r"(?:[A-Z][A-Za-z0-9_'’&.-]*|[A-Za-z]*\d[A-Za-z0-9_.-]*)"
                      r"(?:[ \t]+(?:[A-Z][A-Za-z0-9_'’&.-]*|[A-Za-z]*\d[A-Za-z0-9_.-]*))*")
_TITLE_RE = re.compile(r"[《\"“「]([^》\"”」]{1,40})[》\"”」]")


def demo_questions() -> list[str]:
    table = [line.split("|")[4].strip() for line in (DEMO / "QUESTIONS.md").read_text("utf-8").splitlines()
             if line.startswith("| q")]
    labelled = [json.loads(line)["question"] for line in
                (ROOT / "data" / "demo_labelled.jsonl").read_text("utf-8").splitlines() if line.strip()]
    return list(dict.fromkeys([*table, *labelled]))


def _tokens(text: str) -> set[str]:
    return {t.lower() for t in keyword_tokens(text, stem=False)}


def _content(text: str) -> list[str]:
    return [t for t in dict.fromkeys(t.lower() for t in keyword_tokens(text, stem=False))
            if t not in ENGLISH_STOP_WORDS and t not in QUESTION_WORDS]


@lru_cache(maxsize=4096)
def _chinese_names(text: str) -> frozenset[str]:
    import jieba.posseg as pseg

    return frozenset(p.word.lower() for p in pseg.cut(text[:2000])
                     if p.flag in ("nr", "ns", "nt", "nz") and len(p.word) >= 2)


def _names(text: str, inside_sentences: bool) -> set[str]:
    """Entity words of ``text``: codes, quoted/《》 titles, capitalised runs, Chinese proper nouns."""
    words: set[str] = set()
    for code in exact_terms(text):
        words |= _tokens(code)
    for title in _TITLE_RE.findall(text):
        words |= _tokens(title)
    for sentence in re.split(r"(?<=[.!?。！？])\s*|\n", text):
        for match in _CAPS_RE.finditer(sentence):
            run = match.group(0)
            if inside_sentences and match.start() == 0 and " " not in run:
                continue  # one capitalised word opening a sentence is just how sentences start
            words |= {t for t in _tokens(run) if t not in QUESTION_WORDS}
    if re.search(r"[\u4e00-\u9fff]", text):
        words |= set(_chinese_names(text))
    return {w for w in words if w not in ENGLISH_STOP_WORDS and w not in UNITS}


def fragment_reason(query: str, question: str, evidence: list[RetrievedChunk]) -> str:
    """Why ``query`` is a fragment (see the module docstring), or "" when it is well-formed."""
    content = _content(query)
    if len(content) < MIN_CONTENT_WORDS:
        return f"fewer than {MIN_CONTENT_WORDS} content words"
    own = _names(question, inside_sentences=False)
    found = set().union(*(_names(f"{c.document}\n{c.text}", inside_sentences=True) for c in evidence)) \
        if evidence else set()
    for chunk in evidence:  # a document's title is an entity of the evidence
        found |= _tokens(re.sub(r"\.\w{1,5}$", "", chunk.document))
    entity_words = (own | found) - UNITS
    named = [t for t in content if t in entity_words]
    if own and not named:
        return "no entity from the question or the evidence"
    if not named:
        return "a bare attribute: no entity"
    asked = _tokens(question)
    own_text = " ".join(own)
    attribute = [t for t in content if t in asked and t not in own and not (re.match(r"[\u4e00-\u9fff]", t)
                                                                            and t in own_text)]
    if not attribute:
        return "a bare entity: no attribute from the question"
    return ""


def test_the_fragment_definition_rejects_what_the_issue_saw_and_keeps_good_queries():
    evidence = [RetrievedChunk(chunk_id="c1", document="release_notes.md",
                               text="New version 3.2.0 lets the Nimbus N2 join an Aurora tenant. Fixed: fan noise. "
                                    "The plan is called Aurora Cloud Business in the price list.")]
    q13 = "Which firmware version first let the N2 join an Aurora tenant, and what known issue did it have?"
    assert fragment_reason("New version", q13, evidence)
    assert fragment_reason("许可证 意思", "错误代码 AUR-4012 是什么意思？怎么处理？", [])
    assert fragment_reason("USD", "What is the maximum power draw of the Nimbus N2?", evidence)
    assert fragment_reason("Aurora Cloud Business", "What uptime does Aurora Cloud guarantee?", evidence)
    assert fragment_reason("许可证 意思", "错误代码 AUR-4012 是什么意思？怎么处理？", []) == \
        "fewer than 2 content words"
    assert fragment_reason("Aurora Cloud Business", "What uptime does Aurora Cloud guarantee?", evidence) == \
        "a bare entity: no attribute from the question"
    assert fragment_reason("flashing red light mean", "What does a flashing red light on a Nimbus appliance mean?",
                           evidence) == "no entity from the question or the evidence"
    assert fragment_reason("Nimbus N2 3.2.0 known issue", q13, evidence) == ""
    assert fragment_reason("AUR-4012 许可证 处理", "错误代码 AUR-4012 是什么意思？怎么处理？", []) == ""


# --------------------------------------------------------------------------
# The demo questions, through the real engine on the demo KB
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo_engine(tmp_path_factory):
    return open_demo_engine(tmp_path_factory.mktemp("agentic-queries"))


@pytest.mark.slow
def test_later_round_queries_on_the_demo_questions_are_never_fragments(demo_engine):
    from docmind_core.events import AgenticStep

    engine, kb_id = demo_engine
    corpus = [RetrievedChunk(chunk_id=str(i), document=d.name, text=engine.store.document_text(d.id))
              for i, d in enumerate(engine.store.list_documents(kb_id))]
    bad, later = [], 0
    for question in demo_questions():
        for event in engine.ask(question, [kb_id], mode="agentic"):
            if isinstance(event, AgenticStep) and event.iteration > 1:
                for call in event.tool_calls:
                    later += 1
                    query = str(call.args.get("query", ""))
                    reason = fragment_reason(query, question, corpus)
                    if reason:
                        bad.append((question, call.name, query, reason))
    assert not bad, "\n".join(map(repr, bad))
    assert later >= 3  # the loop does hop and reformulate on the demo set, so the check is not vacuous


# --------------------------------------------------------------------------
# A sample of the shared HotpotQA and CMRC 2018 questions, driving the policy directly
# --------------------------------------------------------------------------


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def _pool(dataset: str, limit: int) -> list[tuple[str, list[RetrievedChunk]]]:
    folder = SHARED / dataset
    if not (folder / "queries.jsonl").exists():
        pytest.skip(f"{folder} is absent (the shared evaluation sets are not on this machine)")
    corpus = {d["id"]: d for d in _read_jsonl(folder / "corpus.jsonl")}
    pairs = folder / ("distractor_candidates.tsv" if (folder / "distractor_candidates.tsv").exists() else "qrels.tsv")
    candidates: dict[str, list[str]] = {}
    for line in pairs.read_text("utf-8").splitlines()[1:]:
        qid, doc_id = line.split("\t")[:2]
        candidates.setdefault(qid, []).append(doc_id)
    ids = list(corpus)
    out = []
    for n, query in enumerate(_read_jsonl(folder / "queries.jsonl")[:limit]):
        docs = candidates.get(query["id"], [])
        docs = docs + [ids[(n * 7 + k) % len(ids)] for k in range(3)]  # a few unrelated paragraphs too
        chunks = [RetrievedChunk(chunk_id=d, document=corpus[d].get("title", "") or d, text=corpus[d]["text"])
                  for d in dict.fromkeys(docs) if d in corpus]
        out.append((query["text"], chunks))
    return out


def _search(query: str, pool: list[RetrievedChunk], top_k: int = 4) -> list[RetrievedChunk]:
    """A plain term-overlap search over the question's own paragraphs (stands in for the KB)."""
    terms = _tokens(query)
    scored = [(len(terms & _tokens(f"{c.document} {c.text}")), -i, c) for i, c in enumerate(pool)]
    return [c for s, _, c in sorted(scored, key=lambda x: (x[0], x[1]), reverse=True) if s > 0][:top_k]


def _later_queries(question: str, pool: list[RetrievedChunk], rounds: int = 3) -> list[tuple[str, str]]:
    policy, tools = OfflineToolPolicy(), loop_tool_specs(False)
    transcript = AgentTranscript(question=question, rewritten_query=question, kb_brief="", messages=[])
    seen: set[str] = set()
    asked: list[tuple[str, str]] = []
    for round_no in range(rounds):
        turn = policy.next_turn(transcript, tools)
        if not turn.tool_calls:
            break
        observations = []
        for call in turn.tool_calls:
            query = str(call.arguments.get("query", ""))
            if round_no > 0:
                asked.append((call.name, query))
            hits = _search(query, pool)
            observations.append(Observation(call=call, text="", chunks=hits,
                                            new_chunk_ids=[c.chunk_id for c in hits if c.chunk_id not in seen]))
            seen |= {c.chunk_id for c in hits}
        transcript.rounds.append(observations)
    return asked


@pytest.mark.parametrize("dataset, limit", [("hotpotqa", 80), ("cmrc2018", 60)])
@pytest.mark.slow  # reads the shared evaluation sets and runs 140 offline agentic loops
def test_later_round_queries_on_shared_questions_are_never_fragments(dataset, limit):
    bad, later = [], 0
    for question, pool in _pool(dataset, limit):
        for name, query in _later_queries(question, pool):
            later += 1
            reason = fragment_reason(query, question, pool)
            if reason:
                bad.append((question, name, query, reason))
    assert later >= 5, f"only {later} later-round queries: the sample does not exercise the later rounds"
    assert not bad, f"{len(bad)} of {later} later-round queries are fragments:\n" + "\n".join(map(repr, bad[:25]))
