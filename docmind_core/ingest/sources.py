"""Which files an ingest reads: folder walks, .docmindignore, display names, the size limit."""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path
from typing import Sequence

from docmind_core.ingest.loaders import MAX_FILE_BYTES, read_limited


@dataclass(frozen=True)
class SourceFile:
    path: Path
    name: str  # the document name inside the KB


def expand_paths(paths: Sequence[Path | str], names: Sequence[str] | None = None) -> list[SourceFile]:
    """Files to ingest: files as given, folders walked recursively (hidden files and folders skipped).

    Files found in a folder are named by their path relative to that folder,
    so ``a/readme.md`` and ``b/readme.md`` stay two documents.  A
    ``.docmindignore`` file in a given folder lists glob patterns to leave out.
    """
    if names is not None and len(names) != len(paths):
        raise ValueError(f"{len(names)} names for {len(paths)} paths")
    found: list[SourceFile] = []
    for i, raw in enumerate(paths):
        path = Path(raw)
        if path.is_dir():
            ignored = _ignore_patterns(path)
            for child in sorted(path.rglob("*")):
                rel = child.relative_to(path)
                if (child.is_file() and not any(part.startswith(".") for part in rel.parts)
                        and not any(fnmatch(rel.as_posix(), pat) or fnmatch(child.name, pat) for pat in ignored)):
                    found.append(SourceFile(child, rel.as_posix()))
        else:
            found.append(SourceFile(path, names[i] if names is not None else path.name))
    return found


IGNORE_FILE = ".docmindignore"


def _ignore_patterns(folder: Path) -> list[str]:
    """Glob patterns from the folder's .docmindignore (one per line, # comments), e.g. notes that are not content."""
    ignore = folder / IGNORE_FILE
    if not ignore.is_file():
        return []
    lines = ignore.read_text(encoding="utf-8", errors="replace").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


def read_bytes(path: Path, max_bytes: int = MAX_FILE_BYTES, name: str = "") -> bytes:
    """The file's bytes, refusing unreadable or too large files (before reading them) with an IngestError.

    ``name``: the document name to put in messages (defaults to the file's name).
    """
    return read_limited(path, max_bytes, name or path.name)
