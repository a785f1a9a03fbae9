"""Colloquial phrasings grade like precise ones when the evidence states the asked value (issue 41), and an
unanswerable colloquial question is still not HIGH."""

from __future__ import annotations

import pytest

from docmind_core.answer.grade import CragGrader, coverage_report
from docmind_core.backends.offline.understanding import strip_filler
from docmind_core.settings import Settings
from docmind_core.text.colloquial import asked_terms, plain_question
from docmind_core.values import StageScores, Tier
from tests.agentic_world import chunk

GRADER = Settings().grader


def scored(cid: str, text: str, document: str, rerank: float):
    return chunk(cid, text, document=document).model_copy(update={"scores": StageScores(rerank=rerank)})


RAILWAY = scored("r1", "广茂铁路是连接广州与茂名的铁路，全长364.6公里，1991年建成通车。", "广茂铁路", 0.9)
STATION = scored("s1", "嘉兴南站位于浙江省嘉兴市南湖区，是沪杭高速铁路的中间站。", "嘉兴南站", 0.9)
PRICED = scored("p1", "Nimbus N2 的售价为 3999 元，含一年保修。", "nimbus_pricing.md", 0.9)
UNPRICED = scored("p2", "Nimbus N2 支持无线连接，外壳为铝合金，可以挂墙安装。", "nimbus_n2_datasheet.md", 0.9)


@pytest.mark.parametrize("precise, colloquial", [
    ("广茂铁路全长多少公里？", "那个广茂铁路全长大概多少公里来着？"),
    ("广茂铁路全长是多少？", "嗯，我想问下，那个广茂铁路全长是多少来着？"),
    ("广茂铁路全长多少公里？", "诶，广茂铁路全长到底有多少公里啊？"),
])
def test_a_colloquial_question_covers_the_evidence_like_its_precise_phrasing(precise, colloquial):
    assert coverage_report(colloquial, [RAILWAY]).coverage == coverage_report(precise, [RAILWAY]).coverage == 1.0
    grader = CragGrader()
    assert grader.grade(colloquial, [RAILWAY], GRADER).tier is grader.grade(precise, [RAILWAY], GRADER).tier \
        is Tier.HIGH


def test_a_colloquial_question_about_something_else_is_not_high():
    grade = CragGrader().grade("那个广茂铁路全长大概多少公里来着？", [STATION], GRADER)
    assert grade.tier is not Tier.HIGH


def test_duoshaoqian_asks_for_a_price_the_passage_must_state():
    grader = CragGrader()
    question = "哎，那个 Nimbus N2 大概多少钱啊？"
    assert "钱" not in asked_terms(question)
    assert grader.grade(question, [PRICED], GRADER).tier is Tier.HIGH
    assert grader.grade("Nimbus N2 的价格是多少？", [PRICED], GRADER).tier is Tier.HIGH
    unpriced = grader.grade(question, [UNPRICED], GRADER)
    assert unpriced.tier is not Tier.HIGH and "money" in unpriced.unstated_kinds  # no price stated


@pytest.mark.parametrize("question, plain", [
    ("那个广茂铁路全长大概多少公里来着？", "广茂铁路全长多少公里？"),
    ("嗯，我想问下，那个河茂铁路共设置了几座车站？", "河茂铁路共设置了几座车站？"),
    ("um, roughly how tall is K2 again?", "how tall is K2?"),
    # names that begin like a filler stay whole
    ("那不勒斯的人口是多少？", "那不勒斯的人口是多少？"),
    ("哈尔滨冬天多冷？", "哈尔滨冬天多冷？"),
    ("额定功率是多少？", "额定功率是多少？"),
    # a message of fillers only is left as it is
    ("嗯嗯", "嗯嗯"),
])
def test_plain_question_drops_fillers_and_hedges_only(question, plain):
    assert plain_question(question) == plain


def test_the_offline_rewrite_searches_without_the_fillers():
    assert strip_filler("请问一下，那个龙烟铁路什么时候开通运营来着？") == "龙烟铁路什么时候开通运营"
