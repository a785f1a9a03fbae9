"""Prompt templates: load-time placeholder checks, source numbering, answer prompt assembly."""

from __future__ import annotations

import shutil

import pytest

from docmind_core.values import Turn
from docmind_core.errors import ConfigError
from docmind_core.answer.generate import build_answer_prompt, choose_template
from docmind_core.values import GradeResult, RetrievedChunk, Tier
from docmind_core.prompts import REQUIRED_PLACEHOLDERS, PromptLibrary, default_prompt_dir, format_sources


@pytest.fixture
def prompt_copy(tmp_path):
    target = tmp_path / "prompts"
    shutil.copytree(default_prompt_dir(), target)
    return target


SOURCES = [
    RetrievedChunk(chunk_id="c-b", document="beta.md", text="Beta text."),
    RetrievedChunk(chunk_id="c-a", document="alpha.pdf", text="Alpha text."),
    RetrievedChunk(chunk_id="w-1", document="Vendor blog", text="Web text.", origin="web",
                   url="https://example.org/post"),
]


def test_shipped_templates_load_with_their_placeholders(prompts):
    assert set(REQUIRED_PLACEHOLDERS) <= set(prompts.names)


def test_missing_placeholder_is_refused_naming_the_file(prompt_copy):
    path = prompt_copy / "knowledge_qa.txt"
    path.write_text(path.read_text(encoding="utf-8").replace("{sources}", "(sources go here)"), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"knowledge_qa\.txt.*missing.*\{sources\}"):
        PromptLibrary(prompt_copy)


def test_unknown_placeholder_is_refused_naming_the_file(prompt_copy):
    path = prompt_copy / "chitchat.txt"
    path.write_text(path.read_text(encoding="utf-8") + "\n{user_name}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"chitchat\.txt.*unknown.*\{user_name\}"):
        PromptLibrary(prompt_copy)


def test_missing_template_file_is_refused(prompt_copy):
    (prompt_copy / "fallback.txt").unlink()
    with pytest.raises(ConfigError, match=r"fallback\.txt"):
        PromptLibrary(prompt_copy)


def test_malformed_placeholder_is_refused(prompt_copy):
    path = prompt_copy / "capability.txt"
    path.write_text(path.read_text(encoding="utf-8") + "\n{question!r}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"capability\.txt"):
        PromptLibrary(prompt_copy)


def test_numbering_follows_source_order_and_labels_web():
    text = format_sources(SOURCES)
    assert text.index("[1] (document: beta.md)") < text.index("[2] (document: alpha.pdf)") \
        < text.index("[3] (web: Vendor blog <https://example.org/post>)")
    assert "Beta text." in text.split("[2]")[0]
    assert format_sources([]) == "(no sources)"


def test_agentic_prompt_sandbox_section(prompts):
    off = prompts.render("agentic_system", sandbox_section="")
    on = prompts.render("agentic_system", sandbox_section="- executeCode: run Python.\n")
    assert "executeCode" not in off and "executeCode" in on
    for tool in ("searchDocs", "keywordSearch", "webSearch", "recall_memory"):
        assert tool in off


def test_answer_prompt_numbers_sources_and_keeps_history_clean(prompts):
    history = [Turn("user", "What is Beta?"), Turn("assistant", "Beta is a product [1].")]
    prompt = build_answer_prompt("knowledge_qa", "How heavy is Alpha?", SOURCES, history, ["I like short answers"],
                                 prompts)
    roles = [m["role"] for m in prompt.messages]
    assert roles == ["system", "user", "assistant", "user"]
    assert prompt.messages[1]["content"] == "What is Beta?"  # earlier turns carry no retrieved context
    assert "Beta text." not in prompt.messages[1]["content"] + prompt.messages[2]["content"]
    final = prompt.messages[-1]["content"]
    assert final.index("[1] (document: beta.md)") < final.index("[3] (web:")
    assert "How heavy is Alpha?" in final and "I like short answers" in final
    assert prompt.sources == SOURCES and prompt.language == "en"
    assert "English" in prompt.messages[0]["content"]


def test_chinese_question_asks_for_chinese(prompts):
    prompt = build_answer_prompt("low_confidence", "Alpha 有多重？", SOURCES, [], [], prompts)
    assert prompt.language == "zh" and "Chinese" in prompt.messages[0]["content"]


def test_meta_dialogue_puts_the_conversation_in_the_request(prompts):
    history = [Turn("user", "What is Beta?"), Turn("assistant", "Beta is a product [1].")]
    prompt = build_answer_prompt("meta_dialogue", "Summarise our conversation", [], history, [], prompts)
    assert [m["role"] for m in prompt.messages] == ["system", "user"]
    assert "What is Beta?" in prompt.messages[1]["content"]


@pytest.mark.parametrize("name", ["chitchat", "capability", "out_of_scope", "fallback", "memory_ack"])
def test_direct_templates_render(prompts, name):
    prompt = build_answer_prompt(name, "hello", [], [], ["likes tea"], prompts)
    assert prompt.messages[0]["role"] == "system" and prompt.messages[-1]["role"] == "user"
    assert "{" not in "".join(m["content"] for m in prompt.messages)


def grade(tier: Tier) -> GradeResult:
    return GradeResult(tier=tier, top_score=0.5, lex_coverage=0.5, kb_entity_weak=False,
                       web_compensation_needed=False, reason="test")


def test_choose_template():
    assert choose_template(grade(Tier.HIGH), SOURCES) == "knowledge_qa"
    assert choose_template(grade(Tier.AMBIGUOUS), SOURCES) == "low_confidence"
    assert choose_template(grade(Tier.LOW), SOURCES) == "low_confidence"
    assert choose_template(grade(Tier.LOW), []) == "fallback"
    assert choose_template(grade(Tier.HIGH), []) == "fallback"


def test_a_source_is_named_with_its_place_in_the_prompt():
    from docmind_core.prompts import source_label
    from docmind_core.values import RetrievedChunk

    chunk = RetrievedChunk(chunk_id="c", document="memo.pdf", location="p. 2", text="The budget is 412,000 EUR.")
    assert source_label(chunk) == "document: memo.pdf, p. 2"
    assert source_label(chunk.model_copy(update={"location": ""})) == "document: memo.pdf"
