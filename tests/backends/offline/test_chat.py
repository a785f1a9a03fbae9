"""The offline engine: extractive, cited answers and fixed replies, in the question's language."""

from __future__ import annotations

import threading

import pytest

from docmind_core.backends.offline.chat import OfflineLanguageModel
from docmind_core.backends.protocols import LanguageModel, UnderstandingRequest, UsageMeter
from docmind_core.values import Turn
from docmind_core.answer.citations import parse_citations
from docmind_core.answer.generate import build_answer_prompt
from docmind_core.values import RetrievedChunk

SOURCES = [
    RetrievedChunk(chunk_id="warranty", document="保修政策.md",
                   text="本公司产品享受一年免费保修。保修不包括人为损坏。客服电话为 400-123-4567。"),
    RetrievedChunk(chunk_id="dm3000", document="DM-3000 手册.pdf",
                   text="DM-3000 是一款便携式投影仪。DM-3000 的电池续航时间为 12 小时，支持 65W 快充。重量为 1.2 千克。"),
    RetrievedChunk(chunk_id="nova", document="nova.md",
                   text="The Nova X2 router supports Wi-Fi 6. Its warranty period is two years. "
                        "The Nova X2 weighs 450 grams."),
    RetrievedChunk(chunk_id="web", document="Vendor news", origin="web", url="https://example.org/n",
                   text="The Nova X2 firmware 3.1 was released in March 2026 and adds a guest network."),
]


@pytest.fixture(scope="module")
def engine(prompts):
    return OfflineLanguageModel(prompts)


def answer(engine, prompts, question, template="knowledge_qa", sources=SOURCES, history=(), memories=()):
    prompt = build_answer_prompt(template, question, list(sources), list(history), list(memories), prompts)
    pieces = list(engine.stream_answer(prompt, UsageMeter()))
    return pieces, "".join(pieces)


@pytest.mark.parametrize("question, cited, must_contain", [
    ("DM-3000 的续航时间是多少？", 2, "12 小时"),
    ("客服电话是多少", 1, "400-123-4567"),
    ("保修期多长？", 1, "一年免费保修"),
    ("How long is the warranty of the Nova X2?", 3, "two years"),
    ("How much does the Nova X2 weigh?", 3, "450 grams"),
    ("When was Nova X2 firmware 3.1 released?", 4, "March 2026"),
])
def test_extractive_answer_cites_the_right_source(engine, prompts, question, cited, must_contain):
    pieces, text = answer(engine, prompts, question)
    assert len(pieces) > 3  # streamed in small pieces
    assert must_contain in text
    result = parse_citations(text, SOURCES, 8)
    assert result.invalid_refs == 0
    assert [u.index for u in result.used_sources] == [cited]
    assert result.coverage == 1.0


def test_chinese_answer_in_chinese_english_in_english(engine, prompts):
    _, zh = answer(engine, prompts, "DM-3000 的续航时间是多少？")
    _, en = answer(engine, prompts, "How much does the Nova X2 weigh?")
    assert zh.startswith("根据资料：") and en.startswith("According to the sources:")


def test_pronoun_in_the_question_is_resolved_from_history(engine, prompts):
    history = [Turn("user", "DM-3000 是什么？"), Turn("assistant", "一款便携式投影仪[1]。")]
    _, text = answer(engine, prompts, "它有多重？", history=history)
    assert "1.2 千克[2]" in text


@pytest.mark.parametrize("question, language_marker", [
    ("What is the capital of France?", "do not contain an answer"),
    ("火星上有水吗？", "没有能回答这个问题的内容"),
])
def test_says_plainly_when_the_evidence_does_not_answer(engine, prompts, question, language_marker):
    _, text = answer(engine, prompts, question)
    assert language_marker in text
    assert parse_citations(text, SOURCES, 8).occurrences == []


def test_low_confidence_answer_says_the_match_is_partial(engine, prompts):
    _, text = answer(engine, prompts, "DM-3000 的续航时间是多少？", template="low_confidence")
    assert text.startswith("以下资料与问题只部分相关") and "[2]" in text


def test_fallback_reply(engine, prompts):
    _, text = answer(engine, prompts, "What is the capital of France?", template="fallback", sources=[])
    assert "cannot answer" in text and "[" not in text


def test_meta_dialogue_summarises_the_turns(engine, prompts):
    history = [Turn("user", "DM-3000 是什么？"), Turn("assistant", "一款便携式投影仪[2]。"),
               Turn("user", "它的续航呢？"), Turn("assistant", "12 小时[1]。")]
    _, text = answer(engine, prompts, "总结一下我们的对话", template="meta_dialogue", sources=[], history=history)
    assert "2 轮" in text and "DM-3000 是什么？" in text and "它的续航呢？" in text and "[" not in text
    _, empty = answer(engine, prompts, "Summarise our conversation", template="meta_dialogue", sources=[])
    assert "nothing to summarise" in empty


