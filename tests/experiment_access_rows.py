"""Access-matrix rows of the dataset and experiment methods of the Workbench (see test_workbench_access).

Datasets follow the KB rules (read: admin, owner, department, public; change: admin or owner); labels
follow the run's trace (owner and admins); experiments follow traces (owner and admins).
"""

from __future__ import annotations

import json
import uuid

from docmind_core.errors import DatasetError
from docmind_core.experiments.records import Variant


def may_read(actor: str, visibility: str) -> bool:
    return {"admin": True, "owner": True, "signed_out": False,
            "same_dept": visibility in ("department", "public"), "other_dept": visibility == "public"}[actor]


def may_manage(actor: str, visibility: str) -> bool:
    return actor in ("admin", "owner")


def owner_or_admin(actor: str, visibility: str) -> bool:
    return actor in ("owner", "admin")


def signed_in(actor: str, visibility: str) -> bool:
    return actor != "signed_out"


def _dataset(w, visibility: str):
    """A dataset of alice's, shared as given, with one question on a public KB of hers (one the rows only read)."""
    kb = w.shared_kb("public")
    path = w.files / f"set-{uuid.uuid4().hex[:8]}.jsonl"
    path.write_text(json.dumps({"question": "What is the zephyr budget?", "kb": kb.name,
                                "gold_doc_ids": [f"{kb.name}.txt"], "answers": ["40k"]}) + "\n", encoding="utf-8")
    made = w.alice.import_dataset(path.stem, path, visibility=visibility)
    return made


def _experiment(w, run: bool = False, variants: int = 1) -> int:
    made = w.alice.create_experiment("matrix", _dataset(w, "private").id,
                                     [Variant(name=f"v{i}", mode="rule") for i in range(variants)])
    if run:
        w.alice.run_experiment(made.id)
    return made.id


def _import(w, b, v) -> bool:
    path = w.files / f"mine-{uuid.uuid4().hex[:8]}.jsonl"
    path.write_text(json.dumps({"question": "anything?", "answerable": False}) + "\n", encoding="utf-8")
    return b.import_dataset(path.stem, path).item_count == 1


def _label(w, b, v) -> bool:
    run_id = w.trace()
    return b.label_run(run_id, "should_abstain").verdict == "should_abstain"


def _labelled(w) -> str:
    """A run of alice's that she has labelled right."""
    run_id = w.trace()
    w.alice.label_run(run_id, "right")
    return run_id


def _langfuse_export(w, b, v) -> bool:
    """Past the access check, the export is refused only because this world configures no Langfuse."""
    try:
        b.export_labels_to_langfuse([w.shared_kb(v).id])
    except DatasetError as exc:
        return "Langfuse is not configured" in str(exc)
    return True


def _start(w, b, v) -> bool:
    thread = b.start_experiment(_experiment(w))
    thread.join(60)
    return not thread.is_alive()


def _apply(w, b, v) -> bool:
    settings = b.apply_thresholds({"grader.high_threshold": 0.7, "grader.low_threshold": 0.2,
                                   "grader.gray_zone_mode": "coverage_first"})
    ok = settings.grader.high_threshold == 0.7
    b.reset_config("grader.high_threshold")
    b.reset_config("grader.low_threshold")
    return ok


EXPERIMENT_ROWS = [
    ("list_datasets", True, may_read, lambda w, b, v: (d := _dataset(w, v)).id in {x.id for x in b.list_datasets()}),
    ("get_dataset", True, may_read, lambda w, b, v: b.get_dataset(_dataset(w, v).name) is not None),
    ("dataset_items", True, may_read, lambda w, b, v: len(b.dataset_items(_dataset(w, v).id)) == 1),
    ("import_dataset", False, signed_in, _import),
    ("share_dataset", True, may_manage,
     lambda w, b, v: b.share_dataset(_dataset(w, v).id, "private").visibility == "private"),
    ("delete_dataset", True, may_manage, lambda w, b, v: b.delete_dataset(_dataset(w, v).id) is None),
    ("label_run", False, owner_or_admin, _label),
    ("run_label", False, owner_or_admin, lambda w, b, v: b.run_label(_labelled(w)).verdict == "correct"),
    ("run_labels", False, owner_or_admin, lambda w, b, v: (r := _labelled(w)) in b.run_labels([r])),
    ("list_labels", False, owner_or_admin, lambda w, b, v: (r := _labelled(w)) in
     {x.label.run_id for x in b.list_labels()}),
    ("remove_label", False, owner_or_admin, lambda w, b, v: b.remove_label(_labelled(w)).verdict == "correct"),
    ("export_labels", False, owner_or_admin, lambda w, b, v: (r := _labelled(w)) in b.export_labels()),
    # counts of every label of a KB's runs: whoever may read the KB
    ("kb_badge", True, may_read, lambda w, b, v: b.kb_badge([w.shared_kb(v).id]).labelled_runs >= 0),
    ("export_labels_to_langfuse", True, may_read, _langfuse_export),
    ("create_experiment", True, may_read,
     lambda w, b, v: b.create_experiment("x", _dataset(w, v).id, [Variant(name="a", mode="rule")]).id > 0),
    ("list_experiments", False, owner_or_admin, lambda w, b, v: (e := _experiment(w)) in
     {x.id for x in b.list_experiments()}),
    ("get_experiment", False, owner_or_admin, lambda w, b, v: b.get_experiment(_experiment(w)).id > 0),
    ("run_experiment", False, owner_or_admin, lambda w, b, v: b.run_experiment(_experiment(w)).done == 1),
    ("start_experiment", False, owner_or_admin, _start),
    ("cancel_experiment", False, owner_or_admin, lambda w, b, v: b.cancel_experiment(_experiment(w)) == "cancelled"),
    ("experiment_progress", False, owner_or_admin, lambda w, b, v: b.experiment_progress(_experiment(w)).total == 1),
    ("experiment_report", False, owner_or_admin,
     lambda w, b, v: b.experiment_report(_experiment(w, run=True)).variants[0].runs == 1),
    ("experiment_results", False, owner_or_admin,
     lambda w, b, v: b.experiment_results(_experiment(w, run=True)).report.variants[0].runs == 1),
    ("compare_experiment_runs", False, owner_or_admin,
     lambda w, b, v: b.compare_experiment_runs(
         (e := _experiment(w, run=True, variants=2)), w.alice.experiment_report(e).questions[0].item_id,
         "v0", "v1") is not None),
    ("sweep_experiment", False, owner_or_admin,
     lambda w, b, v: b.sweep_experiment(_experiment(w, run=True)).runs == 1),
    ("export_experiment", False, owner_or_admin,
     lambda w, b, v: '"docmind-experiment"' in b.export_experiment(_experiment(w))),
    ("apply_thresholds", False, signed_in, _apply),
]
