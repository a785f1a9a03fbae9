"""A cited PDF page as an image: the passage marked from the text layer's character boxes, found across
line wraps and across a page written line by line over two columns."""

from __future__ import annotations

import io

import pytest

from docmind_core.errors import IngestError
from tests.pdf_docs import memo_pdf, two_column_pdf

pytest.importorskip("pypdfium2")  # the pages extra; `make test` installs it

from docmind_core.ingest.page_image import render_page  # noqa: E402

LEFT = ("The flagship launch of the year was the Aurora appliance, which shipped in April to the first "
        "customers in Germany and France.")
RIGHT = ("Revenue of the services unit rose to 17.2 million EUR, helped by three large contracts signed "
         "with hospitals in the north.")


def _marked_columns(png: bytes) -> tuple[int, int]:
    """(marked pixels in the left half, in the right half): the marker's yellow over the white page."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    width = image.size[0]
    left = right = 0
    for index, (r, g, b) in enumerate(image.getdata()):
        if r > 240 and 215 < g < 245 and b < 175:
            if index % width < width // 2:
                left += 1
            else:
                right += 1
    return left, right


def test_a_passage_wrapped_in_the_right_column_is_marked(tmp_path):
    data = two_column_pdf(tmp_path / "cols.pdf", "Annual review", LEFT, RIGHT).read_bytes()
    image = render_page(data, 1, RIGHT)
    assert image.marked and image.png.startswith(b"\x89PNG")
    left, right = _marked_columns(image.png)
    assert right > 5000 and left == 0  # the right column's lines, nothing of the left one's
    plain = render_page(data, 1)
    assert not plain.marked and _marked_columns(plain.png) == (0, 0)


def test_a_passage_not_on_the_page_leaves_it_unmarked_and_a_missing_page_is_refused(tmp_path):
    pages = [["The budget is 412,000 EUR."], ["Dr. Okafor leads the project."]]
    data = memo_pdf(tmp_path / "memo.pdf", pages).read_bytes()
    assert not render_page(data, 1, "Dr. Okafor leads the project.").marked
    assert render_page(data, 2, "Dr. Okafor leads the project.").marked
    with pytest.raises(IngestError, match="has 2 pages"):
        render_page(data, 3)
