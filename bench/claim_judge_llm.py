"""The model claim judge as a ``bench/claim_support.py --judge`` hook: each benchmark claim goes through the
claim-judge path of a DocMind run against an OpenAI-compatible server.

The claim is the whole answer: ``parse_citations`` (the offline checks) -> ``claims_to_check`` (the claims
that name a source, with that source's span) -> ``ModelJudge.judge_claims`` (one call) ->
``judged_citations`` (the verdicts become the statuses; an offline "contradicted" is never cleared).  A claim
that names no source (the model cited nothing and the offline check found no supporting source) is not sent,
as in a run: its offline status stands.  A failed or malformed call leaves the offline status too, and is
counted.

The server is read from the environment (``JUDGE_DRY=1``: the same path without the call, for the baseline;
``JUDGE_CACHE=FILE``: keep each verdict, so a stopped run goes on where it stopped):

    JUDGE_BASE_URL=http://127.0.0.1:8080/v1 JUDGE_MODEL=qwen2.5-coder-1.5b-instruct \\
        python bench/claim_support.py --per-set 10 --split held_out --judge claim_judge_llm:judge
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from docmind_core.answer.judge import ModelJudge, claims_to_check, judged_citations  # noqa: E402
from docmind_core.backends.chat_openai import OpenAIChatModel  # noqa: E402
from docmind_core.backends.protocols import UsageMeter  # noqa: E402
from docmind_core.answer.citations import parse_citations  # noqa: E402
from docmind_core.values import ClaimCheck, ClaimVerdict, RetrievedChunk  # noqa: E402
from docmind_core.prompts import PromptLibrary  # noqa: E402

TIMEOUT_S = float(os.environ.get("JUDGE_TIMEOUT_S", "300"))
MAX_TOKENS = 256

calls: Counter = Counter()  # sent / failed / not_sent, printed by claim_support when it finds it


@lru_cache(maxsize=1)
def _judge() -> ModelJudge:
    base_url = os.environ.get("JUDGE_BASE_URL")
    if not base_url:
        raise SystemExit("set JUDGE_BASE_URL (and JUDGE_MODEL) to the OpenAI-compatible server to judge with")
    model = OpenAIChatModel(base_url, os.environ.get("JUDGE_API_KEY", "not-needed"),
                            os.environ.get("JUDGE_MODEL", "qwen2.5-coder-1.5b-instruct"),
                            timeout_s=TIMEOUT_S, max_retries=0)
    return ModelJudge(model, PromptLibrary())


def judge(claim: str, sources: Sequence[RetrievedChunk], cited: list[int], offline: ClaimCheck) -> ClaimCheck:
    """The claim's status after the model judge read it, as a DocMind run sets it.  With ``JUDGE_CACHE`` set
    to a file, the model's verdicts are kept there and read back in a later run (a slow server's run can stop
    and go on; a change to how verdicts become statuses is measured again without calls)."""
    citations = parse_citations(claim, list(sources))
    checked = claims_to_check(citations, list(sources))
    own = _own_claim(citations.claims, offline)
    if own is None:
        calls["no claim"] += 1
        return offline
    checked = [c for c in checked if c.position == citations.claims.index(own)]
    if not checked:
        calls["not sent (no source named)"] += 1
        return own
    if os.environ.get("JUDGE_DRY"):  # the same path without the call: the baseline the verdicts change
        calls["dry"] += 1
        return own
    key = json.dumps([claim, [c.chunk_id for c in sources], cited], ensure_ascii=False)
    if key in _kept():
        calls["verdicts from the cache"] += 1
        verdicts = [ClaimVerdict(claim=c.claim, source=c.source, status=v["status"], reason=v.get("reason", ""))
                    for c, v in zip(checked, _kept()[key])]
    else:
        try:
            verdicts = _judge().judge_claims(checked, UsageMeter(), TIMEOUT_S, MAX_TOKENS)
        except Exception as exc:  # noqa: BLE001 - counted; the offline status stands, as in a run
            calls["failed"] += 1
            calls[f"failed: {type(exc).__name__}"] += 1
            return own
        calls["sent"] += 1
        if os.environ.get("JUDGE_CACHE"):
            with open(os.environ["JUDGE_CACHE"], "a", encoding="utf-8") as fh:
                fh.write(json.dumps({"key": key, "verdicts": [v.model_dump() for v in verdicts]},
                                    ensure_ascii=False) + "\n")
    calls[f"verdict {verdicts[0].status}" if verdicts else "no verdict"] += 1
    judged = judged_citations(citations, checked, verdicts, claim, list(sources))
    return judged.claims[checked[0].position]


@lru_cache(maxsize=1)
def _kept() -> dict[str, list[dict]]:
    path = Path(os.environ.get("JUDGE_CACHE", ""))
    if not os.environ.get("JUDGE_CACHE") or not path.is_file():
        return {}
    rows = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    return {row["key"]: row["verdicts"] for row in rows if "verdicts" in row}


def _own_claim(claims: Sequence[ClaimCheck], offline: ClaimCheck) -> ClaimCheck | None:
    """The claim of the parsed answer that is the benchmark's claim: the one the offline check read (the
    answer is one claim; a splitter that finds more keeps the longest)."""
    checkable = [c for c in claims if c.status != "not_checkable"] or list(claims)
    return max(checkable, key=lambda c: len(c.text)) if checkable else None
