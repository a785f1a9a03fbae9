"""Routing and evidence regression bench (issue 41): does each kind of question take the path its words ask for,
and does the evidence it gathers grade as it should?  A fit split and a report split, offline, one table.

    python bench/routing.py [EVAL_DIR] [--split fit|report|both] [--limit N] [--cache DIR] [--code DIR]
                            [--dump RUNS.jsonl]

EVAL_DIR is the shared eval folder (default ``$DOCMIND_EVAL_DIR``); without it only the routing rows run.
``--code DIR`` imports ``docmind_core`` from another checkout (``git worktree add DIR 4dffb78``, or a
``git archive`` of it) to measure the code before a change with this same bench.

The sets:

* **time-aware** and **comparison** questions: ``data/routing_questions.jsonl``, our own writing (English and
  Chinese; dates explicit or relative; two or three entities).  Routing only, no corpus: each question goes
  through the offline understanding and ``route_with_plan`` as ``docmind ask`` runs them, and for an AGENTIC
  route through the first round of the offline tool policy with web search offered (as if a web backend were
  configured).  *web planned*: the RULE_PLANNER plan or the loop's first round holds web search.
* **multi-hop**: HotpotQA *bridge* questions (the first 250 of the shared 500), positions 1-250 alternating
  (odd positions fit, even report, as ``bench/grader_tiers.py`` splits them).  The index is the pool of the
  distractor paragraphs of the questions run (both splits), so a second-hop paragraph competes with the other
  questions' paragraphs.  *both gold*: both supporting paragraphs are among the answer's sources.
* **colloquial / precise**: CMRC 2018 questions that ask for a number (an answer with a digit, a question with
  多少 / 几 / 哪一年 ...), split by gold passage (DEV_n: n even fit, n odd report; the reranker calibration's
  questions 2920-3219 left out, as in ``bench/grader_tiers.py``).  *precise*: the question as written.
  *colloquial*: the same question rewritten by fixed rules the way a user types it (a filler in front,
  "是多少" -> "是多少来着" / "大概是多少", "价格是多少" -> "大概多少钱"; :func:`colloquial`), so both phrasings
  ask for the same fact in the same passage.  The index: the passages from DEV_0 to 40 past the last gold
  passage of the questions run (the neighbouring articles are the closest distractors; the whole corpus would
  take long to embed on a small machine).
* **unanswerable**: each colloquial and precise question asked again with its gold passage excluded from
  retrieval (leave-gold-out, ``exclude_doc_ids``): the strongest distractors the corpus holds.  A question
  whose gold answer string another indexed passage also holds is not asked so: CMRC has overlapping articles,
  and such a run is answerable.

Every evidence question runs through the whole offline pipeline (``AnswerPipeline.ask``, mode auto, the
offline engine, no web backend), over the product's stores, reranker and grader (``eval/retrieval_eval``'s
throw-away index; embeddings cached in ``--cache``).  The tier is the run's final grade; *gold in context*:
the gold passage is among the sources the answer was written from; *answer holds gold*: a gold answer string
is in the answer text.

``--limit N``: at most N questions per kind per split (default 20).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ROOT / "data" / "routing_questions.jsonl"
HOTPOT_BRIDGES = 250  # the shared HotpotQA file holds 250 bridge questions, then 250 comparisons
CMRC_CALIBRATION_FROM = 2919  # questions 2920-3219 fitted the reranker calibration
CMRC_MARGIN = 40  # passages indexed past the last gold passage of the questions run
_NUMBER_ASK = re.compile(r"多少|几|哪一年|哪年|何时|什么时候|多大|多高|多长|多重|多久")
_PRICE_ASK = re.compile(r"(?:价格|售价|票价|价钱|造价|费用|成本)(?:为|是)?多少(?:钱|元)?")
_MARKER = re.compile(r"\[\d+(?:\s*[,，]\s*\d+)*\]")


# --------------------------------------------------------------------------
# Routing probe (no corpus): what the offline engine decides for a question
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class RouteProbe:
    mode: str  # RULE_PLANNER / AGENTIC / SELECTED_DOC
    reason: str
    tools: tuple[str, ...]  # the RULE_PLANNER plan, or the agentic loop's first-round calls
    explanation: str

    @property
    def web_planned(self) -> bool:
        return "web_search" in self.tools or "webSearch" in self.tools


class _LiveWeb:
    """A web backend that is configured and answers nothing: the loop is offered web search, as with Tavily."""

    name = "bench-web"

    def search(self, query, max_results):
        from docmind_core.backends.protocols import WebSearchResult
        return WebSearchResult(available=True, chunks=[], message="")

    def status(self):
        from docmind_core.values import BackendStatus
        return BackendStatus(role="web_search", name=self.name, live=True, detail="bench stand-in")


def probe_route(question: str, settings=None) -> RouteProbe:
    """The offline understanding, the route and its first retrieval step, as ``docmind ask`` makes them."""
    from docmind_core.answer.route import route_with_plan
    from docmind_core.answer.run_context import RunContext
    from docmind_core.answer.tools import ToolContext, Toolbox
    from docmind_core.answer.understand import QueryUnderstanding
    from docmind_core.backends.offline.chat import OfflineLanguageModel
    from docmind_core.backends.protocols import AgentTranscript
    from docmind_core.prompts import PromptLibrary
    from docmind_core.settings import Settings
    from docmind_core.values import Mode

    settings = settings or Settings()
    prompts = PromptLibrary()
    run = RunContext.start(settings)
    understanding, _via = QueryUnderstanding(OfflineLanguageModel(prompts), prompts).run(question, [], "", run)
    decision, plan = route_with_plan(question, understanding, [], "auto", settings)
    if decision.mode is Mode.AGENTIC:
        offered, _withheld = Toolbox(retriever=None, web=_LiveWeb()).offered_specs(ToolContext(run))
        transcript = AgentTranscript(question=question, rewritten_query=understanding.rewritten_query or question,
                                     kb_brief="", messages=[])
        turn = OfflineLanguageModel(prompts).agent_turn(transcript, offered, run.meter, 1.0)
        tools = tuple(dict.fromkeys(c.name for c in turn.tool_calls))
    else:
        tools = tuple(plan.tools) if plan else ()
    return RouteProbe(decision.mode.value, decision.reason, tools, decision.explanation)


def load_questions(path: Path = QUESTIONS) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# --------------------------------------------------------------------------
# Colloquial phrasing of a precise question (fixed rules, so the set is rebuilt the same way every time)
# --------------------------------------------------------------------------

_FILLERS = ("那个", "哎，", "嗯，我想问下，", "请问一下，那个", "诶，")


def _pick(key: str, n: int) -> int:
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % n


def colloquial(question: str, key: str) -> str:
    """The question as a user types it: a filler in front, a vaguer or forgetful ask ("是多少来着", "大概多少",
    "大概几"), a price asked as "大概多少钱"."""
    text = question.strip().rstrip("？?。.!！ ")
    vague = _pick(key + "tail", 2) == 0
    if _PRICE_ASK.search(text):
        text = _PRICE_ASK.sub("大概多少钱", text, count=1)
    elif text.endswith("多少"):
        text = text[:-2] + ("大概多少" if vague and not text.endswith("大概多少") else "多少来着")
    elif "多少" in text:
        text = text.replace("多少", "大概多少", 1) if vague else text + "来着"
    elif re.search(r"(?<=[有了披设共第])几", text) and vague:
        text = re.sub(r"(?<=[有了披设共第])几", "大概几", text, count=1)
    else:
        text += "来着"
    return _FILLERS[_pick(key, len(_FILLERS))] + text + "？"


# --------------------------------------------------------------------------
# The evidence sets, built from the shared eval folder (never copied into the repository)
# --------------------------------------------------------------------------

@dataclass
class EvidenceQuestion:
    kind: str  # multi_hop / colloquial / precise
    split: str
    qid: str
    text: str
    gold: tuple[str, ...]  # gold passage ids (BEIR)
    answers: tuple[str, ...]
    exclude_gold: bool = False  # unanswerable run: the gold passages left out of retrieval


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _qrels(path: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        parts = line.split("\t")
        if n == 0 or len(parts) < 3 or parts[2].strip() == "0":
            continue
        out.setdefault(parts[0], []).append(parts[1])
    return out


def multi_hop_set(eval_dir: Path, splits: set[str], limit: int) -> tuple[list[EvidenceQuestion], set[str]]:
    """HotpotQA bridge questions of ``splits`` and the pool of the distractor paragraphs of both splits' (one
    index whichever split is run)."""
    folder = eval_dir / "hotpotqa"
    qrels = _qrels(folder / "qrels.tsv")
    candidates: dict[str, list[str]] = {}
    for line in (folder / "distractor_candidates.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        qid, doc = line.split("\t")[:2]
        candidates.setdefault(qid, []).append(doc)
    taken: dict[str, int] = {}
    questions: list[EvidenceQuestion] = []
    for position, row in enumerate(_jsonl(folder / "queries.jsonl")[:HOTPOT_BRIDGES], start=1):
        split = "fit" if position % 2 else "report"
        if row.get("type") != "bridge" or taken.get(split, 0) >= limit:
            continue
        taken[split] = taken.get(split, 0) + 1
        questions.append(EvidenceQuestion("multi_hop", split, row["id"], row["text"], tuple(qrels[row["id"]]),
                                          tuple(row.get("answers") or ())))
    pool = {d for q in questions for d in (*candidates.get(q.qid, []), *q.gold)}
    return [q for q in questions if q.split in splits], pool


def value_questions(eval_dir: Path, splits: set[str], limit: int) -> tuple[list[EvidenceQuestion], set[str]]:
    """CMRC 2018 questions asking for a number, each as written and in its colloquial phrasing, each also
    asked with its gold passage left out unless another passage states its answer; and the passages indexed
    for them: every passage up to ``CMRC_MARGIN`` past the last gold one of both splits (the neighbouring
    articles are the strongest distractors; one index whichever split is run)."""
    folder = eval_dir / "cmrc2018"
    qrels = _qrels(folder / "qrels.tsv")
    taken: dict[str, int] = {}
    out: list[EvidenceQuestion] = []
    for n, row in enumerate(_jsonl(folder / "queries.jsonl")):
        if n >= CMRC_CALIBRATION_FROM:
            break
        gold = qrels.get(row["id"], [])
        answers = tuple(row.get("answers") or ())
        if len(gold) != 1 or not _NUMBER_ASK.search(row["text"]) or not any(re.search(r"\d", a) for a in answers):
            continue
        passage = int(re.sub(r"\D", "", gold[0]) or 0)
        split = "fit" if passage % 2 == 0 else "report"
        if taken.get(split, 0) >= limit:
            continue
        taken[split] = taken.get(split, 0) + 1
        for kind, text in (("precise", row["text"]), ("colloquial", colloquial(row["text"], row["id"]))):
            for unanswerable in (False, True):
                out.append(EvidenceQuestion(kind, split, row["id"], text, tuple(gold), answers, unanswerable))
    last = max((int(re.sub(r"\D", "", q.gold[0]) or 0) for q in out), default=0)
    pool = {f"DEV_{n}" for n in range(last + CMRC_MARGIN + 1)}
    # leaving the gold passage out makes a question unanswerable only if no other passage states its answer
    # (CMRC holds overlapping articles: "龙烟铁路项目工程投资总额约为28亿元" is in two of them)
    texts = {row["id"]: row["text"] for row in _jsonl(folder / "corpus.jsonl") if row["id"] in pool}
    answered_elsewhere = {q.qid for q in out if any(a and a in text for a in q.answers
                                                    for pid, text in texts.items() if pid not in q.gold)}
    return [q for q in out if q.split in splits and not (q.exclude_gold and q.qid in answered_elsewhere)], pool


def _normalised(text: str) -> str:
    import unicodedata
    return re.sub(r"[\W_]+", " ", unicodedata.normalize("NFKC", text).lower()).strip()


def holds_answer(answer: str, answers) -> bool:
    reply = _normalised(_MARKER.sub(" ", answer))
    return any(_normalised(a) and _normalised(a) in reply for a in answers)


# --------------------------------------------------------------------------
# Running the pipeline over a throw-away index
# --------------------------------------------------------------------------

@dataclass
class EvidenceRun:
    question: EvidenceQuestion
    mode: str
    tier: str
    gold_found: int
    holds_answer: bool
    reason: str = ""
    tools: list[str] = field(default_factory=list)


def _subset(dataset, doc_ids: set[str] | None, extra_queries: list[EvidenceQuestion]):
    from docmind_core.eval.beir import BeirDataset, BeirQuery

    corpus = dataset.corpus if doc_ids is None else {k: v for k, v in dataset.corpus.items() if k in doc_ids}
    digest = hashlib.sha256((dataset.corpus_sha256 + ",".join(sorted(corpus))).encode()).hexdigest()
    texts = list(dict.fromkeys(q.text for q in extra_queries))
    queries = [BeirQuery(f"q{i}", t) for i, t in enumerate(texts)]
    return BeirDataset(dataset.name, corpus, queries, dataset.qrels, digest)


def run_evidence(eval_dir: Path, name: str, questions: list[EvidenceQuestion], doc_ids: set[str] | None,
                 cache: Path, say) -> list[EvidenceRun]:
    from docmind_core.answer.agentic import AgenticPath
    from docmind_core.answer.grade import CragGrader
    from docmind_core.answer.pipeline import AnswerPipeline, AskRequest
    from docmind_core.answer.rule_planner import RulePlannerPath
    from docmind_core.answer.tools import Toolbox
    from docmind_core.backends.embedders import Usem3Embedder
    from docmind_core.backends.offline.chat import OfflineLanguageModel
    from docmind_core.backends.web_search import UnavailableWebSearch
    from docmind_core.eval.beir import EmbeddingCache, load_beir
    from docmind_core.eval.retrieval_eval import build_index
    from docmind_core.events import AgenticStep, Done, Routed
    from docmind_core.prompts import PromptLibrary
    from docmind_core.settings import Settings

    settings = Settings()
    dataset = _subset(load_beir(eval_dir / name), doc_ids, questions)
    runs: list[EvidenceRun] = []
    with tempfile.TemporaryDirectory(prefix="docmind-routing-bench-") as tmp:
        embedder = Usem3Embedder()
        index = build_index(dataset, Path(tmp), embedder, settings, EmbeddingCache(cache), say)
        ours = {beir: doc for doc, beir in index.beir_of_doc.items()}
        retriever = index.retriever
        prompts = PromptLibrary()
        grader = CragGrader()
        llm = OfflineLanguageModel(prompts, encoder=embedder)
        toolbox = Toolbox(retriever, web=UnavailableWebSearch(), store=retriever.store)
        rule_planner = RulePlannerPath(toolbox, retriever.refiner, grader)
        agentic = AgenticPath(llm, toolbox, retriever.refiner, grader, prompts, rule_planner)
        pipeline = AnswerPipeline(llm=llm, fallback_llm=llm, prompts=prompts, store=retriever.store,
                                  reranker=index.reranker, rule_planner=rule_planner, agentic=agentic,
                                  grader=grader, memory=None)
        started = time.perf_counter()
        for n, q in enumerate(questions, 1):
            exclude = [ours[g] for g in q.gold if g in ours] if q.exclude_gold else []
            request = AskRequest(question=q.text, kb_ids=[index.kb_id], exclude_doc_ids=exclude)
            done, mode, tools = None, "", []
            for event in pipeline.ask(request, settings, []):
                if isinstance(event, Routed):
                    mode = event.decision.mode.value
                    tools += list(event.plan.tools) if event.plan else []
                elif isinstance(event, AgenticStep):
                    tools += [c.name for c in event.tool_calls]
                elif isinstance(event, Done):
                    done = event
            found = {index.beir_of_doc.get(c.doc_id, "") for c in done.sources if c.doc_id is not None}
            tier = done.grade.tier.value if done.grade else "-"
            runs.append(EvidenceRun(q, mode, tier, len(set(q.gold) & found), holds_answer(done.answer, q.answers),
                                    done.grade.reason if done.grade else "", tools))
            if n % 10 == 0:
                say(f"{name}: {n}/{len(questions)} ({time.perf_counter() - started:.0f} s)")
    return runs


# --------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------

def _ratio(hits: int, n: int) -> str:
    return f"{hits}/{n} = {hits / n:.2f}" if n else "-"


def routing_rows(split: str) -> list[tuple[str, str, str, str]]:
    rows = [q for q in load_questions() if q["split"] == split]
    time_aware = [probe_route(q["text"]) for q in rows if q["kind"] == "time_aware"]
    compared = [probe_route(q["text"]) for q in rows if q["kind"] == "comparison"]
    return [
        ("time-aware (en + zh, dates explicit or relative)", "web search planned",
         _ratio(sum(p.web_planned for p in time_aware), len(time_aware)), ">= 0.9"),
        ("comparison of 2-3 entities (en + zh)", "routed AGENTIC",
         _ratio(sum(p.mode == "AGENTIC" for p in compared), len(compared)), ">= 0.9"),
    ]


def evidence_rows(runs: list[EvidenceRun]) -> list[tuple[str, str, str, str]]:
    def pick(kind: str, unanswerable: bool = False) -> list[EvidenceRun]:
        return [r for r in runs if r.question.kind == kind and r.question.exclude_gold == unanswerable]

    hops = pick("multi_hop")
    rows = [("multi-hop (en, HotpotQA bridge)", "both gold passages in context",
             _ratio(sum(r.gold_found == len(r.question.gold) for r in hops), len(hops)), ">= 0.9"),
            ("multi-hop (en, HotpotQA bridge)", "routed AGENTIC",
             _ratio(sum(r.mode == "AGENTIC" for r in hops), len(hops)), "")]
    for kind, target in (("colloquial", ">= 0.7"), ("precise", "")):
        answered = pick(kind)
        with_gold = [r for r in answered if r.gold_found]
        rows.append((f"{kind} Chinese value question", "gold in context",
                     _ratio(len(with_gold), len(answered)), ""))
        rows.append((f"{kind} Chinese value question", "gold in context and tier HIGH",
                     _ratio(sum(r.tier == "HIGH" for r in with_gold), len(with_gold)), target))
    unanswerable = pick("colloquial", True) + pick("precise", True)
    rows.append(("unanswerable (colloquial + precise, gold left out)", "tier not HIGH",
                 _ratio(sum(r.tier != "HIGH" for r in unanswerable), len(unanswerable)), ">= 0.9"))
    answered = pick("colloquial") + pick("precise")
    rows.append(("answer text holds the gold answer (colloquial + precise)", "",
                 _ratio(sum(r.holds_answer for r in answered), len(answered)), ""))
    return rows


def print_table(split: str, rows: list[tuple[str, str, str, str]]) -> None:
    print(f"\n### split: {split}\n")
    print("| kind | measure | result | target |")
    print("|---|---|---:|---:|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("eval_dir", nargs="?", type=Path, default=os.environ.get("DOCMIND_EVAL_DIR") or None)
    ap.add_argument("--split", choices=("fit", "report", "both"), default="report")
    ap.add_argument("--limit", type=int, default=20, help="questions per kind per split")
    ap.add_argument("--cache", type=Path, default=ROOT / "data" / "cache", help="embedding cache folder")
    ap.add_argument("--code", type=Path, default=None, help="import docmind_core from this checkout instead")
    ap.add_argument("--dump", type=Path, default=None, help="write every evidence run as JSON lines")
    args = ap.parse_args()
    sys.path.insert(0, str((args.code or ROOT).resolve()))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ["ANONYMIZED_TELEMETRY"] = "False"

    def say(msg: str) -> None:
        print(f"  [{msg}]", file=sys.stderr, flush=True)

    splits = {"fit", "report"} if args.split == "both" else {args.split}
    runs: list[EvidenceRun] = []
    if args.eval_dir:
        eval_dir = Path(args.eval_dir)
        hops, pool = multi_hop_set(eval_dir, splits, args.limit)
        runs += run_evidence(eval_dir, "hotpotqa", hops, pool, args.cache, say)
        values, passages = value_questions(eval_dir, splits, args.limit)
        runs += run_evidence(eval_dir, "cmrc2018", values, passages, args.cache, say)
    else:
        say("no eval folder (EVAL_DIR or DOCMIND_EVAL_DIR): routing rows only")
    if args.dump:
        with args.dump.open("w", encoding="utf-8") as fh:
            for r in runs:
                fh.write(json.dumps({**r.question.__dict__, "mode": r.mode, "tier": r.tier, "reason": r.reason,
                                     "gold_found": r.gold_found, "holds_answer": r.holds_answer,
                                     "tools": r.tools}, ensure_ascii=False) + "\n")
    for split in sorted(splits):
        print_table(split, routing_rows(split) + evidence_rows([r for r in runs if r.question.split == split]))


if __name__ == "__main__":
    main()
