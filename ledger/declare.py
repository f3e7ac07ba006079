"""The declaration manifest: describe the system under test once, then import runs into it.

A manifest is a small YAML file (documented in docs/manifest.md) with four optional lists:
``source_reports``, ``deployments`` (each with its ``launches``), ``batches`` and ``runs``.
Declaring is idempotent: an entity that exists with the same content is left alone; one that
exists with different content is an error (a correction is a new revision, not an edit, R10).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import rfc8785
import sqlalchemy as sa
import yaml
from bench_ledger import models as m
from bench_ledger.errors import InputError, NotFound, Refused
from bench_ledger.records import RUN_DOMAINS, request_rate_text
from bench_ledger.store import Ledger, now
from bench_ledger.units import parse_quantity
from bench_ledger.vocab import WarmState
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

__all__ = ["declare", "load_manifest", "manifest_schema"]


class _Item(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SourceReportDecl(_Item):
    slug: str = Field(description="short stable identifier")
    title: str = Field(description="title as published")
    date: dt.date | None = Field(None, description="publication date")
    author: str | None = Field(None, description="author or series")
    language: str | None = Field(None, description="e.g. en, zh")
    file: str | None = Field(None, description="the report's text, relative to the manifest; hashed")
    location: str | None = Field(None, description="where the report lives (URL, citation)")


class LaunchDecl(_Item):
    attempt: int = Field(description="attempt number, 1 for the first start of this deployment")
    outcome: Literal["ready", "failed", "unknown"] = Field(description="did the engine reach READY")
    cause: str | None = Field(None, description="cause of failure or the change made")
    seconds_to_ready: Decimal | None = Field(None, description="as reported elsewhere; logs give the measured one")
    log: str | None = Field(None, description="server log of this attempt, relative to the manifest")
    label: str | None = Field(
        None,
        description="the launch as the benchmark tool's output names it (run.metadata.launch: "
        "an inference-perf report folder, a vLLM sweep SERVE setting), so its runs find it",
    )


# Fields of a deployment that change its identity (hashed into the comparability fingerprint).
IDENTITY_FIELDS = (
    "gpu_model",
    "gpus_per_node",
    "nodes",
    "gpu_memory",
    "interconnect_intra",
    "interconnect_inter",
    "engine",
    "engine_version",
    "model",
    "weights_version",
    "shards",
    "size_on_disk",
    "tp",
    "dp",
    "ep",
    "pp",
    "kv_cache_dtype",
    "prefix_caching",
    "max_num_seqs",
    "max_model_len",
    "chunked_prefill_tokens",
    "speculative_method",
    "speculative_tokens",
    "kernel_backend",
)


class DeploymentDecl(_Item):
    name: str = Field(description="unique name of the system under test")
    gpu_model: str | None = Field(None, description="GPU model as reported, e.g. H20")
    gpus_per_node: int | None = Field(None, description="GPUs used per node")
    nodes: int | None = Field(None, description="number of nodes")
    gpu_memory: str | None = Field(None, description="as reported, with its unit: '97871 MiB'")
    interconnect_intra: str | None = Field(None, description="interconnect inside a node")
    interconnect_inter: str | None = Field(
        None, description="interconnect between nodes (a port count is not a bandwidth)"
    )
    engine: str | None = Field(None, description="serving engine, e.g. vllm, sglang")
    engine_version: str | None = Field(None, description="version or image")
    model: str | None = Field(None, description="model name")
    weights_version: str | None = Field(None, description="weights version or revision")
    shards: int | None = Field(None, description="number of weight shards")
    size_on_disk: str | None = Field(None, description="with its unit: '510.31 GB'")
    tp: int | None = Field(None, description="tensor parallel size")
    dp: int | None = Field(None, description="data parallel size")
    ep: int | None = Field(None, description="expert parallel size")
    pp: int | None = Field(None, description="pipeline parallel size")
    kv_cache_dtype: str | None = Field(None, description="KV cache data type, e.g. fp8")
    prefix_caching: bool | None = Field(None, description="prefix caching enabled")
    max_num_seqs: int | None = Field(None, description="scheduling slots per engine")
    max_model_len: int | None = Field(None, description="context window in tokens")
    chunked_prefill_tokens: int | None = Field(None, description="chunked-prefill budget (max-num-batched-tokens)")
    speculative_method: str | None = Field(None, description="speculative decoding method")
    speculative_tokens: int | None = Field(None, description="speculative tokens per step")
    kernel_backend: str | None = Field(None, description="kernel or attention backend, e.g. marlin")
    note: str | None = Field(None, description="free text; not part of the identity")
    launches: list[LaunchDecl] = Field(default_factory=list, description="engine start attempts")

    def fingerprint(self) -> str:
        """sha256 of the RFC 8785 canonical JSON of the identity fields."""
        identity = {k: getattr(self, k) for k in IDENTITY_FIELDS}
        return hashlib.sha256(rfc8785.dumps(identity)).hexdigest()


class BatchDecl(_Item):
    name: str = Field(description="unique batch name, e.g. fx")
    description: str | None = Field(None, description="what this accounting of measurements is")
    deployment: str | None = Field(None, description="the deployment its runs measured")


class WarmDecl(_Item):
    prefix_cache: WarmState = Field("unknown", description="prefix (KV) cache state")
    process: WarmState = Field("unknown", description="engine process freshly started or not")
    compile: WarmState = Field("unknown", description="JIT / autotune / compile caches")
    file_cache: WarmState = Field("unknown", description="OS page cache of the weights")


# a declared setting's domain is the one a tool's file is held to (ledger.records.RUN_DOMAINS)
_IN, _OUT, _CONCURRENCY, _REQUESTS, _SEED = (
    RUN_DOMAINS[k].pydantic()
    for k in ("input_target_tokens", "output_cap_tokens", "concurrency", "request_count", "seed")
)


class RunDecl(_Item):
    batch: str = Field(description="batch the run belongs to")
    label: str = Field(description="run label, unique within its batch")
    deployment: str | None = Field(None, description="defaults to the batch's deployment")
    input_target_tokens: _IN | None = Field(None, description="input length setting (not an actual length, R3)")  # type: ignore[valid-type]  # a domain's Annotated type
    output_cap_tokens: _OUT | None = Field(None, description="output cap setting (not an actual length, R3)")  # type: ignore[valid-type]  # a domain's Annotated type
    concurrency: _CONCURRENCY | None = Field(None, description="client concurrency C")  # type: ignore[valid-type]  # a domain's Annotated type
    request_count: _REQUESTS | None = Field(None, description="requests N")  # type: ignore[valid-type]  # a domain's Annotated type
    request_rate: str | float | None = Field(
        None,
        description="requests per second: a number > 0 (kept as written; quote it to keep its digits, '2.50'), or inf",
    )
    seed: _SEED | None = Field(None, description="workload seed (paired comparisons need the same, R6)")  # type: ignore[valid-type]  # a domain's Annotated type
    dataset: str | None = Field(None, description="dataset name")
    tool: str | None = Field(None, description="benchmark tool")
    warm: WarmDecl = Field(default_factory=WarmDecl, description="warm state, four separate things (R8)")

    @field_validator("request_rate", mode="before")
    @classmethod
    def _rate(cls, value: object) -> str | None:
        """A number (YAML 2.0, 4, .inf) or a text (\"2.50\", inf): stored as text (records.request_rate_text)."""
        if value is None:
            return None
        if type(value) is float:
            value = "inf" if value == float("inf") else repr(value)
        elif type(value) is int:
            value = str(value)
        if not isinstance(value, str):
            raise ValueError(f"expected a number or inf, got {value!r:.40}")
        return request_rate_text(value)


class Manifest(_Item):
    version: Literal[1] = Field(1, description="manifest format version")
    synthetic: bool = Field(False, description="the data this manifest describes is synthetic")
    source_reports: list[SourceReportDecl] = Field(default_factory=list, description="documents that publish numbers")
    deployments: list[DeploymentDecl] = Field(default_factory=list, description="systems under test")
    batches: list[BatchDecl] = Field(default_factory=list, description="accountings of measurements")
    runs: list[RunDecl] = Field(default_factory=list, description="load points")


class _Loader(yaml.SafeLoader):
    """YAML as safe_load reads it, except a float that is not finite unless written so: ``.inf`` is an
    infinity, but ``1.0e+309`` (beyond a double) and ``.nan`` stay their text, which the fields refuse
    as written instead of reading the file as saying infinity."""

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float | str:  # type: ignore[override]
        value = super().construct_yaml_float(node)
        text = str(node.value).replace("_", "").lower().lstrip("+")
        return value if value == value and (abs(value) != float("inf") or text.lstrip("-") == ".inf") else node.value


_Loader.add_constructor("tag:yaml.org,2002:float", _Loader.construct_yaml_float)


def load_manifest(path: Path) -> Manifest:
    try:
        text = path.read_text(encoding="utf-8")
        data = yaml.load(text, Loader=_Loader)  # noqa: S506  # a SafeLoader (above)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise InputError(f"{path}: {exc}") from None
    try:
        return Manifest.model_validate(data or {})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        line = _line_of(text, first["loc"])
        place = f"{path}, line {line}" if line is not None else str(path)
        raise InputError(f"{place}: {where}: {first['msg'].removeprefix('Value error, ')}") from None


def _line_of(text: str, loc: tuple) -> int | None:
    """The 1-based line of the YAML node at ``loc`` (keys and list indexes), or of the deepest one found."""
    node: yaml.Node | None = yaml.compose(text, Loader=_Loader)
    line = None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            node = next((v for k, v in node.value if k.value == str(part)), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
        else:
            break
        if node is None:
            break
        line = node.start_mark.line + 1
    return line


def _split(text: str | None) -> tuple[Decimal | None, str | None]:
    return (None, None) if text is None else parse_quantity(text)


def _same_revision_or_refuse(kind: str, name: str, revisions: Sequence[Any], wanted: dict) -> bool:
    """:func:`_same_or_refuse` for a correctable row (run, launch) given all its revisions: declaring it again
    is unchanged when its first declaration or its latest revision matches (a correction is a new revision,
    R10); otherwise the first declaration names the difference."""
    ordered = sorted(revisions, key=lambda row: row.revision)
    if not _differences(_cols(ordered[-1]), wanted):
        return True
    return _same_or_refuse(kind, name, _cols(ordered[0]), wanted)


def _differences(existing: dict, wanted: dict) -> list[str]:
    return sorted(k for k in wanted if existing.get(k) != wanted[k])


def _same_or_refuse(kind: str, name: str, existing: dict, wanted: dict) -> bool:
    """True when the stored entity already matches; a different one is refused (R10)."""
    diff = _differences(existing, wanted)
    if not diff:
        return True
    raise Refused(
        "R10",
        f"redeclare {kind} {name!r} with different {', '.join(diff)}",
        "declared entities are not edited in place",
        f"declare a new {kind} under another name, or record a correction",
    )


class Declared(BaseModel):
    """What `declare` did, and the launch logs it leaves for the importers."""

    created: dict[str, int] = Field(default_factory=dict)
    unchanged: dict[str, int] = Field(default_factory=dict)
    launch_logs: list[tuple[str, int, Path]] = Field(default_factory=list, description="(deployment, attempt, log)")


def confined(base: Path, relative: str, where: str) -> Path:
    """``base / relative``, refused unless it is an existing file inside ``base`` (the manifest's
    folder): an absolute path, ``..`` or a symlink leading out is not read."""
    path = base / relative
    root = base.resolve()
    if not path.resolve().is_relative_to(root):
        raise InputError(
            f"manifest {where}: {relative!r} is outside the manifest's folder {root}: name a file inside it"
        )
    if not path.is_file():
        raise InputError(f"manifest {where}: {relative!r}: no such file in {root}")
    return path


def declare(ledger: Ledger, manifest: Manifest, base: Path) -> Declared:
    """Record a manifest in one transaction. The files it names (a report's ``file``, a launch's
    ``log``) must lie inside ``base``, the manifest's folder (:func:`confined`)."""
    out = Declared()
    for i, rep in enumerate(manifest.source_reports):
        if rep.file:
            confined(base, rep.file, f"source_reports.{i}.file")
    for i, dep in enumerate(manifest.deployments):
        for j, la in enumerate(dep.launches):
            if la.log:
                confined(base, la.log, f"deployments.{i}.launches.{j}.log")

    def tally(kind: str, created: bool) -> None:
        bucket = out.created if created else out.unchanged
        bucket[kind] = bucket.get(kind, 0) + 1

    with ledger.session() as s:
        for rep in manifest.source_reports:
            digest = hashlib.sha256((base / rep.file).read_bytes()).hexdigest() if rep.file else None
            wanted: dict[str, Any] = dict(
                title=rep.title,
                published_on=rep.date,
                author=rep.author,
                language=rep.language,
                text_sha256=digest,
                location=rep.location,
            )
            row = s.scalar(sa.select(m.SourceReport).where(m.SourceReport.slug == rep.slug))
            if row is None:
                s.add(m.SourceReport(slug=rep.slug, recorded_at=now(), **wanted))
            tally("source_report", row is None or not _same_or_refuse("source report", rep.slug, _cols(row), wanted))

        for dep in manifest.deployments:
            mem, mem_unit = _split(dep.gpu_memory)
            size, size_unit = _split(dep.size_on_disk)
            fields = dep.model_dump(exclude={"name", "launches", "gpu_memory", "size_on_disk"})
            wanted = dict(
                fields,
                gpu_memory=mem,
                gpu_memory_unit=mem_unit,
                size_on_disk=size,
                size_on_disk_unit=size_unit,
                fingerprint=dep.fingerprint(),
            )
            dep_row = s.scalar(sa.select(m.Deployment).where(m.Deployment.name == dep.name))
            if dep_row is None:
                dep_row = m.Deployment(name=dep.name, recorded_at=now(), **wanted)
                s.add(dep_row)
                s.flush()
                tally("deployment", True)
            else:
                tally("deployment", not _same_or_refuse("deployment", dep.name, _cols(dep_row), wanted))
            for la in dep.launches:
                existing = s.scalars(
                    sa.select(m.Launch).where(m.Launch.deployment_id == dep_row.id, m.Launch.attempt == la.attempt)
                ).all()
                wanted_l = dict(
                    outcome=la.outcome, cause=la.cause, seconds_to_ready=la.seconds_to_ready, label=la.label
                )
                if not existing:
                    s.add(
                        m.Launch(
                            deployment_id=dep_row.id,
                            attempt=la.attempt,
                            recorded_at=now(),
                            seconds_to_ready_flag="reported" if la.seconds_to_ready is not None else "n/a",
                            **wanted_l,
                        )
                    )
                    tally("launch", True)
                else:
                    name = f"{dep.name}#{la.attempt}"
                    tally("launch", not _same_revision_or_refuse("launch", name, existing, wanted_l))
                if la.log:
                    out.launch_logs.append((dep.name, la.attempt, base / la.log))

        s.flush()
        for b in manifest.batches:
            dep_id = Ledger.get_deployment(s, b.deployment).id if b.deployment else None
            wanted = dict(description=b.description, deployment_id=dep_id)
            batch_row = s.scalar(sa.select(m.Batch).where(m.Batch.name == b.name))
            if batch_row is None:
                s.add(m.Batch(name=b.name, status="open", created_at=now(), **wanted))
            tally("batch", batch_row is None or not _same_or_refuse("batch", b.name, _cols(batch_row), wanted))

        s.flush()
        for r in manifest.runs:
            try:
                batch = Ledger.get_batch(s, r.batch)
            except NotFound:
                raise InputError(
                    f"run {r.label!r} names batch {r.batch!r}, which is neither declared nor in the ledger"
                ) from None
            if batch.status == "closed":
                raise Refused(
                    "R10",
                    f"declare run {r.label!r} in batch {batch.name!r}",
                    "the batch is closed",
                    "declare a new batch",
                )
            dep_id = Ledger.get_deployment(s, r.deployment).id if r.deployment else batch.deployment_id
            wanted = run_fields(r, dep_id)
            runs = s.scalars(sa.select(m.Run).where(m.Run.batch_id == batch.id, m.Run.label == r.label)).all()
            if not runs:
                s.add(m.Run(batch_id=batch.id, label=r.label, recorded_at=now(), **wanted))
            tally("run", not runs or not _same_revision_or_refuse("run", r.label, runs, wanted))
    return out


def run_fields(r: RunDecl, deployment_id: int | None) -> dict:
    return dict(
        deployment_id=deployment_id,
        input_target_tokens=r.input_target_tokens,
        output_cap_tokens=r.output_cap_tokens,
        concurrency=r.concurrency,
        request_count=r.request_count,
        request_rate=r.request_rate,
        seed=r.seed,
        dataset=r.dataset,
        tool=r.tool,
        warm_prefix_cache=r.warm.prefix_cache,
        warm_process=r.warm.process,
        warm_compile=r.warm.compile,
        warm_file_cache=r.warm.file_cache,
    )


def _cols(row: m.Base) -> dict:
    return {c.key: getattr(row, c.key) for c in sa.inspect(row).mapper.column_attrs}


def manifest_schema() -> str:
    """The manifest's JSON Schema, generated from the models (published as docs/manifest.schema.json)."""
    return json.dumps(Manifest.model_json_schema(), indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":  # pragma: no cover
    import sys

    if sys.argv[1:] == ["--schema"]:
        sys.stdout.write(manifest_schema())
    else:
        sys.stderr.write("usage: python -m ledger.declare --schema > docs/manifest.schema.json\n")
        sys.exit(2)
