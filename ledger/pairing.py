"""Which run of the batch a file's run belongs to, when the user names none (issue 14).

A tool that writes one run into several files (llmperf's ``<prefix>_summary.json`` and
``<prefix>_individual_responses.json``) gives each file's run the same pairing key
(``records.Pairing``: the shared prefix, with the request count the file states). A manifest
(``ledger declare``) declares runs by their workload before any file is imported. An imported run
that names no run (``--run``) and whose label is new to the batch is attached:

1. to the one run of the batch holding the same pairing key, or whose file this file names (or
   that names this file: vLLM's console prints ``result_filename='x.json'``, the JSON may be a copy
   renamed ``benchmaq_x.json``, so the name is matched as a suffix after a separator), when the
   request counts both files state are equal, every other fact both state agrees (completed
   requests, the model), and the run does not yet hold what this file brings (per-request records,
   or the tool's aggregates in this file's format: AIPerf's JSON and CSV exports print the same
   statistics of one run, exactly and rounded);
2. else to the one declared run (no artefact attached yet) whose workload settings agree with the
   file's: no setting both state differs, and at least one agrees;
3. else it becomes a new run, as before.

Several candidates at step 1 or 2 raise :class:`~bench_ledger.errors.Ambiguous` naming them: the
user picks one with ``--run``. Nothing is guessed. Once imported, an aggregate-only artefact can be
moved to another run by a correction (:func:`bench_ledger.attach.attach`).
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import sqlalchemy as sa
from bench_ledger import factors
from bench_ledger import models as m
from bench_ledger import records as rec
from bench_ledger.errors import Ambiguous, InputError
from bench_ledger.revisions import current
from sqlalchemy.orm import Session

__all__ = ["FOLDER", "Matcher", "folder_of", "metadata_of", "serialised"]

# run.metadata keys the first file of a run leaves for the others
KEY, REQUESTS, FILE, NAMES = "pairing key", "pairing requests", "pairing file", "pairing names"
FACT = "pairing {}"  # a fact both files state (``records.Pairing.facts``): "pairing completed", "pairing model"
# the workload settings a declared run and a file's run are compared on (R3: settings, not actuals)
SETTINGS = (
    "input_target_tokens",
    "output_cap_tokens",
    "concurrency",
    "request_count",
    "request_rate",
    "seed",
    "dataset",
)
RECORDS, AGGREGATES = "per-request records", "the tool's aggregates"
FOLDER = "file folder"  # where the run's first file sat (folder_of)
# a factor a file states, and the workload column of a declared run it is compared with (None: factors only)
FACTOR_SETTING = {
    "input_len": "input_target_tokens",
    "output_len": "output_cap_tokens",
    "concurrency": "concurrency",
    "request_rate": "request_rate",
    "prompt_count": "request_count",
    "dataset": "dataset",
    "model": None,
    "tp": None,
    "dp": None,
    "pp": None,
    "ep": None,
    "hardware": None,
    "gpu_count": None,
}
# how a distinct run label names a factor
SHORT = {
    "input_len": "in",
    "output_len": "out",
    "concurrency": "c",
    "request_rate": "rate",
    "prompt_count": "n",
    "gpu_count": "gpus",
    "engine_version": "version",
    "served_model": "served",
}


def metadata_of(info: rec.RunInfo) -> dict[str, str]:
    """The run's metadata as stored: the file's labels and its pairing key and request count."""
    meta = dict(info.metadata)
    p = info.pairing
    if p is not None:
        for name, value in (
            (KEY, p.key),
            (FILE, p.file),
            (NAMES, p.names),
            (REQUESTS, None if p.requests is None else str(p.requests)),
        ):
            if value is not None:
                meta[name] = value
        meta.update({FACT.format(k): v for k, v in p.facts.items()})
    return meta


def names(named: str, file: str) -> bool:
    """``file`` is the file that a file naming ``named`` means: the same name, or a copy renamed with a
    prefix ending in a separator (``benchmaq_x.json`` for ``x.json``); a directory in ``named`` is
    not part of the name."""
    named = named.replace("\\", "/").rsplit("/", 1)[-1]
    if not named or not file.endswith(named):
        return False
    return len(file) == len(named) or not file[-len(named) - 1].isalnum()


def brings(pr: rec.ParsedRun, fmt: str) -> set[str]:
    """What a parsed run of a file of format ``fmt`` adds to the run it lands on."""
    return ({RECORDS} if pr.capture.record_count > 0 else set()) | (
        {f"{AGGREGATES} ({fmt})"} if pr.published else set()
    )


@dataclass
class _Run:
    id: int
    key: int  # origin: where its captured rows point
    label: str
    declared: bool  # no artefact attached yet (a manifest's run)
    tool: str | None
    settings: dict[str, object]
    meta: dict[str, str]
    held: set[str] | None = None

    def shown(self) -> str:
        return f"run {self.id} {self.label!r}"


# PostgreSQL advisory lock class ("pair") of the imports that pair runs in one batch (key: batch id)
PAIRING_LOCK = 0x70616972
# set by an import attempt that runs again after losing a race (ingest.retry_conflicts): it takes the lock
serialised: ContextVar[bool] = ContextVar("serialised", default=False)


@dataclass
class Matcher:
    """The current runs of one batch, loaded once per imported file; :meth:`resolve` per parsed run.

    Concurrent imports pair as if run one after the other: on PostgreSQL, an import whose run has a
    pairing key, or whose batch has a declared run not yet attached, takes a transaction-level
    advisory lock on the batch before it reads the batch's runs, so of two files of one run imported
    at once the second sees the first's run. Other imports into the batch do not wait."""

    s: Session
    batch_id: int
    batch_name: str
    notes: list[str] = field(default_factory=list)
    backend: str = "duckdb"
    claimed: set[int] = field(default_factory=set)
    loaded: bool = False
    locked: bool = False
    # labels :meth:`resolve` gave runs new to the batch: found written by the time they are, another import
    # took the label meanwhile (ingest's run writer then loses the race and the import runs again)
    new: set[str] = field(default_factory=set)

    def _prepare(self, info: rec.RunInfo) -> None:
        if self.loaded:
            return
        self.loaded = True
        R = m.Run.__table__
        if self.backend == "postgresql" and (
            serialised.get()
            or info.pairing is not None
            or self.s.execute(
                sa.select(sa.func.count())
                .select_from(R)
                .where(R.c.batch_id == self.batch_id, R.c.artefact_id.is_(None), current(R))
            ).scalar()
        ):
            self._lock()
        self._load()

    def _lock(self) -> None:
        """Take the batch's pairing lock (PostgreSQL; held to the end of the transaction)."""
        if not self.locked:
            self.s.execute(sa.text("SELECT pg_advisory_xact_lock(:k, :b)"), {"k": PAIRING_LOCK, "b": self.batch_id})
            self.locked = True

    def _load(self) -> None:
        R = m.Run.__table__
        cols = [
            R.c.id,
            R.c.origin_id,
            R.c.label,
            R.c.artefact_id,
            R.c.tool,
            R.c.metadata_json,
            *(R.c[k] for k in SETTINGS),
        ]
        self.runs: list[_Run] = []
        for row in self.s.execute(sa.select(*cols).where(R.c.batch_id == self.batch_id, current(R)).order_by(R.c.id)):
            self.runs.append(
                _Run(
                    row.id,
                    row.origin_id or row.id,
                    row.label,
                    row.artefact_id is None,
                    row.tool,
                    {k: getattr(row, k) for k in SETTINGS},
                    factors.run_metadata(row.metadata_json),
                )
            )
        self.labels = {r.label for r in self.runs}

    def _held(self, run: _Run) -> set[str]:
        if run.held is None:
            C, PV, A = m.Capture.__table__, m.PublishedValue.__table__, m.Artefact.__table__
            records = self.s.execute(
                sa.select(sa.func.count()).select_from(C).where(C.c.run_id == run.key, C.c.record_count > 0)
            ).scalar()
            formats = self.s.scalars(
                sa.select(A.c.format)
                .distinct()
                .select_from(PV.join(A, A.c.id == PV.c.artefact_id))
                .where(PV.c.run_id == run.key, PV.c.flag == "reported", current(PV))
            ).all()
            run.held = ({RECORDS} if records else set()) | {f"{AGGREGATES} ({f})" for f in formats}
        return run.held

    def resolve(self, path: Path, pr: rec.ParsedRun, fmt: str) -> str:
        """The label ``pr`` (of a file of format ``fmt``) is written under: the one existing run it
        belongs to (the tool's other file of it, or a declared run), else a new run under its own
        label, or under a distinct one where a run of the batch holds that label already."""
        info = pr.info
        self._prepare(info)
        new = brings(pr, fmt)
        what = f"run {info.label!r} ({' and '.join(sorted(new)) or 'no values'})"
        folder = info.metadata.get(FOLDER) or folder_of(path)

        def free(r: _Run) -> bool:  # held only for candidates: two queries each, cached
            return r.id not in self.claimed and not (self._held(r) & new)

        if info.pairing is not None:
            found, why = [], ""
            for r, how in self._paired(info.pairing):
                theirs, ours = r.meta.get(REQUESTS), info.pairing.requests
                both = [
                    (k, r.meta[FACT.format(k)], v)
                    for k, v in sorted(info.pairing.facts.items())
                    if FACT.format(k) in r.meta
                ]
                if info.pairing.key is not None and r.meta.get(FOLDER, folder) != folder:
                    self.notes.append(
                        f"{path.name}: not paired with {r.shown()} ({how}): its file is in another "
                        f"folder ({r.meta[FOLDER]!r}, this one {folder!r})"
                    )
                elif not free(r):
                    self.notes.append(
                        f"{path.name}: not paired with {r.shown()} ({how}): "
                        f"it already holds {' and '.join(sorted(self._held(r) & new)) or 'this run'}"
                    )
                elif not _counts_agree(theirs, ours, bool(both), info.pairing.named_by_tool):
                    self.notes.append(
                        f"{path.name}: not paired with {r.shown()} ({how}): "
                        f"request counts {theirs or 'not stated'} there and {ours if ours is not None else 'not stated'} "
                        "in this file differ or are unknown" + ("" if both else ", and no other fact both state")
                    )
                elif differ := [(k, a, b) for k, a, b in both if a != b]:
                    self.notes.append(
                        f"{path.name}: not paired with {r.shown()} ({how}): "
                        + ", ".join(f"{k} {a!r} there and {b!r} in this file differ" for k, a, b in differ)
                    )
                else:
                    found.append(r)
                    agreed = [f"{k} {b!r}" for k, _, b in both]
                    counted = f"{info.pairing.requests} requests" if ours is not None else "no request count"
                    why = (
                        f"{how} and {counted}" + "".join(f", {a}" for a in agreed)
                        if info.pairing.key is not None
                        else f"{how}; both state {counted}" + "".join(f", {a}" for a in agreed)
                    )
            if found:
                return self._one(path, what, found, why if len(found) == 1 else _candidates_why(info.pairing))
        declared = [r for r in self.runs if r.declared and free(r)]
        if named := [r for r in declared if r.label == info.label]:  # the manifest declared this run by its label
            if contradicted := _differing(named[0], info):
                raise InputError(
                    f"{path}: {what} has the label of declared {named[0].shown()}, but "
                    + ", ".join(f"{k} {a!r} declared and {b!r} in this file differ" for k, a, b in contradicted)
                    + "; not attached: name the run with --run, or correct the declaration"
                )
            return self._one(path, what, named, "its label, declared in a manifest")
        matched = [r for r in declared if _agrees(r, info)]
        if matched:
            agreed = sorted({k for r in matched for k, (a, b) in _stated(r, info).items() if _same(a, b) is True})
            return self._one(
                path,
                what,
                matched,
                "declared workload (" + ", ".join(f"{k} {_stated(matched[0], info)[k][1]}" for k in agreed) + ")",
            )
        if declared:
            self.notes.append(
                f"{path.name}: {what} matches none of the {len(declared)} declared run(s) of batch "
                f"{self.batch_name!r} still free for it by workload; imported as a new run"
            )
        label = info.label
        if label in self.labels:
            label = self._distinct(path, info, folder)
        self.labels.add(label)
        self.new.add(label)
        self.runs.append(
            _Run(0, 0, label, False, info.tool, {k: getattr(info, k) for k in SETTINGS}, metadata_of(info), held=new)
        )  # a run of this import: what it brings, it holds
        return label

    def _distinct(self, path: Path, info: rec.RunInfo, folder: str) -> str:
        """A label for a new run whose file's label a run of the batch holds already: two results are
        two runs, whatever their labels say. The label gets what tells this run apart from that one:
        the factors the files state differently, else its folder, else a number."""
        if self.backend == "postgresql" and not self.locked:
            # imports choosing a distinct label take turns: each sees the labels the ones before it committed
            self._lock()
            R = m.Run.__table__
            self.labels.update(self.s.scalars(sa.select(R.c.label).where(R.c.batch_id == self.batch_id)))
        taken = next(r for r in reversed(self.runs) if r.label == info.label)
        ours, theirs = factors.of_metadata(info.metadata), factors.of_metadata(taken.meta)
        apart = [f"{SHORT.get(k, k)}={v.value}" for k, v in ours.items() if k in theirs and theirs[k].value != v.value]
        apart += [f"{SHORT.get(k, k)}={v.value}" for k, v in ours.items() if k not in theirs]
        tries = [" ".join(apart)] if apart else []
        if (there := taken.meta.get(FOLDER)) not in (None, folder):
            tries.append(f"({_apart(Path(folder), Path(there))})")
        label = next((f"{info.label} {t}" for t in tries if t and f"{info.label} {t}" not in self.labels), None)
        n = 2
        while label is None or label in self.labels:
            label, n = f"{info.label} #{n}", n + 1
        self.notes.append(
            f"{path.name}: run label {info.label!r} is taken by {taken.shown() if taken.id else 'a run of this import'};"
            f" this file's result is another run: labelled {label!r}"
        )
        return label

    def _paired(self, p: rec.Pairing) -> list[tuple[_Run, str]]:
        """The runs of the batch ``p`` points at, each with how: the same key, or a file name one of the
        two files names."""
        out = []
        for r in self.runs:
            if p.key is not None and r.meta.get(KEY) == p.key:
                out.append((r, f"same pairing key {p.key!r}"))
            elif p.names is not None and r.meta.get(FILE) is not None and names(p.names, r.meta[FILE]):
                out.append((r, f"file name: {r.meta[FILE]!r} there is the {p.names!r} this file names"))
            elif p.file is not None and r.meta.get(NAMES) is not None and names(r.meta[NAMES], p.file):
                out.append((r, f"file name: this file {p.file!r} is the {r.meta[NAMES]!r} named there"))
        return out

    def _one(self, path: Path, what: str, found: list[_Run], why: str) -> str:
        if len(found) > 1:
            raise Ambiguous(
                f"{path}: {what} could belong to {len(found)} runs of batch {self.batch_name!r} by {why}: "
                + ", ".join(r.shown() for r in found)
                + "; none was chosen: name one with --run LABEL"
            )
        run = found[0]
        self.claimed.add(run.id)
        self.notes.append(f"{path.name}: attached to {run.shown()} by {why}")
        return run.label


