"""The artefact row's identity and its bytes: the sha256 of a file, the check that its bytes are not in
the ledger yet, the content-addressed copy, the name shown, and the artefact being written."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger import records as rec
from bench_ledger.errors import AlreadyImported, InputError
from bench_ledger.ingest.target import ImportResult
from bench_ledger.store import Ledger
from sqlalchemy.orm import Session

__all__ = [
    "WrittenArtefact",
    "already_imported",
    "check_not_imported",
    "refuse_stored",
    "sha256_file",
    "shown_name",
    "store_copy",
]


def sha256_file(path: Path) -> tuple[str, int]:
    rec.require_regular_file(path)
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def find_artefact(session: Session, sha: str) -> m.Artefact | None:
    return session.scalar(sa.select(m.Artefact).where(m.Artefact.sha256 == sha))


def check_not_imported(ledger: Ledger, path: Path) -> tuple[str, int]:
    """Hash the file; raise AlreadyImported if the same bytes are in the ledger."""
    sha, size = sha256_file(path)
    refuse_stored(ledger, path, sha)
    return sha, size


def refuse_stored(ledger: Ledger, path: Path, sha: str) -> None:
    """Raise AlreadyImported if the bytes of sha256 ``sha`` are in the ledger."""
    with ledger.session() as s:
        art = find_artefact(s, sha)
        if art is not None:
            raise already_imported(path, sha, art.id, art.file_name, art.format)


def already_imported(path: Path, sha: str, artefact_id: int, file_name: str, fmt: str) -> AlreadyImported:
    """What importing ``path`` raises when artefact ``artefact_id`` holds its bytes."""
    return AlreadyImported(
        f"{path}: already imported as artefact {artefact_id} ({file_name}, {fmt}, sha256 {sha[:12]}…); nothing changed",
        artefact_id,
    )


@dataclass
class WrittenArtefact:
    """The artefact a run being written belongs to: its id, file and result."""

    id: int
    path: Path
    result: ImportResult
    requests: int = 0  # written so far (the sum of result.runs' counts)


def store_copy(path: Path, sha: str, folder: Path) -> str:
    """Copy ``path`` to ``folder/<sha[:2]>/<sha>`` and return where; the copy is verified.

    The bytes go to a temporary file in the same folder and are renamed into place, so a symlink
    planted at the destination (dangling or not) is replaced, never followed; a destination folder
    that resolves outside ``folder`` is refused. An existing regular file with the same sha256 is
    kept. If the commit fails afterwards the copy stays: it is content-addressed, and the next
    import of the same bytes uses it."""
    root = folder.resolve()
    dest = folder / sha[:2] / sha
    dest.parent.mkdir(parents=True, exist_ok=True)
    if not dest.parent.resolve().is_relative_to(root):
        raise InputError(f"{dest.parent} leads outside the artefact store {root} (a symlink?): nothing copied")
    if dest.is_file() and not dest.is_symlink() and sha256_file(dest)[0] == sha:
        return str(dest)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{sha[:12]}-")
    try:
        with os.fdopen(fd, "wb") as out, open(path, "rb") as src:
            shutil.copyfileobj(src, out, 1 << 20)
        if sha256_file(Path(tmp))[0] != sha:
            raise InputError(f"{path}: the file changed while it was imported (sha256 differs): nothing imported")
        os.chmod(tmp, 0o444)  # a content-addressed copy is never edited
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return str(dest)


def shown_name(path: Path) -> str:
    """The file name as text (:func:`records.file_name_text`)."""
    return rec.file_name_text(path.name)
