"""Parent/child chunking: sizes, overlap, containment, offsets, stable ids, headings."""

from __future__ import annotations

from docmind_core.ingest.chunking import chunk_document
from docmind_core.text.tokens import count_tokens

EN = ("Aurora keeps audit logs for 180 days by default. Administrators can shorten the period to 30 days. "
      "Longer retention needs the Enterprise plan. Logs are stored encrypted at rest. ")
ZH = "Nimbus N2 是一款边缘设备。它的最大功耗为 45 瓦。设备支持双电源冗余！固件 3.2.1 修复了风扇问题；请尽快升级。"


def _check_invariants(text, parents, children, child_tokens, parent_tokens):
    by_id = {p.id: p for p in parents}
    assert children, "no children"
    for chunk in parents + children:
        assert text[chunk.start:chunk.end] == chunk.text
        assert chunk.text == chunk.text.strip()
        assert chunk.token_count == count_tokens(chunk.text)
    for child in children:
        assert child.token_count <= child_tokens
        parent = by_id[child.parent_id]
        assert parent.start <= child.start and child.end <= parent.end
    for parent in parents:
        assert parent.token_count <= parent_tokens
    assert [c.index for c in children] == list(range(len(children)))
    assert [p.index for p in parents] == list(range(len(parents)))
    assert len({c.id for c in parents + children}) == len(parents) + len(children)


def test_english_chunks_respect_sizes_and_overlap():
    text = EN * 6
    parents, children = chunk_document(1, "aurora.md", text, child_tokens=40, overlap=12, parent_tokens=120)
    _check_invariants(text, parents, children, 40, 120)
    assert len(parents) >= 2
    # Consecutive children of the same parent share whole sentences (the overlap).
    shared = [a for a, b in zip(children, children[1:]) if a.parent_id == b.parent_id and b.start < a.end]
    assert shared, "expected overlapping neighbours"
    for a, b in zip(children, children[1:]):
        if a.parent_id == b.parent_id and b.start < a.end:
            assert count_tokens(text[b.start:a.end]) <= 12
    # Every sentence lands in some child.
    covered = set()
    for c in children:
        covered.update(range(c.start, c.end))
    assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())


def test_chinese_sentences_are_not_cut_mid_sentence():
    text = ZH * 8
    parents, children = chunk_document(1, "nimbus.txt", text, child_tokens=30, overlap=8, parent_tokens=90)
    _check_invariants(text, parents, children, 30, 90)
    for child in children:
        assert child.text[-1] in "。！；", child.text  # each child ends at a Chinese sentence end


def test_overlong_sentence_is_split_by_tokens():
    text = "word " * 250 + "end."
    parents, children = chunk_document(1, "long.txt", text, child_tokens=50, overlap=10, parent_tokens=200)
    _check_invariants(text, parents, children, 50, 200)
    assert len(children) >= 5
    assert sum(c.token_count for c in children) >= 251


def test_ids_are_stable_and_depend_on_kb_and_name():
    a = chunk_document(1, "doc.md", EN * 3, 40, 10, 120)
    b = chunk_document(1, "doc.md", EN * 3, 40, 10, 120)
    c = chunk_document(2, "doc.md", EN * 3, 40, 10, 120)
    d = chunk_document(1, "other.md", EN * 3, 40, 10, 120)
    ids = lambda result: [x.id for x in result[0] + result[1]]  # noqa: E731
    assert ids(a) == ids(b)
    assert not set(ids(a)) & set(ids(c))
    assert not set(ids(a)) & set(ids(d))


def test_appending_text_keeps_ids_of_unchanged_leading_chunks():
    first = chunk_document(1, "doc.md", "# A\n\n" + EN * 2 + "\n\n# B\n\n" + EN, 40, 10, 400)
    more = chunk_document(1, "doc.md", "# A\n\n" + EN * 2 + "\n\n# B\n\n" + EN + "\n\n# C\n\nNew section.", 40, 10, 400)
    assert first[0][0].id == more[0][0].id  # section A's parent is untouched


def test_markdown_heading_starts_a_new_parent():
    text = "# Nimbus\n\n" + EN + "\n\n## 功耗\n\n" + ZH
    parents, children = chunk_document(1, "mixed.md", text, child_tokens=60, overlap=10, parent_tokens=1000)
    _check_invariants(text, parents, children, 60, 1000)
    assert len(parents) == 2
    assert parents[0].text.startswith("# Nimbus")
    assert parents[1].text.startswith("## 功耗")


def test_empty_and_whitespace_text_gives_no_chunks():
    assert chunk_document(1, "e.txt", "", 40, 10, 120) == ([], [])
    assert chunk_document(1, "e.txt", " \n\n ", 40, 10, 120) == ([], [])


def test_defaults_from_settings_produce_reasonable_chunks():
    from docmind_core.settings import Settings

    rag = Settings().rag
    text = (EN + ZH) * 20
    parents, children = chunk_document(1, "big.md", text, rag.chunk_tokens, rag.chunk_overlap_tokens, rag.parent_tokens)
    _check_invariants(text, parents, children, rag.chunk_tokens, rag.parent_tokens)
    # Children never cross a parent, so only the last child of each parent may be short.
    by_parent: dict[str, list] = {}
    for c in children:
        by_parent.setdefault(c.parent_id, []).append(c)
    assert all(c.token_count > rag.chunk_tokens // 3 for group in by_parent.values() for c in group[:-1])
    assert sum(c.token_count for c in children) >= sum(p.token_count for p in parents)  # nothing left out