def _counts_agree(theirs: str | None, ours: int | None, facts: bool, named_by_tool: bool) -> bool:
    """The request counts two files of one run state: equal where both state one; where neither does,
    another fact both state (``facts``, compared after) must; a key the tool names its files by
    (``Pairing.named_by_tool``) pairs with a count one of them does not state."""
    if theirs is not None and ours is not None:
        return theirs == str(ours)
    return named_by_tool or (theirs is None and ours is None and facts)


def _candidates_why(p: rec.Pairing) -> str:
    if p.key is not None:
        return f"same pairing key {p.key!r} and {p.requests} requests"
    return (
        (f"the file name {p.names!r} this file names" if p.names is not None else f"this file's name {p.file!r}")
        + f", {p.requests} requests"
        + "".join(f", {k} {v!r}" for k, v in sorted(p.facts.items()))
    )


def folder_of(path: Path) -> str:
    """The folder a file sits in, as kept with its run (``file folder``): a tool writes the files of
    one run side by side, so files of two folders are never paired by a shared key."""
    return str(path.resolve().parent)


def _apart(folder: Path, other: Path) -> str:
    """The end of ``folder``'s path from the last part where it differs from ``other``'s: ``b/perf``
    for ``/x/b/perf`` beside ``/x/a/perf``."""
    ours, theirs = folder.parts, other.parts
    same = 0
    while same < min(len(ours), len(theirs)) and ours[-1 - same] == theirs[-1 - same]:
        same += 1
    return "/".join(ours[max(len(ours) - same - 1, 0) :]) or folder.name


