"""Query understanding: model path, fallback, complexity upgrade, offline rules."""

from __future__ import annotations

import json

import pytest

from docmind_core.backends.offline.chat import OfflineLanguageModel
from docmind_core.backends.chat_openai import OpenAIChatModel
from docmind_core.backends.offline.understanding import main_entity, strip_filler, understand_offline
from docmind_core.answer.run_context import RunContext
from docmind_core.settings import Settings
from docmind_core.values import Turn
from docmind_core.values import Complexity, Intent, Scope, Specificity, Understanding
from docmind_core.answer.understand import QueryUnderstanding, upgrade_complexity
from tests.fakes.openai_server import status, text


def a_run(**overrides) -> RunContext:
    return RunContext.start(Settings().with_overrides(overrides))


RULES_FIRST = {"llm.understanding": "rules_when_confident"}


def _model(server, prompts, retries=0):
    return OpenAIChatModel(server.base_url, "test-key", "fake-model", timeout_s=5, max_retries=retries,
                           prompts=prompts, retry_backoff_s=0.01)


VALID = {"rewrittenQuery": "DM-3000 电池续航", "intent": "factoid", "complexity": "SIMPLE",
         "specificity": "PRECISE", "timeAware": False, "memoryAware": False, "isAmbiguous": False,
         "scope": "knowledge_query", "scopeConfidence": 0.9, "memoryWriteHints": []}


def test_model_path_parses_the_json_and_sends_the_prompt(server, prompts):
    server.script(text(json.dumps(VALID, ensure_ascii=False)))
    run = a_run()
    history = [Turn("user", "DM-3000 是什么？"), Turn("assistant", "一款投影仪[1]。")]
    understanding, via = QueryUnderstanding(_model(server, prompts), prompts).run(
        "它的续航呢？", history, "产品手册: 硬件产品说明", run)
    assert via == "model"
    assert understanding.rewritten_query == "DM-3000 电池续航"
    assert understanding.specificity is Specificity.PRECISE
    body = server.requests[0]
    assert body["response_format"] == {"type": "json_object"}
    sent = "\n".join(m["content"] for m in body["messages"])
    assert "它的续航呢？" in sent and "DM-3000 是什么？" in sent and "产品手册" in sent
    assert [c.purpose for c in run.meter.calls] == ["understanding"]


@pytest.mark.parametrize("reply", [
    text("this is not json at all"),
    text('{"rewrittenQuery": "x", "intent": "gossip", "complexity": "SIMPLE"}'),  # unknown intent
    text('{"intent": "factoid"'),  # truncated
    text('["a", "list"]'),
    status(400, "bad request"),
])
def test_invalid_output_or_failure_falls_back(server, prompts, reply):
    server.script(reply)
    understanding, via = QueryUnderstanding(_model(server, prompts), prompts).run(
        "DM-3000 的续航是多少？", [], "", a_run())
    assert via == "fallback"
    assert understanding.is_fallback and understanding.is_ambiguous
    assert understanding.rewritten_query == "DM-3000 的续航是多少？"


def test_unreachable_endpoint_falls_back(prompts):
    model = OpenAIChatModel("http://127.0.0.1:9/v1", "k", "m", timeout_s=1, max_retries=0, prompts=prompts)
    understanding, via = QueryUnderstanding(model, prompts).run("hello there", [], "", a_run())
    assert via == "fallback" and understanding.is_fallback


@pytest.mark.parametrize("question, upgraded", [
    ("对比 Milvus 和 Chroma 的索引", True),
    ("比较两种方案", True),
    ("IVF 和 HNSW 有什么区别", True),
    ("两者的差异是什么", True),
    ("它们的异同", True),
    ("分别介绍 A 和 B", True),
    ("各自的优点", True),
    ("Milvus vs Chroma", True),
    ("Milvus versus Chroma", True),
    ("Compare IVF with HNSW", True),
    ("What is the difference between IVF and HNSW", True),
    ("续航多久？价格多少？", True),
    ("How long? And how much?", True),
    ("DM-3000 的续航是多少？", False),
    ("What is HNSW?", False),
    ("How do vectors work", False),  # "vs" must be a word of its own
])
def test_complexity_upgrade_table(question, upgraded):
    result = upgrade_complexity(question, Understanding(rewritten_query=question))
    assert result.upgraded_complexity is upgraded
    assert result.complexity is (Complexity.MEDIUM if upgraded else Complexity.SIMPLE)


