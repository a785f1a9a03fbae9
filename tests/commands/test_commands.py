"""docmind_core/commands/__init__.py: the output helpers every CLI command uses."""

from __future__ import annotations

import json

from docmind_core.commands import write_or_echo_json


def test_an_export_goes_to_the_file_when_one_is_named(tmp_path, capsys):
    target = tmp_path / "runs.json"
    write_or_echo_json('{"q": "保修\\u001b]0;x"}', target)
    assert json.loads(target.read_text(encoding="utf-8")) == {"q": "保修\x1b]0;x"}
    assert capsys.readouterr().out.strip() == f"wrote {target}"


def test_an_export_without_a_file_is_printed_terminal_safe(capsys):
    write_or_echo_json(json.dumps({"q": "保修\x1b]0;x"}, ensure_ascii=False), None)
    out = capsys.readouterr().out
    assert "\x1b" not in out and json.loads(out) == {"q": "保修\x1b]0;x"}
