"""Importers: raw files written by benchmark tools, GPU samplers and servers -> parsed records.

Each format lives in its own module and exposes ``IMPORTER`` (see :mod:`importers.base`); a module
that reads several related shapes of one tool exposes them all as ``IMPORTERS``.
``detect`` picks the importer by content, never by file name.

Modules whose name starts with ``_`` are private to this package: what several modules share
(``_toolfiles``, ``_vllm_result``, ``_ledger_requests_format``, ``_dmon_lines``) and the fast paths,
each behind one call of its importer (``_vllm_bench_duckdb``, ``_ledger_requests_arrow``, ``_dmon_arrow``).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path

from bench_ledger.errors import FormatRefused, UnknownFormat, UsageError
from bench_ledger.importers.base import Importer, ParseOptions, read_head

# Order matters only for speed: every sniff must be specific enough to reject the others' files.
_MODULES = (
    "vllm_bench",
    "sglang_bench",
    "aiperf",
    "aiperf_aggregate",
    "aiperf_csv",
    "genai_perf",
    "genai_perf_summary",
    "llmperf",
    "llmperf_summary",
    "guidellm",
    "dmon",
    "vllm_console",
    "vllm_log",
    "ledger_requests",
    "inference_perf",
    "trtllm_bench",
    "genai_bench",
    "mlperf_loadgen",
    "gpu_telemetry",
    "vllm_sweep",
    "inference_perf_config",
)

# What other packages use: the shells choose and list importers (ledger.cli, ledger.api); tests detect
# by content, name a format and parse with options.
__all__ = ["Importer", "ParseOptions", "all_importers", "by_name", "choose", "detect"]


def _importers() -> Iterator[Importer]:
    """Every importer, in detection order, its module imported when it is reached: a command that
    finds its format early (vLLM's result JSON is first) does not import the other formats' modules
    (their imports, PyYAML most of it, were a fixed cost of every `ledger import`). A listed module that is missing
    or fails to import raises when it is reached."""
    for module in _MODULES:
        mod = importlib.import_module(f"bench_ledger.importers.{module}")
        yield from getattr(mod, "IMPORTERS", (mod.IMPORTER,))


def all_importers() -> list[Importer]:
    """Every importer, in detection order. A listed module that is missing or fails to import
    raises: a format never disappears silently (its tests would skip instead of failing)."""
    return list(_importers())


def by_name(name: str) -> Importer:
    for imp in _importers():
        if imp.name == name:
            return imp
    names = ", ".join(i.name for i in all_importers())
    raise UsageError(f"unknown format {name!r}; known formats: {names}")


def _sniffed(imp: Importer, head: bytes) -> str | None:
    try:
        return imp.sniff(head)
    except RecursionError:  # a sniff that parses the first line met a structure nested too deeply
        return "first line nested too deeply to read"
    except ValueError as exc:  # e.g. an integer beyond CPython's digit limit in the first line
        return f"first line not readable: {str(exc)[:80]}"


def detect(path: Path, prefer: Importer | None = None) -> Importer:
    """The one importer whose sniff accepts the file, or UnknownFormat with every reason.

    ``prefer`` (e.g. the format of the file before, in a command importing many) is asked first:
    since every sniff rejects the others' files, that gives the same importer, without the sniffs
    before it in the order (1,000 files of the ledger's format: 1.5 ms each, most of it the vLLM
    console sniff's search of the head, profile note 17)."""
    head = read_head(path)
    if prefer is not None and _sniffed(prefer, head) is None:
        return prefer
    reasons: dict[str, str] = {}
    for imp in _importers():
        why = _sniffed(imp, head)
        if why is None:
            return imp
        reasons[imp.name] = why
    raise UnknownFormat(str(path), reasons)


def choose(path: Path, fmt: str | None = None, force: bool = False, prefer: Importer | None = None) -> Importer:
    """The importer for ``path``: detected by content (:func:`detect`, asking ``prefer`` first), or
    ``fmt`` when named.

    A named format whose own sniff rejects the file is refused (the file would be parsed as what
    it is not, and its sha256 taken, so the right import later says "already imported") unless
    ``force`` says the user knows better.
    """
    if not fmt:
        return detect(path, prefer)
    imp = by_name(fmt)
    why = imp.sniff(read_head(path))
    if why is not None and not force:
        raise FormatRefused(f"{path}: --format {fmt} refused: {why}; pass --force-format to import it as {fmt} anyway")
    return imp