def test_upgrade_never_lowers_or_touches_complex():
    complex_one = Understanding(rewritten_query="x", complexity=Complexity.COMPLEX)
    assert upgrade_complexity("对比 A 和 B", complex_one) == complex_one


def test_offline_engine_via_is_offline(prompts):
    understanding, via = QueryUnderstanding(OfflineLanguageModel(prompts), prompts).run(
        "请问 DM-3000 的续航是多少呢？", [], "", a_run())
    assert via == "offline"
    assert understanding.rewritten_query == "DM-3000 的续航是多少"
    assert understanding.specificity is Specificity.PRECISE


@pytest.mark.parametrize("question, expected", [
    ("请问向量数据库是什么？", "向量数据库是什么"),
    ("请问一下 DM-3000 支持快充吗？", "DM-3000 支持快充"),
    ("麻烦告诉我保修期多长呢", "保修期多长"),
    ("Can you tell me what HNSW is?", "what HNSW is"),
    ("Please explain the refund policy.", "explain the refund policy"),
])
def test_offline_rewrite_drops_filler(question, expected):
    assert strip_filler(question) == expected


@pytest.mark.parametrize("question, history_question, expected", [
    ("它的续航是多少？", "DM-3000 的电池容量是多少？", "DM-3000的续航是多少"),
    ("该产品多重？", "DM-3000 是什么？", "DM-3000多重"),
    ("那它的缺点呢？", "向量数据库有哪些索引类型？", "那向量数据库的缺点"),
    ("What about its price?", "What is the warranty of the Nova X2 router?", "What about Nova X2's price"),
    ("Is that one waterproof?", "Tell me about the Nova X2.", "Is Nova X2 waterproof"),
])
def test_offline_pronoun_resolution(question, history_question, expected):
    history = [Turn("user", history_question), Turn("assistant", "…")]
    understanding = understand_offline(question, history)
    assert understanding.rewritten_query == expected
    assert not understanding.is_ambiguous


def test_offline_unresolvable_pronoun_is_ambiguous():
    assert understand_offline("它是什么？", []).is_ambiguous
    assert understand_offline("it", []).is_ambiguous


def test_main_entity_prefers_codes_and_names():
    assert main_entity("What is the warranty of the Nova X2 router?") == "Nova X2"
    assert main_entity("DM-3000 的电池容量是多少？") == "DM-3000"
    assert main_entity("向量数据库有哪些索引类型？") == "向量数据库"


@pytest.mark.parametrize("question, field, value", [
    ("DM-3000 最新固件版本是多少？", "time_aware", True),
    ("What changed in 2025?", "time_aware", True),
    ("What is the latest release?", "time_aware", True),
    ("DM-3000 的续航是多少？", "time_aware", False),
    ("上次我说的偏好是什么？", "memory_aware", True),
    ("Use my preference for the format", "memory_aware", True),
    ("HNSW 的原理", "memory_aware", False),
    ("错误码 E1023 是什么意思", "specificity", Specificity.PRECISE),
    ("What does v2.4.1 fix?", "specificity", Specificity.PRECISE),
    ("《用户手册》里怎么说", "specificity", Specificity.PRECISE),
    ("怎么提高检索质量", "specificity", Specificity.BROAD),
    ("如何安装 DocMind？", "intent", Intent.PROCEDURAL),
    ("对比 Milvus 和 Chroma", "intent", Intent.COMPARISON),
    ("你觉得哪个方案更好？", "intent", Intent.OPINION),
    ("HNSW 是什么", "intent", Intent.FACTOID),
    ("写一首关于春天的诗", "scope", Scope.OUT_OF_SCOPE),
    ("你好", "scope", Scope.CHITCHAT),
])
def test_offline_classification_table(question, field, value):
    assert getattr(understand_offline(question, []), field) == value


