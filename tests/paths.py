"""Paths the tests share, independent of where a test module sits in the tree."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the repository
FIXTURES = ROOT / "tests" / "fixtures"
