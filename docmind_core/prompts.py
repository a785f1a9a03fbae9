"""Prompt templates: loaded from ``prompts/*.txt``, checked once, rendered by name.

A template is plain text with ``{name}`` placeholders (``{{`` and ``}}`` for
literal braces).  It may be split into chat messages by lines that read
``### system`` and ``### user``; a template without those lines is one system
message.  Every template DocMind relies on has a fixed set of placeholders
(:data:`REQUIRED_PLACEHOLDERS`); a file that misses one or uses an unknown one
is refused at load time, so a broken edit fails when the engine starts instead
of in the middle of a run.
"""

from __future__ import annotations

import re
import string
from pathlib import Path
from typing import Any, Sequence

from docmind_core.errors import ConfigError
from docmind_core.values import RetrievedChunk

_ANSWER_PLACEHOLDERS = frozenset({"sources", "question", "language", "memories"})
_DIRECT_PLACEHOLDERS = frozenset({"question", "language"})

REQUIRED_PLACEHOLDERS: dict[str, frozenset[str]] = {
    "knowledge_qa": _ANSWER_PLACEHOLDERS,
    "low_confidence": _ANSWER_PLACEHOLDERS,
    "knowledge_qa_compact": _ANSWER_PLACEHOLDERS,  # rag.compact_prompts: for small models
    "low_confidence_compact": _ANSWER_PLACEHOLDERS,
    "fallback": frozenset({"question", "language", "memories"}),
    "meta_dialogue": frozenset({"conversation", "question", "language"}),
    "chitchat": _DIRECT_PLACEHOLDERS,
    "capability": _DIRECT_PLACEHOLDERS,
    "out_of_scope": _DIRECT_PLACEHOLDERS,
    "memory_ack": frozenset({"memories", "question", "language"}),
    "query_understanding": frozenset({"kb_brief", "history", "question"}),
    "agentic_system": frozenset({"sandbox_section"}),
    "agentic_system_compact": frozenset({"sandbox_section"}),  # agentic.compact_tools: for small models
    "judge_evidence": frozenset({"question", "sources"}),
    "judge_claims": frozenset({"claims"}),
}

_SECTION_RE = re.compile(r"^###\s*(system|user)\s*$", re.MULTILINE)

LANGUAGE_NAMES = {"zh": "Chinese (简体中文)", "en": "English"}


def default_prompt_dir() -> Path:
    """The ``prompts/`` folder shipped beside the package."""
    return Path(__file__).resolve().parent.parent / "prompts"


def placeholders_of(text: str) -> set[str]:
    """Placeholder names used in a template (``{{`` escapes are not placeholders)."""
    names: set[str] = set()
    for _, field, spec, conversion in string.Formatter().parse(text):
        if field is None:
            continue
        if conversion:
            raise ValueError(f"placeholder {{{field}!{conversion}}} has a conversion; use plain {{{field}}}")
        if not field.isidentifier():
            raise ValueError(f"placeholder {{{field}}} is not a plain name")
        if spec:
            raise ValueError(f"placeholder {{{field}:{spec}}} has a format spec; use plain {{{field}}}")
        names.add(field)
    return names


class PromptLibrary:
    """Every template of one directory, validated when loaded."""

    def __init__(self, directory: Path | str | None = None):
        self.directory = Path(directory) if directory is not None else default_prompt_dir()
        if not self.directory.is_dir():
            raise ConfigError(f"prompt directory not found: {self.directory}")
        self._templates: dict[str, str] = {}
        for path in sorted(self.directory.glob("*.txt")):
            self._templates[path.stem] = self._load(path)
        missing = sorted(set(REQUIRED_PLACEHOLDERS) - set(self._templates))
        if missing:
            raise ConfigError(
                f"prompt templates missing from {self.directory}: " + ", ".join(f"{m}.txt" for m in missing))

    @staticmethod
    def _load(path: Path) -> str:
        text = path.read_text(encoding="utf-8")
        try:
            found = placeholders_of(text)
        except ValueError as exc:
            raise ConfigError(f"prompt template {path.name}: {exc}") from None
        required = REQUIRED_PLACEHOLDERS.get(path.stem)
        if required is not None:
            problems = []
            if required - found:
                problems.append("missing placeholder(s) " + ", ".join(f"{{{n}}}" for n in sorted(required - found)))
            if found - required:
                problems.append("unknown placeholder(s) " + ", ".join(f"{{{n}}}" for n in sorted(found - required)))
            if problems:
                raise ConfigError(f"prompt template {path.name}: " + "; ".join(problems))
        return text

    @property
    def names(self) -> list[str]:
        return sorted(self._templates)

    def template(self, name: str) -> str:
        try:
            return self._templates[name]
        except KeyError:
            raise ConfigError(f"no prompt template named {name!r} in {self.directory}") from None

    def render(self, name: str, **values: Any) -> str:
        """The whole template filled in, section marker lines removed."""
        return "\n\n".join(m["content"] for m in self.render_messages(name, **values))

    def render_messages(self, name: str, **values: Any) -> list[dict[str, str]]:
        """The template filled in and split into OpenAI-format messages at ``### system`` / ``### user``."""
        text = self.template(name)
        expected = placeholders_of(text)
        missing = expected - set(values)
        if missing:
            raise ValueError(f"render({name!r}) lacks value(s) for: {', '.join(sorted(missing))}")
        filled = text.format_map({k: ("" if v is None else v) for k, v in values.items()})
        return _split_sections(filled)


def _split_sections(text: str) -> list[dict[str, str]]:
    marks = list(_SECTION_RE.finditer(text))
    if not marks:
        return [{"role": "system", "content": text.strip()}]
    messages = []
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        content = text[m.end():end].strip()
        if content:
            messages.append({"role": m.group(1), "content": content})
    return messages


def source_label(chunk: RetrievedChunk) -> str:
    """How one source is introduced in a prompt: document name, or web page title and address."""
    if chunk.origin == "web":
        title = chunk.document or chunk.url or "web page"
        return f"web: {title}" + (f" <{chunk.url}>" if chunk.url and chunk.url != title else "")
    if chunk.origin == "memory":
        return "memory"
    return f"document: {chunk.cited_as}"


def format_sources(chunks: Sequence[RetrievedChunk]) -> str:
    """Sources numbered [1..n] in exactly the given order (the order the UI lists them)."""
    if not chunks:
        return "(no sources)"
    blocks = []
    for n, chunk in enumerate(chunks, start=1):
        blocks.append(f"[{n}] ({source_label(chunk)})\n{chunk.text.strip()}")
    return "\n\n".join(blocks)


def language_name(code: str) -> str:
    return LANGUAGE_NAMES.get(code, "the language of the question")
