"""Paths the tests share, independent of where a test module sits in the tree."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the repository
FIXTURES = ROOT / "tests" / "fixtures"


def write_texts(folder: Path, texts: dict[str, str]) -> list[Path]:
    """Each named text as a UTF-8 file in ``folder`` (made if missing), in the dict's order."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in texts.items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths
