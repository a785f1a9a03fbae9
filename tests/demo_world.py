"""The demo knowledge base as the engine-level tests build it (the repository's data/demo folder, offline)."""

from __future__ import annotations

from pathlib import Path

from tests.paths import ROOT

DEMO = ROOT / "data" / "demo"
DEMO_DESCRIPTION = "Halcyon Data product documents: Aurora and Nimbus"


def open_demo_engine(home: Path):
    """An engine on ``home`` with the KB "demo" holding the whole demo folder; returns (engine, the KB's id)."""
    from docmind_core.engine import Engine

    engine = Engine.open(home, env={})
    kb = engine.create_kb("demo", description=DEMO_DESCRIPTION)
    outcomes = engine.ingest(kb.id, [DEMO])
    assert outcomes and all(o.status == "added" for o in outcomes), [o.error for o in outcomes]
    return engine, kb.id
