"""The seal file (``ledger close --seal-file``): one JSON line per closed batch, kept outside the
database, so a change by someone with write access to it is visible (``ledger verify --seal-file``).

Written before the close commits (temporary file, fsync, rename), and put back if the commit fails.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from bench_ledger.errors import InputError

__all__ = ["check_writable", "read_seal_file", "restore", "write_line"]


def check_writable(path: Path) -> None:
    """Fail before anything is sealed: the folder must exist and the file must be writable."""
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise InputError(f"{path}: no such folder {folder} (create it first; the seal file is not placed by guess)")
    if path.exists():
        if not path.is_file() or not os.access(path, os.W_OK):
            raise InputError(f"{path}: not a writable file")
    elif not os.access(folder, os.W_OK):
        raise InputError(f"{path}: folder {folder} is not writable")


def write_line(path: Path, line: str) -> bytes | None:
    """Old content + ``line`` to a temporary file beside ``path``, fsync, rename over ``path``.

    Returns the previous content (None if there was no file) so a failed commit can put it back."""
    old = path.read_bytes() if path.exists() else None
    data = old or b""
    if data and not data.endswith(b"\n"):
        data += b"\n"
    data += line.encode() + b"\n"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InputError(f"{path}: cannot write the seal: {exc.strerror}") from None
    if path.read_bytes() != data:
        restore(path, old)
        raise InputError(f"{path}: the seal file does not read back as written")
    return old


def restore(path: Path, old: bytes | None) -> None:
    try:
        if old is None:
            path.unlink(missing_ok=True)
        else:
            path.write_bytes(old)
    except OSError:
        pass


def read_seal_file(path: Path) -> dict[str, dict]:
    """The last line per batch of a seal file (JSON Lines written by :func:`close_batch`)."""
    if not path.is_file():
        raise InputError(
            f"{path}: not a regular file; a seal file is the JSON Lines file `ledger close --seal-file` wrote"
        )
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror}") from None
    out: dict[str, dict] = {}
    for n, raw in enumerate(data.splitlines(), 1):
        if raw.strip():
            try:
                rec = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError:
                raise InputError(f"{path}, line {n}: not a seal line (not UTF-8 text)") from None
            except (ValueError, RecursionError):
                raise InputError(f"{path}, line {n}: not a seal line (not one JSON object)") from None
            if not isinstance(rec, dict) or not isinstance(rec.get("batch"), str):
                raise InputError(f'{path}, line {n}: not a seal line (no "batch" name)') from None
            out[rec["batch"]] = rec
    return out
