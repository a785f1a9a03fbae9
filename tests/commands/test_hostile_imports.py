"""`docmind config import`, `traces import` and `dataset import` with hostile files, through the real CLI: a
message naming the file (and line) and exit code 2, never a traceback, and nothing half imported."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from docmind_core.cli import cli

DEEP = "[" * 100_000 + "]" * 100_000
HUGE_INT = "9" * 5000


@pytest.fixture
def run(tmp_path):
    home = tmp_path / "home"

    def invoke(*args: str):
        return CliRunner().invoke(cli, ["--home", str(home), *args])

    return invoke


def _refused(result, *needles: str) -> None:
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in result.output, result.output


@pytest.mark.parametrize(("content", "needle"), [(DEEP, "maximum recursion depth"),
                                                 ('{"agentic.max_iterations": ' + HUGE_INT + "}", "digits")])
def test_config_import_of_json_python_cannot_read_is_refused(run, tmp_path, content, needle):
    path = tmp_path / "tuning.json"
    path.write_text(content)
    _refused(run("config", "import", str(path)), "tuning.json is not a JSON object of config keys", needle)


def test_config_import_of_a_file_of_megabytes_is_refused_before_it_is_read(run, tmp_path):
    path = tmp_path / "big.json"
    path.write_text('{"grader.high_threshold": 0.8, "pad": "' + "x" * (2 << 20) + '"}')
    _refused(run("config", "import", str(path)), "big.json is 2.0 MB", "at most 1024 KB")
    assert "grader.high_threshold" not in run("config", "list", "--changed").output


def test_traces_import_of_a_file_that_is_not_utf8_is_refused(run, tmp_path):
    path = tmp_path / "t.json"
    path.write_bytes(b'{"format": "docmind-traces", "q": "caf\xe9"}')
    _refused(run("traces", "import", str(path)), "t.json is not a DocMind trace export")


@pytest.mark.parametrize(("lines", "needle"), [
    (['{"id": "q1", "question": "a?"}', '{"id": "q2", "question": ' + HUGE_INT + "}"], "data.jsonl line 2: not JSON"),
    (['{"id": "q1", "question": "a?"}', DEEP], "data.jsonl line 2: not JSON"),
    (['{"id": "q1", "question": "a?"}', '{"id": "q2", "question": "b?"}', '{"id": "q1", "question": "c?"}'],
     "data.jsonl line 3: id 'q1' was already used on line 1"),
    (['{"id": "q1", "question": "a?"}', '{"id": {"x": 1}, "question": "b?"}'], "data.jsonl line 2: id: expected"),
])
def test_dataset_import_names_the_bad_line_and_imports_nothing(run, tmp_path, lines, needle):
    path = tmp_path / "data.jsonl"
    path.write_text("\n".join(lines))
    _refused(run("dataset", "import", str(path), "--name", "d"), needle)
    assert "d " not in run("dataset", "list").output


def test_dataset_import_of_bytes_that_are_not_utf8_names_the_line(run, tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_bytes(b'{"id": "q1", "question": "a?"}\n{"id": "q2", "question": "caf\xe9?"}\n')
    _refused(run("dataset", "import", str(path), "--name", "d"), "data.jsonl line 2: not UTF-8 text")


def test_dataset_import_keeps_a_line_separator_inside_a_question_and_reads_a_bom(run, tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text("\ufeff" + json.dumps({"id": "q1", "question": "one\u2028two\x85three?"}, ensure_ascii=False)
                    + "\n" + json.dumps({"id": "q2", "question": "b?"}), encoding="utf-8")
    result = run("dataset", "import", str(path), "--name", "d")
    assert result.exit_code == 0, result.output
    assert "2 questions" in result.output


@pytest.mark.parametrize(("values", "needle"), [
    ({"agentic.max_iterations": True}, "true/false, not a number"),  # was stored as 1
    ({"grader.high_threshold": False}, "true/false, not a number"),  # was stored as 0.0
    ({"llm.model": "qwen\u0000evil"}, "control characters"),  # was stored, NUL and all
    ({"llm.model": "qwen\u001b]0;title\u0007"}, "control characters"),
])
def test_config_import_refuses_values_lax_validation_would_quietly_change(run, tmp_path, values, needle):
    path = tmp_path / "tuning.json"
    path.write_text(json.dumps({"grader.low_threshold": 0.2, **values}))
    _refused(run("config", "import", str(path)), needle)
    listed = run("config", "list", "--changed")
    assert listed.exit_code == 0 and "grader.low_threshold" not in listed.output  # nothing half imported
