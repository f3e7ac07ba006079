"""``vllm bench sweep serve`` directories: ``SERVE--k=v-...-BENCH--k=v-.../run=N.json`` + ``summary.json``.

One combination folder is one SERVE setting (one server launch) and one BENCH setting; each
``run=N.json`` is one repetition (one run), a ``vllm bench serve`` result payload with
``run_number`` and the swept serve parameters added as top-level keys. The folder name is the only
place the bench parameters are written, so both come from there (``serve.<k>``, ``bench.<k>`` in the
run's metadata, with ``launch`` = the SERVE part). ``summary.json`` is the JSON list of the same
payloads: it is imported onto the same runs (matched by ``run_number``), and the check compares
each of its values with the run file's.

The payloads themselves are read by the ``vllm-bench`` importer's own code
(:func:`bench_ledger.importers._vllm_result.parse_run`), so aggregates and arrays keep one meaning.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from bench_ledger.errors import ParseError
from bench_ledger.importers._toolfiles import head_text, integer
from bench_ledger.importers._vllm_result import parse_run
from bench_ledger.importers.base import ParseOptions, load_json
from bench_ledger.records import Pairing, ParsedArtefact, ParsedRun

__all__ = ["IMPORTER", "relabel"]

_COMBO = re.compile(r"^SERVE--(?P<serve>.*?)-?BENCH--(?P<bench>.*)$")
_RUN_FILE = re.compile(r"^run=(?P<n>\d+)\.json$")
_PARAM_SPLIT = re.compile(r"-(?=[A-Za-z_][A-Za-z0-9_.]*=)")
SWEEP_KEYS = ("run_number",)


def params(text: str) -> dict[str, str]:
    """``max_num_seqs=4-max_model_len=4096`` -> {"max_num_seqs": "4", "max_model_len": "4096"}."""
    out: dict[str, str] = {}
    for part in _PARAM_SPLIT.split(text.strip("-")) if text.strip("-") else []:
        key, sep, value = part.partition("=")
        if not sep:
            raise ValueError(f"not key=value: {part!r}")
        out[key] = value
    return out


def combination(folder: str) -> tuple[dict[str, str], dict[str, str]] | None:
    """(serve params, bench params) of a sweep combination folder name, or None."""
    m = _COMBO.match(folder)
    if m is None:
        return None
    try:
        return params(m["serve"]), params(m["bench"])
    except ValueError:
        return None


def sweep_run(run: ParsedRun, folder: Path, run_number: int | None, path: Path, where: str) -> ParsedRun:
    """Relabel one payload's run as the repetition of its sweep combination."""
    combo = combination(folder.name)
    assert combo is not None
    serve, bench = combo
    number = None
    kept = []
    for p in run.published:
        if p.key == "run_number":
            number = int(p.value) if p.value is not None else None
            continue
        if p.key in serve and p.note == "key not known to the importer":
            if p.text != serve[p.key]:
                raise ParseError(
                    path,
                    where,
                    p.key,
                    f"payload says {p.key}={p.text}, the folder name {folder.name!r} says {serve[p.key]}",
                )
            continue
        kept.append(p)
    if run_number is not None and number is not None and run_number != number:
        raise ParseError(
            path, where, "run_number", f"payload says run_number {number}, the file name says {run_number}"
        )
    number = run_number if run_number is not None else number
    if number is None:
        raise ParseError(path, where, "run_number", "a sweep payload without run_number")
    meta = dict(run.info.metadata)
    meta.update({f"serve.{k}": v for k, v in serve.items()})
    meta.update({f"bench.{k}": v for k, v in bench.items()})
    meta["launch"] = f"{folder.parent.name}/SERVE--{'-'.join(f'{k}={v}' for k, v in serve.items())}"
    meta["run_number"] = str(number)
    # the repetition's run=N.json and its entry in summary.json: one payload, the same facts
    facts = dict(run.info.pairing.facts) if run.info.pairing is not None else {}
    if run.info.duration_s is not None:
        facts["duration"] = repr(run.info.duration_s)
    pairing = Pairing(
        key=f"vllm-sweep run={number}", requests=run.info.pairing.requests if run.info.pairing else None, facts=facts
    )
    info = run.info.model_copy(
        update={
            "label": f"vllm-sweep {folder.parent.name}/{folder.name} run={number}",
            "metadata": meta,
            "pairing": pairing,
        }
    )
    return run.model_copy(update={"info": info, "published": kept})


def in_sweep(path: Path) -> int | None:
    """The run number when ``path`` is a ``run=N.json`` inside a sweep combination folder."""
    m = _RUN_FILE.match(path.name)
    if m is None or combination(path.parent.name) is None:
        return None
    return int(m["n"])


def relabel(path: Path, runs: Iterator[ParsedRun]) -> Iterator[ParsedRun]:
    """The vllm-bench runs of ``path``, relabelled when the file is a sweep repetition."""
    number = in_sweep(path)
    for run in runs:
        yield run if number is None else sweep_run(run, path.parent, number, path, "$")


class VllmSweepSummaryImporter:
    name = "vllm-sweep-summary"
    description = "vLLM `vllm bench sweep` summary.json (list of the run=N.json payloads of one combination)"

    def sniff(self, head: bytes) -> str | None:
        text = head_text(head)
        if not text.startswith("["):
            return "not a JSON array"
        if not all(re.search(rf'"{k}"\s*:', text) for k in ("run_number", "duration", "completed")):
            return "array items lack vllm bench sweep's run_number / duration / completed"
        return None

    def parse(self, path: Path, options: ParseOptions) -> ParsedArtefact:
        data = load_json(path)
        if not isinstance(data, list):
            raise ParseError(path, "$", None, "expected a JSON list of sweep run payloads")
        if combination(path.parent.name) is None:
            raise ParseError(
                path,
                "$",
                None,
                f"folder {path.parent.name!r} is not a SERVE--...-BENCH--... combination: "
                "the sweep parameters cannot be read",
            )
        runs = []
        for i, obj in enumerate(data):
            run = parse_run(obj, None, f"item {i}", path)
            number = (
                integer(path, f"$[{i}]", "run_number", obj.get("run_number"), optional=False)
                if isinstance(obj, dict)
                else None
            )
            runs.append(sweep_run(run, path.parent, number, path, f"$[{i}]"))
        return ParsedArtefact(
            format=self.name,
            format_version=None,
            runs=runs,
            note="the sweep's summary list: each entry is checked against its run=N.json",
        )


IMPORTER = VllmSweepSummaryImporter()