def _stated(run: _Run, info: rec.RunInfo) -> dict[str, tuple[object, object]]:
    """Every setting the declared run and the file's run may state, as (declared, file): the workload
    columns, and the factors the file states against the column or factor they mean
    (trtllm-bench's average input length is an input length)."""
    ours = factors.of_metadata(info.metadata)
    theirs = factors.of_metadata(run.meta)
    out: dict[str, tuple[object, object]] = {k: (run.settings[k], getattr(info, k)) for k in SETTINGS}
    for key, column in FACTOR_SETTING.items():
        if key in ours:
            declared = theirs[key].value if key in theirs else run.settings[column] if column else None
            out[key] = (declared, ours[key].value)
    return out


def _differing(run: _Run, info: rec.RunInfo) -> list[tuple[str, object, object]]:
    return [(k, a, b) for k, (a, b) in _stated(run, info).items() if _same(a, b) is False]


def _same(a: object, b: object) -> bool | None:
    """Two stated settings agree (True), differ (False), or one is not stated (None)."""
    if a is None or b is None:
        return None
    if isinstance(a, str) or isinstance(b, str):
        try:  # request rates are texts: "inf", "4.0"
            fa, fb = float(str(a)), float(str(b))
            return fa == fb
        except ValueError:
            return str(a).strip().casefold() == str(b).strip().casefold()
    return Fraction(str(a)) == Fraction(str(b))


def _agrees(run: _Run, info: rec.RunInfo) -> bool:
    """A declared run agrees with a file's run: the tool does not differ, no setting either states
    (factors included) differs, and at least one agrees."""
    if run.tool is not None and info.tool is not None and _same(run.tool, info.tool) is False:
        return False
    verdicts = [_same(a, b) for a, b in _stated(run, info).values()]
    return False not in verdicts and True in verdicts
