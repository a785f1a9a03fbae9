"""Experiments: labelled datasets, one dataset x N configuration variants run through the normal pipeline,
metrics with bootstrap intervals, and threshold sweeps over stored runs without any model call.

* :mod:`.datasets` — labelled questions in SQLite (JSONL / BEIR import, labels from traces);
* :mod:`.runner`   — experiments, their resumable state and the bounded-parallel runner;
* :mod:`.metrics`  — per-run scores, per-variant metrics with 95% bootstrap intervals, paired differences;
* :mod:`.sweep`    — grader thresholds re-applied to stored runs (the CRAG grader itself, no second one);
* :mod:`.facade`   — the Workbench methods that decide access for all of the above.
"""
