"""The offline tool policy: per-focus searches, exact-term keyword search, time-aware web, bridge hops, stopping."""

from __future__ import annotations


import pytest

from docmind_core.answer.agentic import AgenticPath
from docmind_core.answer.rule_planner import RulePlannerPath
from docmind_core.backends.offline.tool_policy import OfflineToolPolicy
from docmind_core.text.query_signals import bridge_entities, exact_terms, split_foci
from docmind_core.backends.offline.chat import OfflineLanguageModel
from docmind_core.backends.protocols import AgentTranscript, Observation, ToolCallRequest
from docmind_core.events import AgenticStep
from docmind_core.answer.grade import CragGrader
from docmind_core.values import Mode, Understanding
from docmind_core.prompts import PromptLibrary
from docmind_core.answer.tools import ToolContext, Toolbox, loop_tool_specs
from tests.agentic_world import CORPUS, FixtureRetriever, chunk, drain, make_refiner, settings

POLICY = OfflineToolPolicy()
TOOLS = loop_tool_specs(False)


def transcript(question: str, rounds=()) -> AgentTranscript:
    return AgentTranscript(question=question, rewritten_query=question, kb_brief="", messages=[],
                           rounds=[list(r) for r in rounds])


def observation(name: str, query: str, chunks) -> Observation:
    return Observation(call=ToolCallRequest(id=query, name=name, arguments={"query": query}), text="",
                       chunks=list(chunks), new_chunk_ids=[c.chunk_id for c in chunks])


def searches(turn, name="searchDocs"):
    return [c.arguments["query"] for c in turn.tool_calls if c.name == name]


def test_a_comparison_question_searches_each_focus_separately():
    turn = POLICY.next_turn(transcript("Who is older, Annie Morton or Terry Richardson?"), TOOLS)
    queries = searches(turn)
    assert len(queries) >= 2
    assert any("Annie Morton" in q for q in queries) and any("Terry Richardson" in q for q in queries)
    assert not any("Annie Morton" in q and "Terry Richardson" in q for q in queries)


def test_chinese_comparison_splits_on_conjunctions():
    assert [f.split()[0] for f in split_foci("对比 DM-3000 和 DM-4000 的流量")] == ["DM-3000", "DM-4000"]
    assert len(split_foci("Milvus 与 Faiss 的区别")) == 2
    assert split_foci("What government position was held by the woman who portrayed Corliss Archer in the "
                      "film Kiss and Tell?") == []  # a title with "and" is not a comparison


def test_exact_codes_and_quoted_names_get_a_keyword_search():
    turn = POLICY.next_turn(transcript('Which firmware does the DM-3000 need, and what is "Safe Mode"?'), TOOLS)
    assert set(searches(turn, "keywordSearch")) >= {"DM-3000", "Safe Mode"}
    assert exact_terms("升级到 v2.4.1 之后《用户手册》怎么说") == ["用户手册", "v2.4.1"]


def test_time_aware_questions_search_the_web_only_when_offered():
    turn = POLICY.next_turn(transcript("What is the latest DM pump model?"), TOOLS)
    assert searches(turn, "webSearch") == ["What is the latest DM pump model?"]
    no_web = [t for t in TOOLS if t.name != "webSearch"]
    assert not searches(POLICY.next_turn(transcript("What is the latest DM pump model?"), no_web), "webSearch")


def test_a_bridge_question_searches_again_with_the_entity_found_in_round_one():
    question = "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"
    first = POLICY.next_turn(transcript(question), TOOLS)
    assert searches(first) == [question]
    found = [chunk("k", "Kiss and Tell is a 1945 American comedy film starring then 17-year-old Shirley Temple as "
                        "Corliss Archer.", document="Kiss and Tell (1945 film)")]
    second = POLICY.next_turn(transcript(question, [[observation("searchDocs", question, found)]]), TOOLS)
    hops = searches(second)
    assert hops and hops[0].startswith("Shirley Temple")
    assert "government" in hops[0]  # the still-missing part of the question rides along


def test_bridge_entities_prefer_new_proper_nouns_and_titles():
    chunks = [chunk("x", "《三体》的作者刘慈欣出生于北京。", document="科幻小说")]
    names = bridge_entities("哪部科幻小说获得了雨果奖？", chunks)
    assert "三体" in names and "刘慈欣" in names


def test_it_stops_when_a_round_brought_nothing_new():
    question = "What government position was held by Shirley Temple?"
    empty = Observation(call=ToolCallRequest(id="1", name="searchDocs", arguments={"query": question}), text="")
    assert POLICY.next_turn(transcript(question, [[empty]]), TOOLS).tool_calls == []


