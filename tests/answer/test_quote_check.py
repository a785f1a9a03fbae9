"""The evidence judge's quote, read against the passage it names (docmind_core/answer/quote_check.py).

The passages are shaped like the demo KB's (a Chinese manual, a pricing table whose N2 row points elsewhere,
release notes with dated headings); the replies are the kinds a 1.5B judge wrote in bench/judge_tiers.py runs."""

from __future__ import annotations

import pytest

from docmind_core.answer.judge import settled_verdict
from docmind_core.answer.quote_check import check_quote, quoted_words
from docmind_core.settings import Settings
from docmind_core.values import EvidenceVerdict
from tests.agentic_world import chunk

GRADER = Settings().grader
MANUAL = chunk("m1", "## 首次登录\n设备通电后，在浏览器中打开默认管理地址 https://192.168.50.1 ，使用初始账号 admin 登录。"
                     "首次登录后必须修改密码。", document="nimbus_manual_zh.docx")
RETENTION = chunk("g1", "## 数据保留\n数据保留期可以设置为 30 天到 720 天之间的任意天数。修改方法：进入“设置 → 数据保留”，"
                        "输入新的天数并保存。", document="aurora_admin_guide_zh.md")
PRICING = chunk("p1", "| Model | Price | CPU | Storage | Max power |\n|---|---|---|---|---|\n"
                      "| Nimbus N1 | 1,490 USD | 4-core ARM | 1 TB NVMe | 28 W |\n"
                      "| Nimbus N2 | 2,390 USD | 8-core x86 | 2 TB NVMe | see the N2 datasheet |",
                document="pricing_comparison.html")
RELEASES = chunk("r1", "## Aurora\n\n### Aurora 4.2 — 2026-01-20\n- New: answer citations now show the page number "
                       "for PDF sources.\n- Fixed: search results occasionally ignored the department filter.",
                 document="release_notes.md")
AUDIT = chunk("s1", "Aurora Cloud completed its SOC 2 Type II audit in August 2025. The report is available to "
                    "customers under NDA.", document="security_whitepaper.txt")


@pytest.mark.parametrize("reason, quote, source", [
    ('[1] "192.168.50.1"', "192.168.50.1", 1),
    ('[2] “30 天到 720 天', "30 天到 720 天", 2),  # cut short: no closing mark
    ("[1] 45 W at full load", "45 W at full load", 1),  # no quotation marks
    ("The passages do not state the answer.", "The passages do not state the answer", None),
])
def test_the_quote_and_the_passage_it_names_are_read_from_the_reason(reason, quote, source):
    assert quoted_words(reason) == (quote, source)


@pytest.mark.parametrize("question, reason, shown", [
    ("Nimbus 的默认管理地址是什么？", '[1] "192.168.50.1"', [MANUAL]),
    ("如何修改 Aurora 的数据保留期？允许的范围是多少？", '[1] "30 天到 720 天"', [RETENTION]),
    ("When did Aurora Cloud complete its SOC 2 Type II audit?", '[2] "in August 2025"', [RELEASES, AUDIT]),
    # a label joined to the copied words ("AUDIT: ...") still reads as a quote of the passage
    ("When did Aurora Cloud complete its SOC 2 Type II audit?", '[1] "SOC 2: completed its SOC 2 Type II audit in '
                                                               'August 2025"', [AUDIT]),
])
def test_a_quote_the_passage_holds_in_a_sentence_about_the_question_is_verified(question, reason, shown):
    check = check_quote(question, reason, shown, GRADER.judge_quote_min_coverage)
    assert check.verified, check.note
    assert "in a sentence about the question" in check.note


@pytest.mark.parametrize("question, reason, shown, why", [
    # a date copied from another section's heading: the sentence holding it is not about the audit
    ("When did Aurora Cloud complete its SOC 2 Type II audit?", '[1] "2026-01-20"', [RELEASES],
     "of the question's terms"),
    # the only watts of the table are the N1's: said of N1, not of the N2 the question names
    ("What is the maximum power draw of the Nimbus N2?", '[1] "28 W"', [PRICING], "is said of N1, not of N2"),
    # the model's own words about the passages
    ("What is the maximum power draw of the Nimbus N2?", "[1] The passage states the power of the Nimbus N2",
     [PRICING], "not word for word"),
    # a paraphrase of the right sentence
    ("Nimbus 的默认管理地址是什么？", '[1] "默认地址是 192.168.50.1 端口 443"', [MANUAL], "not word for word"),
    # a passage number it was not shown
    ("Nimbus 的默认管理地址是什么？", '[3] "192.168.50.1"', [MANUAL], "which it was not shown"),
    # the asked kind (a date) is not in the sentence that holds the quote
    ("When did Aurora Cloud complete its SOC 2 Type II audit?", '[1] "covered the EU and US regions"',
     [chunk("s2", "Aurora Cloud's SOC 2 Type II audit covered the EU and US regions.")],
     "states no value of the kind asked"),
])
def test_a_quote_out_of_place_is_not_verified(question, reason, shown, why):
    check = check_quote(question, reason, shown, GRADER.judge_quote_min_coverage)
    assert not check.verified
    assert why in check.note


def test_a_yes_with_a_verified_quote_answers_and_one_without_is_only_partly():
    question = "Nimbus 的默认管理地址是什么？"
    uncertain_yes = EvidenceVerdict(verdict="partly", p_yes=0.51, scored_by="logprobs", reason='[1] "192.168.50.1"',
                                    stated="yes")
    settled = settled_verdict(uncertain_yes, check_quote(question, uncertain_yes.reason, [MANUAL], 0.5), GRADER)
    assert settled.verdict == "answers" and settled.quote_verified and settled.quote_source == 1

    confident_paraphrase = EvidenceVerdict(verdict="answers", p_yes=0.9, scored_by="logprobs", stated="yes",
                                           reason="[1] The manual gives the address")
    settled = settled_verdict(confident_paraphrase, check_quote(question, confident_paraphrase.reason, [MANUAL], 0.5),
                              GRADER)
    assert settled.verdict == "partly" and not settled.quote_verified
    # a "no" is a "no", whatever words follow it
    said_no = EvidenceVerdict(verdict="no", p_yes=0.2, scored_by="logprobs", stated="no", reason='[1] "192.168.50.1"')
    assert settled_verdict(said_no, check_quote(question, said_no.reason, [MANUAL], 0.5), GRADER).verdict == "no"