@pytest.mark.parametrize("template, question, memories, expected", [
    ("chitchat", "你好", [], "你好"),
    ("chitchat", "thanks!", [], "welcome"),
    ("capability", "What can you do?", [], "knowledge bases"),
    ("capability", "你能做什么？", [], "知识库"),
    ("out_of_scope", "写一首诗", [], "抱歉"),
    ("memory_ack", "记住我喜欢简短的回答", ["我喜欢简短的回答"], "我记住了：我喜欢简短的回答"),
    ("memory_ack", "Remember that I prefer tea", ["I prefer tea"], "I will remember: I prefer tea"),
])
def test_fixed_replies(engine, prompts, template, question, memories, expected):
    _, text = answer(engine, prompts, question, template=template, sources=[], memories=memories)
    assert expected in text


def test_cancel_stops_the_stream(engine, prompts):
    prompt = build_answer_prompt("capability", "What can you do?", [], [], [], prompts)
    cancel = threading.Event()
    received = []
    for piece in engine.stream_answer(prompt, UsageMeter(), cancel):
        received.append(piece)
        cancel.set()
    assert len(received) == 1


def test_understand_and_status(engine):
    assert isinstance(engine, LanguageModel)
    request = UnderstandingRequest(question="请问它支持快充吗？", history=[Turn("user", "DM-3000 的重量？")],
                                   kb_brief="", messages=[])
    meter = UsageMeter()
    assert engine.understand(request, meter).rewritten_query == "DM-3000支持快充"
    assert meter.calls == []  # no model call was made
    status = engine.status()
    assert (status.name, status.live) == ("offline engine", False)
    assert "OPENAI_API_KEY" in status.how_to_enable


def test_answers_are_deterministic(engine, prompts):
    assert answer(engine, prompts, "How much does the Nova X2 weigh?")[1] == \
        answer(engine, prompts, "How much does the Nova X2 weigh?")[1]


TROUBLESHOOTING = [
    RetrievedChunk(chunk_id="t1", document="troubleshooting_zh.md",
                   text="## ERR-4012：许可证已过期\n\n原因：订阅许可证已经到期，或者超过 30 天没有刷新。\n\n处理步骤：\n"
                        "1. 在控制台打开“许可证”页面，查看到期日期。\n2. 点击“立即同步”重新获取许可证。"),
    RetrievedChunk(chunk_id="p1", document="pricing.html",
                   text="Model | Price | Memory |\n\nOrbit S1 | 1,490 USD | 16 GB |\n\nOrbit S2 | 2,390 USD | 32 GB |"),
    RetrievedChunk(chunk_id="d1", document="datasheet.pdf",
                   text="Power and environment\nThe maximum power draw of the Orbit S2 is 45 W at full load."),
]


def test_a_code_heading_is_quoted_with_its_section(engine, prompts):
    _, text = answer(engine, prompts, "错误代码 ERR-4012 是什么意思？怎么处理？", sources=TROUBLESHOOTING)
    lines = text.splitlines()
    assert lines[1] == "ERR-4012：许可证已过期[1]。"
    assert any(line.startswith("原因：订阅许可证已经到期") for line in lines)
    assert parse_citations(text, TROUBLESHOOTING, 8).coverage == 1.0


def test_figures_answer_a_question_asked_in_another_language(engine, prompts):
    _, text = answer(engine, prompts, "Orbit S1 和 S2 的价格分别是多少？", sources=TROUBLESHOOTING)
    assert "1,490 USD" in text and "2,390 USD" in text and "[2]" in text
    assert "Model | Price" not in text  # a table header states nothing


def test_bare_titles_are_not_quoted(engine, prompts):
    _, text = answer(engine, prompts, "What is the maximum power draw of the Orbit S2?", sources=TROUBLESHOOTING)
    assert "45 W at full load [3]." in text and "Power and environment" not in text


def test_memory_ack_without_a_stored_memory_says_nothing_was_saved(engine, prompts):
    _, text = answer(engine, prompts, "Remember that I prefer tea", template="memory_ack", sources=[])
    assert "could not save" in text


def test_a_comparison_quotes_each_side(engine, prompts):
    _, text = answer(engine, prompts, "Compare the maximum power draw of the Orbit S1 and the Orbit S2.",
                     sources=TROUBLESHOOTING)
    assert "45 W at full load [3]" in text
    # the S1's row states its price and memory, no power draw: the comparison says that side is not stated
    # (issue 34) rather than quote the row as if it answered
    assert "Orbit S1: Price" not in text and "do not state it for S1" in text


def test_a_when_question_prefers_the_dated_heading(engine, prompts):
    notes = [RetrievedChunk(chunk_id="n1", document="release_notes.md",
                            text="## Orbit firmware\n\n### Firmware 3.2.1 — 2026-02-10\n"
                                 "- Fixed: the web console reported wrong disk usage on 2 TB drives.\n"
                                 "- Fixed: the fan could stop after standby.")]
    _, text = answer(engine, prompts, "What did Orbit firmware 3.2.1 fix, and when was it released?", sources=notes)
    assert "Firmware 3.2.1 — 2026-02-10 [1]." in text and "Fixed: the fan could stop" in text
