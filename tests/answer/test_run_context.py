"""One RunContext per run: the stages read settings, cancel, deadline and meter from it, never as arguments of
their own, and the tool context adds only the tools' state to it."""

from __future__ import annotations

import dataclasses
import inspect
import threading

import pytest

from docmind_core.answer.agentic import AgenticPath
from docmind_core.answer.selected_doc import SelectedDocPath
from docmind_core.answer.finish import EvidenceFinisher
from docmind_core.answer.generate import AnswerWriter
from docmind_core.answer.grade import CragGrader
from docmind_core.answer.judge import claims_step, evidence_step
from docmind_core.answer.rule_planner import RulePlannerPath
from docmind_core.answer.pipeline import AnswerPipeline, AskRequest
from docmind_core.answer.run_context import RunContext
from docmind_core.answer.understand import QueryUnderstanding
from docmind_core.backends.offline.chat import OfflineLanguageModel
from docmind_core.events import Done
from docmind_core.values import RequestedMode
from docmind_core.prompts import PromptLibrary
from docmind_core.settings import Settings
from docmind_core.answer.tools import ToolContext, Toolbox
from tests.agentic_world import CORPUS, FixtureRetriever, make_refiner

LOOSE = {"settings", "cancel", "meter", "guard", "exclude_doc_ids"}
STAGES = [RulePlannerPath.run, AgenticPath.run, EvidenceFinisher.finish, SelectedDocPath.read,
          QueryUnderstanding.run, QueryUnderstanding.understand, AnswerWriter.write,
          AnswerWriter.write_after_failure, evidence_step, claims_step]


@pytest.mark.parametrize("stage", STAGES, ids=lambda s: s.__qualname__)
def test_a_stage_takes_the_run_not_its_parts(stage):
    assert LOOSE.isdisjoint(inspect.signature(stage).parameters), stage.__qualname__


def test_the_tool_context_holds_nothing_the_run_holds():
    run_fields = {f.name for f in dataclasses.fields(RunContext)}
    tool_fields = {f.name for f in dataclasses.fields(ToolContext)}
    assert "run" in tool_fields and run_fields.isdisjoint(tool_fields)


def test_a_run_context_cannot_be_changed_mid_run():
    run = RunContext.start(Settings(), [1, "2"], user_id=7, exclude_doc_ids=[3])
    assert run.kb_ids == (1, 2) and run.exclude_doc_ids == frozenset({3})
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.settings = Settings()  # type: ignore[misc]


def test_the_one_shot_fallback_keeps_the_run():
    ctx = ToolContext.for_run([1], 7, Settings(), exclude_doc_ids=[4])
    ctx.close()
    fresh = ctx.fresh()
    assert fresh.run is ctx.run and not fresh.stop.is_set() and not fresh.closed


class _CountingRetriever(FixtureRetriever):
    """Records the settings object each search ran under."""

    def __init__(self) -> None:
        super().__init__(CORPUS)
        self.seen: list[Settings] = []

    def candidates(self, query, kb_ids, settings, doc_ids=None):
        self.seen.append(settings)
        return super().candidates(query, kb_ids, settings, doc_ids=doc_ids)


def test_the_settings_of_ask_are_the_ones_every_tool_call_reads():
    prompts = PromptLibrary()
    retriever = _CountingRetriever()
    toolbox, refiner, grader = Toolbox(retriever), make_refiner(), CragGrader()
    rule_planner = RulePlannerPath(toolbox, refiner, grader)
    llm = OfflineLanguageModel(prompts)
    pipeline = AnswerPipeline(llm=llm, fallback_llm=llm, prompts=prompts, store=None, reranker=refiner.reranker,
                              rule_planner=rule_planner, agentic=AgenticPath(llm, toolbox, refiner, grader, prompts,
                                                                       rule_planner),
                              grader=grader, memory=None)
    settings = Settings().with_overrides({"retrieval.final_top_k": 3})
    events = list(pipeline.ask(AskRequest(question="DM-3000 filter maintenance", kb_ids=[1],
                                          requested_mode=RequestedMode.AGENTIC), settings, [], threading.Event()))
    assert isinstance(events[-1], Done) and events[-1].sources
    assert retriever.seen and all(seen is settings for seen in retriever.seen)
