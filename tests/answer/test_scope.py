"""The regex fast path of scope detection: fires on unmistakable patterns only."""

from __future__ import annotations

import pytest

from docmind_core.models import Turn
from docmind_core.models import Scope
from docmind_core.query_signals import fast_scope

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
    assert decision.reason.startswith("regex:")


@pytest.mark.parametrize("question", [
    "DM-3000 的续航是多少？",
    "hello world program in python",
    "总结这篇文档",  # a document summary is a knowledge query, not meta-dialogue
    "What is the difference between hi and hello?",
    "Do you remember my name?",  # a question about memory, not a command
    "你还记得我喜欢什么吗？",
    "How do I translate a document with the API?",
    "what can you do with the DM-3000 remote?",
    "",
])
def test_uncertain_questions_go_to_the_model(question):
    assert fast_scope(question, HISTORY) is None


def test_memory_command_carries_the_text_to_store():
    assert fast_scope("记住：我喜欢简短的回答。").memory_text == "我喜欢简短的回答"
    assert fast_scope("Remember that I prefer bullet points.").memory_text == "I prefer bullet points"
