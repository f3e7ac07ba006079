"""What a result file states about the system under test, kept per run with where it was read.

Importers fill ``RunInfo.factors`` from the file's contents (``records.Stated``: the value as
written and its JSON path or line). The store adds what the file's own name and folders say
(:func:`from_path`), the weakest evidence: benchmark outputs are kept in folders named after their
configuration (``h100x8/Qwen3-32B/tp4_dp2_in1024_out128_c64.json``). A factor the contents state is
never replaced by one read from a name; where they disagree, the import says so in a note.

A run keeps its factors in its metadata (:func:`to_metadata`: ``factor model`` is the value,
``factor model at`` where it was read, file name included), so they are sealed with the run row.
The read side takes them back with :func:`of_metadata`.
"""

from __future__ import annotations

import json
import re
from pathlib import PurePath

from bench_ledger.records import Stated
from bench_ledger.vocab import RUN_FACTORS

__all__ = ["PREFIX", "from_path", "merged", "model_name", "of_metadata", "run_metadata", "same_model", "to_metadata"]

PREFIX = "factor "
_AT = " at"

# name tokens a configuration folder or file name is made of: the parallel layout, the lengths, the
# load, the GPU and its count; each a whole token between separators (``_``, ``-``, white space)
_GPU = r"(?P<gpu>[abhlv]\d{2,3}[a-z]?|g[bh]\d{3}|mi\d{3}[a-z]?|l40s|a10g|t4|rtx\d{4}[a-z]*)"
_TOKENS: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = (
    (re.compile(r"tp(?P<v>\d+)"), ("tp",)),
    (re.compile(r"dp(?P<v>\d+)"), ("dp",)),
    (re.compile(r"pp(?P<v>\d+)"), ("pp",)),
    (re.compile(r"ep(?P<v>\d+)"), ("ep",)),
    (re.compile(r"(?:in|isl|input|i)(?P<v>\d+)"), ("input_len",)),
    (re.compile(r"(?:out|osl|output|o)(?P<v>\d+)"), ("output_len",)),
    (re.compile(r"(?:c|conc|concurrency)(?P<v>\d+)"), ("concurrency",)),
    (re.compile(r"(?:qps|rate|rps)(?P<v>\d+(?:\.\d+)?)"), ("request_rate",)),
    (re.compile(_GPU + r"(?:x(?P<n>\d+))?"), ("hardware", "gpu_count")),
    (re.compile(r"(?P<n>\d+)x" + _GPU), ("hardware", "gpu_count")),
)
_SPLIT = re.compile(r"[_\-/\s]+")


def from_path(path: PurePath, parts: int = 6) -> dict[str, Stated]:
    """The factors the last ``parts`` components of ``path`` (its folders and its file name without
    the extension) name by the token conventions above; a factor two components name differently is
    left out (it is not known which one holds)."""
    names = list(path.parts[-parts:])
    found: dict[str, Stated] = {}
    clash: set[str] = set()
    for i, name in enumerate(names):
        last = i == len(names) - 1
        text = PurePath(name).stem if last else name
        where = f"file name {name!r}" if last else f"folder {name!r}"
        for token in _SPLIT.split(text.lower()):
            for pattern, keys in _TOKENS:
                if (hit := pattern.fullmatch(token)) is None:
                    continue
                values = {"hardware": (hit.groupdict().get("gpu") or "").upper(), "gpu_count": hit.groupdict().get("n")}
                for key in keys:
                    value = values.get(key) if key in values else hit.group("v")
                    if not value:
                        continue
                    if key in found and found[key].value != value:
                        clash.add(key)
                    found.setdefault(key, Stated(value=value, at=where))
                break
    return {k: v for k, v in found.items() if k not in clash}


def merged(stated: dict[str, Stated], named: dict[str, Stated], file_name: str) -> tuple[dict[str, Stated], list[str]]:
    """The run's factors: what the file's contents state (``stated``, its places prefixed with the
    file's name), and what its names say (``named``) where the contents are silent; with a note for
    each factor both state differently (the contents are kept)."""
    out = {k: Stated(value=v.value, at=f"{file_name} {v.at}") for k, v in stated.items()}
    notes = []
    for key, v in named.items():
        if key not in out:
            out[key] = v
        elif not _same(out[key].value, v.value):
            notes.append(
                f"{file_name}: {key} {out[key].value!r} stated at {out[key].at}; its {v.at} says "
                f"{v.value!r}: the file's contents are kept"
            )
    return out, notes


def _same(a: str, b: str) -> bool:
    try:
        return float(a) == float(b)
    except ValueError:
        return a.strip().casefold() == b.strip().casefold()


def to_metadata(factors: dict[str, Stated]) -> dict[str, str]:
    """Run metadata entries for ``factors``: ``factor K`` its value, ``factor K at`` where it was read."""
    out: dict[str, str] = {}
    for key in RUN_FACTORS:
        if (v := factors.get(key)) is not None:
            out[PREFIX + key], out[PREFIX + key + _AT] = v.value, v.at
    return out


def of_metadata(meta: dict[str, str]) -> dict[str, Stated]:
    """The factors kept in a run's metadata (:func:`to_metadata`), in vocabulary order."""
    return {
        key: Stated(value=meta[PREFIX + key], at=meta.get(PREFIX + key + _AT, "not recorded"))
        for key in RUN_FACTORS
        if PREFIX + key in meta
    }


def run_metadata(text: str | None) -> dict[str, str]:
    """A run's stored metadata (``run.metadata_json``) as a dict; empty where there is none, or where
    what is stored is not an object (written behind the ledger)."""
    try:
        meta = json.loads(text) if text else {}
    except ValueError:
        return {}
    return meta if isinstance(meta, dict) else {}


_SNAPSHOT = re.compile(r"(?:^|/)models--(?:[^/]*--)?(?P<name>[^/]+)/snapshots/[0-9a-f]{7,64}$")


def model_name(model: str) -> str:
    """A model as compared and shown in a label: the last part of its path or hub id
    (``/models/Qwen/Qwen3-32B`` and ``Qwen/Qwen3-32B`` name one model; a Hugging Face cache path
    ``…/models--Qwen--Qwen3-32B/snapshots/<hash>`` names it before the snapshot); the text otherwise
    as written."""
    path = model.replace("\\", "/").rstrip("/")
    if hit := _SNAPSHOT.search(path):
        return hit["name"]
    return path.rsplit("/", 1)[-1] or model


def same_model(declared: str, stated: str) -> bool:
    """Whether a file's model can be the declared one: their names (:func:`model_name`) agree once
    case and punctuation are set aside, or one extends the other (``Llama-3.3-70B`` declared,
    ``Llama-3.3-70B-Instruct`` served)."""
    a, b = (re.sub(r"[^0-9a-z]", "", model_name(x).casefold()) for x in (declared, stated))
    return bool(a and b) and (a.startswith(b) or b.startswith(a))
