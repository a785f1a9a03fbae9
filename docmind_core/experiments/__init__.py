"""Experiments: labelled datasets, one dataset x N configuration variants run through the normal pipeline,
metrics with bootstrap intervals, and threshold sweeps over stored runs without any model call.

Every run here is a product run: ``Workbench.ask`` of the acting user on a KB that went through ingest
(and its chunker), stored as a trace.  The BEIR retrieval benchmarks are :mod:`docmind_core.eval`, which
indexes a corpus directly with its own chunker; the README ("Code layout") says how the two differ.

* :mod:`.datasets` — labelled questions in SQLite (JSONL / BEIR import, labels given to runs);
* :mod:`.badge`    — what "Supported by the sources" has earned per KB: labelled precision, Wilson interval;
* :mod:`.label_export` — labels with their runs as JSONL or a Langfuse dataset;
* :mod:`.records`  — what an experiment is: variants, rows, progress;
* :mod:`.experiment_store` — experiments and their rows in SQLite, with the runner heartbeat;
* :mod:`.runner`   — the bounded-parallel, resumable runner;
* :mod:`.results`  — an experiment's scored runs, report and sweeps from one load of its traces;
* :mod:`.metrics`  — per-run scores, per-variant metrics with 95% bootstrap intervals, paired differences;
* :mod:`.sweep`    — grader thresholds re-applied to stored runs (the CRAG grader itself, no second one);
* :mod:`.facade`   — ``UserExperiments``, held by ``Workbench``: one user's access to all of the above;
* :mod:`.answers_eval` — ``docmind eval answers``: a model's right answers on a dataset.
"""
