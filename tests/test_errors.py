"""One error hierarchy: every DocMindError is defined in errors.py and is either the caller's mistake or a
failure at run time."""

from __future__ import annotations

import ast
import inspect
import re

import pytest

from docmind_core import errors
from docmind_core.errors import CallerError, DocMindError, RuntimeFailure
from tests.paths import ROOT

BRANCHES = (CallerError, RuntimeFailure)
CALLER = ["ConfigError", "ConfigConflict", "InputTooLarge", "InvalidId", "EmptyInput", "PageImagesUnavailable", "AccessDenied", "SignInRequired", "NotFound",
          "IngestError", "IngestCancelled", "IngestPaused", "EmbedderMismatch", "DocumentBusy", "UserError", "DatasetError",
          "ExperimentError", "TraceFormatError"]
RUNTIME = ["BackendUnavailable", "ModelCallCut", "IncompleteReply", "ModelOutputError", "EmptyReply", "DeadlineCut",
           "StageError", "ToolExecutionError"]


def _error_classes() -> dict[str, type]:
    return {name: cls for name, cls in vars(errors).items()
            if inspect.isclass(cls) and issubclass(cls, DocMindError) and cls.__module__ == errors.__name__}


def test_every_error_is_in_exactly_one_branch():
    leaves = {name: cls for name, cls in _error_classes().items() if cls not in (DocMindError, *BRANCHES)}
    assert sorted(leaves) == sorted(CALLER + RUNTIME)
    for name, cls in leaves.items():
        assert sum(issubclass(cls, branch) for branch in BRANCHES) == 1, name


@pytest.mark.parametrize("name", CALLER)
def test_a_callers_mistake(name):
    assert issubclass(getattr(errors, name), CallerError)


@pytest.mark.parametrize("name", RUNTIME)
def test_a_failure_at_run_time(name):
    assert issubclass(getattr(errors, name), RuntimeFailure)


def test_a_cut_call_is_still_a_timeout():
    cut = errors.DeadlineCut("the call was cut after 1.0s")
    assert isinstance(cut, TimeoutError) and str(cut) == "the call was cut after 1.0s"


def test_no_module_but_errors_defines_a_docmind_error():
    """A new error goes into errors.py, under its branch; other modules import it from there."""
    names = set(_error_classes())
    outside = []
    named = re.compile(r"\b(?:%s)\b" % "|".join(map(re.escape, names)))
    for path in sorted((ROOT / "docmind_core").rglob("*.py")):
        if path.name == "errors.py" and path.parent.name == "docmind_core":
            continue
        source = path.read_text(encoding="utf-8")
        if not named.search(source):  # a module that never names an error class cannot subclass one
            continue
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef):
                bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
                if bases & names:
                    outside.append(f"{path.relative_to(ROOT)}: {node.name}")
    assert outside == []


def test_the_old_import_paths_still_name_the_same_classes():
    from docmind_core.deadline import DeadlineCut
    from docmind_core.experiments.datasets import DatasetError
    from docmind_core.experiments.runner import ExperimentError
    from docmind_core.accounts.limits import InputTooLarge
    from docmind_core.store.kb_store import DocumentBusy
    from docmind_core.store.traces import TraceFormatError
    from docmind_core.answer.tools import ToolExecutionError
    from docmind_core.accounts.users import UserError

    assert [DeadlineCut, DatasetError, ExperimentError, InputTooLarge, DocumentBusy, TraceFormatError,
            ToolExecutionError, UserError] == [errors.DeadlineCut, errors.DatasetError, errors.ExperimentError,
                                               errors.InputTooLarge, errors.DocumentBusy, errors.TraceFormatError,
                                               errors.ToolExecutionError, errors.UserError]
