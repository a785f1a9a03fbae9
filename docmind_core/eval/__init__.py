"""Retrieval benchmarks on public BEIR folders: ``docmind eval retrieval`` and ``docmind eval agentic``.

* :mod:`.beir`            — the BEIR loader, this package's own chunker (``chunk_text``) and the embedding cache;
* :mod:`.retrieval_eval`  — a throw-away index of the corpus and nDCG / recall / MRR per retrieval system;
* :mod:`.agentic_eval`    — RULE_PLANNER's one-shot plan vs the agentic loop on multi-hop questions.

Not to be confused with :mod:`docmind_core.experiments`, which runs labelled questions through the whole
product (``Workbench.ask`` on an ingested KB, traces, tiers, answers).  The index here is written directly,
not through the ingestor, and chunked by ``beir.chunk_text``: sentence windows without parent blocks, which
match the ingest chunker's children only for a document that fits in one child (README, "Code layout").
"""
