"""The regex fast path of scope detection: fires on unmistakable patterns only."""

from __future__ import annotations

import pytest

from docmind_core.values import Turn
from docmind_core.values import Scope
from docmind_core.text.query_signals import fast_scope

HISTORY = [Turn("user", "DM-3000 的续航是多少？"), Turn("assistant", "12 小时[1]。")]


@pytest.mark.parametrize("question, scope", [
    ("总结一下我们的对话", Scope.META_DIALOGUE),
    ("请总结上面的对话", Scope.META_DIALOGUE),
    ("帮我回顾一下刚才的讨论", Scope.META_DIALOGUE),
    ("Can you summarise our conversation so far?", Scope.META_DIALOGUE),
    ("Please summarize this chat", Scope.META_DIALOGUE),
    ("翻译你上面的回答", Scope.META_DIALOGUE),
    ("把你的回答翻译成英文", Scope.META_DIALOGUE),
    ("Translate your last answer into Chinese", Scope.META_DIALOGUE),
    ("我刚才问了什么？", Scope.META_DIALOGUE),
    ("你好", Scope.CHITCHAT),
    ("您好！", Scope.CHITCHAT),
    ("hi", Scope.CHITCHAT),
    ("Hello!", Scope.CHITCHAT),
    ("thanks", Scope.CHITCHAT),
    ("Thank you so much!", Scope.CHITCHAT),
    ("谢谢你", Scope.CHITCHAT),
    ("你能做什么？", Scope.CAPABILITY),
    ("你有哪些功能", Scope.CAPABILITY),
    ("What can you do?", Scope.CAPABILITY),
    ("who are you", Scope.CAPABILITY),
    # several conversation acts in one message (issue 23: these were retrieved and answered LOW)
    ("hello, who are you?", Scope.CAPABILITY),
    ("你好，你是谁？", Scope.CAPABILITY),
    ("Hi! What can you do?", Scope.CAPABILITY),
    ("Good morning DocMind! How can you help?", Scope.CAPABILITY),
    ("你好，请介绍一下你自己", Scope.CAPABILITY),
    ("thanks, bye", Scope.CHITCHAT),
    ("谢谢，再见！", Scope.CHITCHAT),
    ("ok, thanks!", Scope.CHITCHAT),
    ("记住：我喜欢简短的回答", Scope.MEMORY_COMMAND),
    ("请记住我在上海工作", Scope.MEMORY_COMMAND),
    ("Remember that I prefer bullet points", Scope.MEMORY_COMMAND),
    ("please remember my team uses Python 3.12", Scope.MEMORY_COMMAND),
])
def test_confident_patterns_fire(question, scope):
    decision = fast_scope(question, HISTORY)
    assert decision is not None, question
    assert decision.scope is scope
    assert decision.confidence >= 0.9
    assert decision.reason.startswith("the message is only ") and "nothing is searched" in decision.reason \
        or decision.reason.startswith("regex:"), decision.reason


@pytest.mark.parametrize("question", [
    "DM-3000 的续航是多少？",
    "hello world program in python",
    "总结这篇文档",  # a document summary is a knowledge query, not meta-dialogue
    "What is the difference between hi and hello?",
    "Do you remember my name?",  # a question about memory, not a command
    "你还记得我喜欢什么吗？",
    "How do I translate a document with the API?",
    "what can you do with the DM-3000 remote?",
    # a conversation act beside a document question is a document question
    "Who are you, and what is the N2 price?",
    "你好，N2 多少钱？",
    "hello, what is the maximum power draw of the Nimbus N2?",
    "thanks! and the N1?",
    "help me find the N2 price",
    "Hi, who is the CEO of Aurora?",
    "你好，你们的管理地址是什么？",
    "",
])
def test_uncertain_questions_go_to_the_model(question):
    assert fast_scope(question, HISTORY) is None


def test_memory_command_carries_the_text_to_store():
    assert fast_scope("记住：我喜欢简短的回答。").memory_text == "我喜欢简短的回答"
    assert fast_scope("Remember that I prefer bullet points.").memory_text == "I prefer bullet points"


def test_a_greeting_reason_is_in_words():
    decision = fast_scope("hello, who are you?")
    assert decision.reason == ("the message is only a greeting and a question about DocMind itself, "
                               "so nothing is searched")


def _labelled_questions() -> list[str]:
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    questions = [json.loads(line)["question"] for line in
                 (root / "data" / "demo_labelled.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    shared = root.parent / "shared" / "eval"
    for name in ("cmrc2018", "hotpotqa", "scifact"):
        path = shared / name / "queries.jsonl"
        if path.exists():
            with path.open(encoding="utf-8") as lines:
                questions += [json.loads(line).get("text", "") for line in lines if line.strip()]
    return questions


def test_no_labelled_document_question_is_taken_for_a_conversation_act():
    caught = [q for q in _labelled_questions() if fast_scope(q) is not None]
    assert caught == []


@pytest.mark.slow  # waits out a real deadline or runs the docmind command: make test only
@pytest.mark.parametrize("question, words", [("hello, who are you?", "I'm DocMind"), ("你好，你是谁？", "我是 DocMind")])
def test_docmind_ask_answers_a_greeting_without_retrieval(tmp_path, question, words):
    import json

    from click.testing import CliRunner

    from docmind_core.cli import cli

    notes = tmp_path / "nimbus.txt"
    notes.write_text("The Nimbus N2 draws at most 45 W.", encoding="utf-8")
    runner = CliRunner()
    assert runner.invoke(cli, ["--home", str(tmp_path), "ingest", str(notes), "--kb", "notes"]).exit_code == 0
    out = runner.invoke(cli, ["--home", str(tmp_path), "ask", question, "--kb", "notes", "--json"])
    assert out.exit_code == 0, out.output
    run = json.loads(out.output)
    assert (run["mode"], run["scope"], run["tier"], run["sources"]) == ("NONE", "capability", "", [])
    assert words in run["answer"]
    assert run["route_explanation"].startswith("the message is only a greeting")