def test_it_reformulates_once_when_coverage_stays_low_then_stops():
    question = "Who is older, Annie Morton or Terry Richardson?"
    off_topic = [chunk("z", "Morton Salt is a company.", document="Morton Salt")]
    rounds = [[observation("searchDocs", "Annie Morton older", off_topic),
               observation("searchDocs", "Terry Richardson older", [])]]
    second = POLICY.next_turn(transcript(question, rounds), TOOLS)
    assert [c.name for c in second.tool_calls] == ["keywordSearch"]
    rounds.append([observation("keywordSearch", second.tool_calls[0].arguments["query"],
                               [chunk("y", "Richardson photographs.", document="Photos")])])
    assert POLICY.next_turn(transcript(question, rounds), TOOLS).tool_calls == []


def test_the_policy_is_deterministic():
    t = transcript("Which writer was from England, Henry Roth or Robert Erskine Childers?")
    a, b = POLICY.next_turn(t, TOOLS), POLICY.next_turn(t, TOOLS)
    assert [(c.name, c.arguments) for c in a.tool_calls] == [(c.name, c.arguments) for c in b.tool_calls]


def _offline_agent(corpus):
    prompts = PromptLibrary()
    toolbox = Toolbox(FixtureRetriever(corpus))
    refiner, grader = make_refiner(), CragGrader()
    return AgenticPath(OfflineLanguageModel(prompts), toolbox, refiner, grader, prompts,
                         RulePlannerPath(toolbox, refiner, grader))


def _run(agent, question):
    cfg = settings()
    ctx = ToolContext.for_run([1], None, cfg)
    gen = agent.run(question, Understanding(rewritten_query=question), "fixtures", ctx)
    return drain(gen)


def test_offline_engine_loop_hops_to_the_bridge_paragraph():
    question = "What government position was held by the actress who played Corliss Archer in Kiss and Tell?"
    events, outcome = _run(_offline_agent(CORPUS), question)
    steps = [e for e in events if isinstance(e, AgenticStep)]
    assert len(steps) >= 2
    second_round = [c.args["query"] for c in steps[1].tool_calls if c.name == "searchDocs"]
    assert any("Shirley Temple" in q for q in second_round)
    assert {"a4", "a5"} <= {c.chunk_id for c in outcome.result.chunks}
    assert outcome.mode is Mode.AGENTIC and outcome.stop_reason == "model_done"


def test_offline_engine_loop_issues_two_searches_for_a_comparison():
    events, outcome = _run(_offline_agent(CORPUS), "对比 DM-3000 和 DM-4000 的流量")
    first = [e for e in events if isinstance(e, AgenticStep)][0]
    names = [c.name for c in first.tool_calls]
    assert names.count("searchDocs") >= 2
    assert {"a1", "a2"} <= {c.chunk_id for c in outcome.result.chunks}


@pytest.mark.slow  # the docmind eval CLI end to end
def test_eval_agentic_command_reports_both_modes(tmp_path):
    """`docmind eval agentic DIR --json` on a tiny generated two-hop set."""
    import json

    from click.testing import CliRunner

    from docmind_core.cli import cli

    data = tmp_path / "tiny"
    data.mkdir()
    docs = {
        "d1": ("Kiss and Tell (1945 film)", "Kiss and Tell is a 1945 comedy film starring Shirley Temple as Corliss "
                                            "Archer."),
        "d2": ("Shirley Temple", "Shirley Temple was an actress who later served as Chief of Protocol of the United "
                                 "States, a government position."),
        "d3": ("Annie Morton", "Annie Morton is an American model born October 8, 1970."),
        "d4": ("Terry Richardson", "Terry Richardson is an American fashion photographer born August 14, 1965."),
        "d5": ("Pumps", "Centrifugal pumps move water with a rotating impeller."),
    }
    (data / "corpus.jsonl").write_text("\n".join(json.dumps({"id": k, "title": t, "text": x})
                                                 for k, (t, x) in docs.items()), encoding="utf-8")
    queries = [("q1", "What government position was held by the actress who played Corliss Archer in Kiss and Tell?"),
               ("q2", "Who is older, Annie Morton or Terry Richardson?")]
    (data / "queries.jsonl").write_text("\n".join(json.dumps({"id": i, "text": t}) for i, t in queries),
                                        encoding="utf-8")
    (data / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t1\nq2\td3\t1\nq2\td4\t1\n",
                                    encoding="utf-8")
    out = CliRunner().invoke(cli, ["--home", str(tmp_path / "home"), "eval", "agentic", str(data), "--json"])
    assert out.exit_code == 0, out.output
    report = json.loads(out.output[out.output.index("{"):])
    assert set(report["modes"]) == {"agentic", "one_shot"}
    for mode in report["modes"].values():
        assert {"both_gold_rate", "any_gold_rate", "mean_rounds", "mean_tool_calls", "p50_ms"} <= set(mode)
    assert report["modes"]["agentic"]["both_gold_rate"] == 1.0
    assert report["modes"]["agentic"]["mean_rounds"] >= 1 and report["modes"]["one_shot"]["mean_rounds"] == 0
