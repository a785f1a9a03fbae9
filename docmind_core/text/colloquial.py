"""The words a user types around a question that ask for nothing: fillers, hedges and "what was it again".

"那个广茂铁路全长大概多少来着？" asks exactly what "广茂铁路全长多少？" asks, but read word by word it also asks for
"大概", "来" and "那个", which no passage states: the grader's coverage fell for every colloquial phrasing while the
precise one was covered.  :func:`plain_question` is the question with those words taken out, for the signals
that count a question's words (the grader's coverage, the offline rewrite).  What a colloquial word *asks* stays
with the question where it matters: "多少钱" still asks for a price (``text.value_kinds`` reads the question as
written); only "钱", a word no price list uses, leaves the counted terms (:func:`asked_terms`).
"""

from __future__ import annotations

import re

from docmind_core.text.tokens import salient_terms

# Openers: a hesitation or a "may I ask" before the question ("嗯，我想问下，那个…"), as many as there are.
_ZH_OPENER = re.compile(
    r"^(?:(?:嗯|呃|哎|诶|唉|欸|喂|那个|那么|所以|你知道|我想(?:问|知道|了解)(?:一下|下)?|想(?:问|知道)(?:一下|下)?|"
    r"请问(?:一下|下)?|问(?:一下|下))[，,、\s]*)+")
# Inside the question: hedges and "what was it again"; a particle at its end.
_ZH_COLLOQUIAL = re.compile(r"来着|大概|大约|大致|约莫|差不多|到底|究竟|[啊呀吧呢嘛哦喔啦咯]+(?=[？?！!。.，,\s]*$)")
# "多少钱" asks for a price; the passage says "售价3000元", never "钱"
_PRICE_WORDS = frozenset({"钱", "块", "块钱"})
_EN_COLLOQUIAL = re.compile(
    r"\b(?:um+|uh+|erm?|hmm+|you know|i mean|kinda|sorta|roughly|approximately|more or less|or so|again|"
    r"anyway|actually|basically|exactly|just wondering|i wonder|i was wondering|any idea|do you happen to know)\b",
    re.IGNORECASE)


def plain_question(question: str) -> str:
    """``question`` without its colloquial words (fillers, hedges, "来着", "again"); unchanged when it has none,
    and never emptied: a question made only of such words stays as it was."""
    text = _ZH_COLLOQUIAL.sub("", _ZH_OPENER.sub("", question.strip()))
    text = _EN_COLLOQUIAL.sub("", text)
    text = re.sub(r"\s+(?=[?？!！.。,，])", "", re.sub(r"\s{2,}", " ", text)).strip(" ,，、")
    return text if text.strip(" ?？!！。.") else question


def asked_terms(question: str) -> dict[str, float]:
    """The salient terms (``text.tokens.salient_terms``) a passage answering ``question`` would hold: those of
    :func:`plain_question`, without the colloquial word for money ("多少钱": the passage states a price)."""
    return {t: w for t, w in salient_terms(plain_question(question)).items() if t not in _PRICE_WORDS}