def test_offline_pronoun_inside_the_question_is_left_alone():
    history = [Turn("user", "Tell me about Aurora.")]
    u = understand_offline("When did Nimbus Cloud complete its SOC 2 audit?", history)
    assert u.rewritten_query == "When did Nimbus Cloud complete its SOC 2 audit" and not u.is_ambiguous


@pytest.mark.parametrize("question", [
    "What did firmware 3.2.1 fix, and when was it released?",
    "AUR-4012 是什么意思，怎么处理",
])
def test_offline_two_questions_in_one_are_medium(question):
    assert understand_offline(question, []).complexity is Complexity.MEDIUM


# -- issue 21: the rewrite keeps the question's language; confident rules skip the call -------------------

def _reply(rewrite: str) -> dict:
    return {**VALID, "rewrittenQuery": rewrite, "specificity": "BROAD"}


@pytest.mark.parametrize("question, rewrite, switched", [
    # what Qwen2.5-Coder 1.5B sent for the demo's q07
    ("Nimbus 的默认管理地址是什么？", "What is the default management address of Nimbus?",
     "switched from Chinese to English"),
    ("What is the maximum power draw of the Nimbus N2?", "Nimbus N2 的最大功耗", "switched from English to Chinese"),
])
def test_a_rewrite_that_switched_language_is_discarded_and_the_note_says_so(server, prompts, question, rewrite,
                                                                           switched):
    server.script(text(json.dumps(_reply(rewrite), ensure_ascii=False)))
    outcome = QueryUnderstanding(_model(server, prompts), prompts).understand(question, [], "", a_run())
    assert outcome.via == "model" and outcome.understanding.rewritten_query == question
    assert outcome.note == f"the rewrite {switched}: discarded, the question is searched"


@pytest.mark.parametrize("question, rewrite", [
    ("Nimbus N1 和 N2 的价格分别是多少？", "Nimbus N1 N2 价格"),  # Latin names inside a Chinese rewrite
    ("What did Nimbus firmware 3.2.1 fix?", "Nimbus firmware 3.2.1 fixes"),
])
def test_a_rewrite_in_the_questions_language_is_kept(server, prompts, question, rewrite):
    server.script(text(json.dumps(_reply(rewrite), ensure_ascii=False)))
    outcome = QueryUnderstanding(_model(server, prompts), prompts).understand(question, [], "", a_run())
    assert outcome.understanding.rewritten_query == rewrite and outcome.note == ""


def test_confident_rules_answer_without_a_model_call(server, prompts):
    run = a_run(**RULES_FIRST)
    outcome = QueryUnderstanding(_model(server, prompts), prompts).understand(
        "What is the maximum power draw of the Nimbus N2?", [], "", run)
    assert server.requests == [] and run.meter.calls == []
    assert outcome.via == "offline" and outcome.note.startswith("rules were confident")
    assert outcome.understanding.rewritten_query == "What is the maximum power draw of the Nimbus N2"


@pytest.mark.parametrize("question, history, why, rewrite", [
    ("它的续航呢？", [Turn("user", "DM-3000 是什么？"), Turn("assistant", "一款投影仪[1]。")],
     "refers to an earlier turn", "DM-3000 电池续航"),
    ("it?", [], "ambiguous", "DM-3000 battery life"),
])
def test_unsure_rules_ask_the_model(server, prompts, question, history, why, rewrite):
    server.script(text(json.dumps(_reply(rewrite), ensure_ascii=False)))
    outcome = QueryUnderstanding(_model(server, prompts), prompts).understand(question, history, "",
                                                                              a_run(**RULES_FIRST))
    assert len(server.requests) == 1 and outcome.via == "model"
    assert outcome.note == f"rules not confident ({why}): asked the model"
