"""The claims file: a source report and every number it publishes, each with how to check it.

A claims file (YAML, documented in docs/claims.md, JSON Schema in docs/claims.schema.json generated
from these models) names its source report and lists claims. Each claim is exactly one of:

* ``metric``: a registered metric over a scope, re-derived from the ledger's records;
* ``derived``: a formula over other claims or literal printed numbers, recomputed with intervals;
* ``quoted``: reported by another source, kept and shown, never re-derived;
* ``estimated``: computed from targets or assumptions: flagged, never verified;
* ``na``: not available, with its reason; a ``would_fill`` derivation is refused (R9).

Regenerate the schema with ``python -m queries.claims --schema > docs/claims.schema.json``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from bench_ledger.errors import InputError, ParseError, close_names, line_key
from bench_ledger.kinds import KINDS
from bench_ledger.queries.values import FACTORS, Scope
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

CLAIMS_VERSION = 1

Verdict = Literal[
    "reproduced",
    "consistent",
    "mismatch",
    "raw-mismatch",
    "not-derivable",
    "quoted",
    "estimated",
    "n/a-kept",
    "refused",
]
VERDICTS: tuple[str, ...] = Verdict.__args__  # type: ignore[attr-defined]
Op = Literal["ratio", "percent_change", "difference", "sum", "product", "convert", "divide", "range"]
Says = Literal["measured", "derived", "estimated", "reported"]


class _Model(BaseModel):
    """One base config for every model of the claims file: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=False)


def _check_kind(kind: str | None) -> str | None:
    if kind is not None and kind not in KINDS:
        raise ValueError(
            f"unknown quantity kind {kind!r}{close_names(kind, list(KINDS))}; known: {', '.join(sorted(KINDS))}"
        )
    return kind


def _check_factors(context: dict[str, str]) -> dict[str, str]:
    unknown = [k for k in context if k not in FACTORS]
    if unknown:
        raise ValueError(
            f"unknown factor(s) {', '.join(repr(k) for k in unknown)} in the context; factors: {', '.join(FACTORS)}"
        )
    return context


def _check_factor(name: str | None) -> str | None:
    if name is not None and name not in FACTORS:
        raise ValueError(f"unknown factor {name!r}; factors: {', '.join(FACTORS)}")
    return name


class SourceReportRef(_Model):
    """The report whose numbers the file lists."""

    slug: str = Field(description="stable identifier of the report (as declared in the ledger's manifest)")
    title: str = Field(description="the report's title as printed")
    file: str | None = Field(None, description="the report's text, relative to the claims file")
    language: str | None = Field(None, description="language of the report (en, zh, ...)")
    location: str | None = Field(None, description="where the report lives (URL, citation)")


class ScopeSpec(_Model):
    """What a metric is computed over: a batch, a run label within a batch, a deployment, or a
    launch attempt of a deployment (the contract's ``queries.values.Scope``)."""

    batch: str | None = Field(None, description="batch name; with `run`, the batch the run label belongs to")
    run: str | None = Field(None, description="run label within `batch` (or '#<id>')")
    deployment: str | None = Field(None, description="deployment name; with `launch`, the launch's deployment")
    launch: int | None = Field(None, description="launch attempt number within `deployment`")
    window: tuple[str, str] | None = Field(None, description="hardware window as two ISO timestamps")
    gpu: str | None = Field(None, description="one card for per-card hardware statistics ('node0:gpu3')")

    @model_validator(mode="after")
    def _subject(self) -> ScopeSpec:
        if self.batch is None and self.deployment is None:
            raise ValueError("a scope names a batch (optionally with a run) or a deployment (optionally with a launch)")
        if self.run is not None and self.batch is None:
            raise ValueError("a run label needs its batch")
        if self.launch is not None and self.deployment is None:
            raise ValueError("a launch attempt needs its deployment")
        return self

    def to_scope(self) -> Scope:
        return Scope(
            batch=self.batch,
            run=self.run,
            deployment=self.deployment,
            launch=self.launch,
            window=self.window,
            gpu=self.gpu,
        )

    def ref(self) -> str:
        """The scope as `ledger compare` names it: run:ID | batch:NAME | deployment:NAME."""
        if self.run is not None:
            return f"run:{self.batch}/{self.run}"
        if self.batch is not None:
            return f"batch:{self.batch}"
        if self.launch is not None:
            return f"launch:{self.deployment}/{self.launch}"
        return f"deployment:{self.deployment}"


class MetricSpec(_Model):
    """A metric claim: re-derive the number from the ledger's records."""

    name: str = Field(description="a metric registered in queries.metrics.METRICS")
    scope: ScopeSpec = Field(description="what the metric is computed over")
    over_cards: Literal["mean"] | None = Field(
        None,
        description="for a per-card hardware metric: the claim is the mean over the scope's cards of each "
        "card's value (a summary; the per-card values are kept as evidence)",
    )


class MetricOperand(_Model):
    """A metric used as an operand without being a claim of its own (a value the report does not
    print, e.g. the C32 point of a fall-back percentage)."""

    metric: str = Field(description="a metric registered in queries.metrics.METRICS")
    scope: ScopeSpec = Field(description="what the metric is computed over")
    kind: str = Field(description="its quantity kind (ledger.kinds)")
    unit: str | None = Field(None, description="the unit to use it in (default: the metric's own)")
    label: str | None = Field(None, description="what the value is, in words")
    context: dict[str, str] = Field(default_factory=dict, description="factors of its scope outside the ledger (R6)")

    _kind = field_validator("kind")(classmethod(lambda cls, v: _check_kind(v)))
    _context = field_validator("context")(classmethod(lambda cls, v: _check_factors(v)))


class LiteralNumber(_Model):
    """A number used as an operand without being a claim of its own (a GPU count, a factor 60),
    or a number the formula assumes but the report never printed (`value` omitted)."""

    value: str | None = Field(
        None, description="the number exactly as printed ('8', '510.31'); omitted when not printed"
    )
    unit: str | None = Field(None, description="its unit ('GB', 'tok/s', 'unconfirmed'...)")
    kind: str | None = Field(
        None, description="its quantity kind (ledger.kinds); may be omitted for an exact constant (kind `constant`)"
    )
    label: str | None = Field(None, description="what the number is, in words")
    context: dict[str, str] = Field(
        default_factory=dict,
        description="factors of the scope it was measured in (hardware, gpu_count, engine, seed, workload, batch...)",
    )
    flag: Says | None = Field(None, description="its provenance when not measured (reported, estimated)")
    exact: bool = Field(False, description="true for a definitional constant (60 s/min, 8 GPUs): no rounding interval")

    _kind = field_validator("kind")(classmethod(lambda cls, v: _check_kind(v)))
    _context = field_validator("context")(classmethod(lambda cls, v: _check_factors(v)))

    @model_validator(mode="after")
    def _kind_given(self) -> LiteralNumber:
        if self.kind is None and not self.exact:
            raise ValueError(
                "`kind` is missing: a literal number needs its quantity kind, unless it is an exact "
                "constant (`exact: true`)"
            )
        return self


def _operand_tag(v: Any) -> str | None:
    """Which kind of operand a value is, by its keys (so that an error names the right fields)."""
    if isinstance(v, str):
        return "claim"
    if isinstance(v, dict):
        return "formula" if "op" in v else "metric" if "metric" in v else "literal"
    for tag, cls in (("formula", "Formula"), ("metric", "MetricOperand"), ("literal", "LiteralNumber")):
        if type(v).__name__ == cls:
            return tag
    return None


Operand = Annotated[
    Union[  # noqa: UP007
        Annotated[str, Tag("claim")],
        Annotated[LiteralNumber, Tag("literal")],
        Annotated[MetricOperand, Tag("metric")],
        Annotated["Formula", Tag("formula")],
    ],
    Discriminator(
        _operand_tag,
        custom_error_type="operand",
        custom_error_message="an operand is a claim id, a literal {value, kind}, a metric "
        "{metric, scope, kind} or a formula {op, operands}",
    ),
]


class Formula(_Model):
    """An operation over operands: claim ids, literal numbers or nested formulas."""

    op: Op = Field(
        description="ratio a/b | percent_change (b-a)/a x 100 | difference a-b | sum | product | "
        "convert (one operand to the claim's unit) | divide (a by a count) | range (the printed "
        "range's ends are the smallest and largest operand)"
    )
    operands: list[Operand] = Field(
        description="claim ids (strings), literal numbers, metrics, or nested formulas; order matters for ratio, "
        "percent_change, difference and divide"
    )


class Derived(Formula):
    """A derived claim: a formula plus what the claim asserts about its result (type rules)."""

    attributes_to: str | None = Field(
        None, description="the factor the claim attributes the change or ratio to (hardware, weights_version...) (R6)"
    )
    claims_equal_resources: bool = Field(False, description="the claim presents the comparison as equal-resource (R6)")
    claims_paired: bool = Field(False, description="the claim presents the comparison as per-request paired (R6)")
    claims_speedup: bool = Field(False, description="the claim presents the ratio as a speed-up of one task (R7)")
    claims_cold_warm: bool = Field(False, description="the claim presents the comparison as a cold/warm A/B (R8)")
    series: bool = Field(False, description="the operands are presented as points of one series (R2)")
    from_unit: str | None = Field(None, description="for convert: the unit the claim assumes its operand had (R12)")

    _factor = field_validator("attributes_to")(classmethod(lambda cls, v: _check_factor(v)))


class Quoted(_Model):
    """A number reported by another source: kept and shown, never re-derived (R15)."""

    source: str = Field(description="where the number comes from (archived report, tool summary, earlier stage)")
    locator: str | None = Field(None, description="section, table or line in that source")


class Estimated(_Model):
    """A number computed from targets, assumptions or a model: flagged, never verified."""

    basis: str = Field(description="what it was estimated from")


class NotAvailable(_Model):
    """A value the report marks n/a: kept as n/a; filling it is refused (R9)."""

    reason: str = Field(description="why it is not available (not captured, only rounded summaries kept...)")
    would_fill: Formula | None = Field(
        None, description="a derivation that would fill it in; the audit shows it refused (R9)"
    )


class Claim(_Model):
    """One number of the report and how to check it. Exactly one of metric / derived / quoted /
    estimated / na."""

    id: str = Field(
        description="unique id within the file (letters, digits, '-', '_', '.')", pattern=r"^[A-Za-z0-9_.\-]+$"
    )
    text: str = Field(description="the claim as printed ('2,791', '约 86.9 倍', '1.77x-2.78x')")
    value: str | None = Field(
        None, description="the number as printed when `text` is prose; default: `text` itself. A range is two numbers"
    )
    unit: str | None = Field(None, description="unit of the number ('tokens/min', 's', 'GiB', '%', 'x'...)")
    kind: str = Field(description="quantity kind the number claims to be (ledger.kinds)")
    statement: str | None = Field(
        None, description="what the report (or the warned-against inference) says, in English"
    )
    locator: str | None = Field(None, description="where in the report (section, table row)")
    says: Says | None = Field(
        None, description="the provenance the report gives the number (an estimate never satisfies 'measured')"
    )
    count_of: int | None = Field(
        None, description="when the number is a mean or percentage of this many integer items: GRIM check"
    )
    context: dict[str, str] = Field(
        default_factory=dict,
        description="factors of the scope the number belongs to when it is not in the ledger "
        "(hardware, gpu_count, engine, engine_version, layout, workload, seed, batch...) (R6)",
    )
    metric: MetricSpec | None = Field(None, description="metric claim: re-derived from the records")
    derived: Derived | None = Field(None, description="derived claim: recomputed from its operands")
    quoted: Quoted | None = Field(None, description="quoted claim: reported elsewhere, kept")
    estimated: Estimated | None = Field(None, description="estimated claim: flagged, never verified")
    na: NotAvailable | None = Field(None, description="n/a claim with its reason")
    expected_verdict: Verdict | None = Field(None, description="the verdict the audit must give (pinned by tests)")
    expected_rule: str | None = Field(None, description="for an expected `refused`: the rule id (R1..R15)")
    note: str | None = Field(None, description="anything else worth showing next to the verdict")
    draft: bool = Field(
        False, description="proposed by `ledger claims draft` and not yet reviewed (docs/claims-draft.md)"
    )
    evidence: dict[str, Any] | None = Field(
        None,
        description="what the drafter saw: place, cues, confidence, candidates considered (never read by the audit)",
    )

    _kind = field_validator("kind")(classmethod(lambda cls, v: _check_kind(v)))
    _context = field_validator("context")(classmethod(lambda cls, v: _check_factors(v)))

    @model_validator(mode="after")
    def _one_basis(self) -> Claim:
        given = [k for k in ("metric", "derived", "quoted", "estimated", "na") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                f"claim {self.id!r}: exactly one of metric/derived/quoted/estimated/na, got {given or 'none'}"
            )
        return self

    @property
    def basis(self) -> str:
        return next(k for k in ("metric", "derived", "quoted", "estimated", "na") if getattr(self, k) is not None)

    @property
    def printed(self) -> str | None:
        """The number as printed, or None when the claim prints none (an inference, an n/a)."""
        return self.value if self.value is not None else self.text


class SkippedNumber(_Model):
    """A number-like token the drafter recognised and left out (a section number, a date...)."""

    text: str = Field(description="as printed")
    locator: str = Field(description="where in the report")
    why: str = Field(description="what it was recognised as")


class DraftInfo(_Model):
    """How a drafted claims file was produced (`ledger claims draft`); removed or kept after review."""

    generated_by: str = Field(description="the command that wrote the draft")
    report_sha256: str = Field(description="sha256 of the report's bytes the draft was made from")
    ledger: str | None = Field(None, description="the ledger the metric proposals were checked against")
    batches: list[str] = Field(default_factory=list, description="batches the metric proposals were limited to")
    coverage: dict[str, Any] = Field(
        default_factory=dict, description="numbers found, by proposed basis, by confidence"
    )
    skipped: list[SkippedNumber] = Field(default_factory=list, description="tokens left out, each with why")


class ClaimsFile(_Model):
    """A source report and the claims it makes."""

    version: Literal[1] = Field(description="format version of the claims file (this is version 1)")
    synthetic: bool = Field(False, description="true when the ledger the file is audited against holds synthetic data")
    source_report: SourceReportRef = Field(description="the report the numbers come from")
    draft: DraftInfo | None = Field(None, description="present in a file drafted by `ledger claims draft`")
    claims: list[Claim] = Field(description="every number of the report, one claim each")

    _node: Any = PrivateAttr(default=None)  # the YAML node tree it was read from (lines of errors)

    @model_validator(mode="after")
    def _references(self) -> ClaimsFile:
        problems = reference_problems([c.model_dump() for c in self.claims])
        if problems:
            raise ValueError("; ".join(msg for _i, _f, msg in problems))
        return self

    def line_of(self, loc: tuple) -> int | None:
        """The YAML line of a location ('claims', 3, 'metric', 'scope', 'run'), or of its nearest parent."""
        return line_of(self._node, loc)

    def by_id(self) -> dict[str, Claim]:
        return {c.id: c for c in self.claims}


Formula.model_rebuild()
Derived.model_rebuild()


def claim_refs(f: Formula) -> list[str]:
    """Every claim id a formula refers to, nested formulas included."""
    out: list[str] = []
    for o in f.operands:
        if isinstance(o, str):
            out.append(o)
        elif isinstance(o, Formula):
            out.extend(claim_refs(o))
    return out


def _walk_refs(f: Any, out: list[str]) -> None:
    for o in (f or {}).get("operands") or []:
        if isinstance(o, str):
            out.append(o)
        elif isinstance(o, dict) and "op" in o:
            _walk_refs(o, out)


def reference_problems(raw: list[Any]) -> list[tuple[int, str, str]]:
    """Duplicate ids, references to unknown claims or to the claim itself, cycles: every one, as
    (claim index, field, message), over claims as plain data (so a file with other errors is
    checked too)."""
    out: list[tuple[int, str, str]] = []
    ids = [c.get("id") if isinstance(c, dict) else None for c in raw]
    first: dict[str, int] = {}
    for i, cid in enumerate(ids):
        if cid is None:
            continue
        if cid in first:
            out.append((i, "id", f"duplicate claim id {cid!r} (claim {first[cid] + 1} has it too)"))
        else:
            first[cid] = i
    refs: dict[str, list[str]] = {}
    for i, c in enumerate(raw):
        if not isinstance(c, dict):
            continue
        for key, f in (("derived", c.get("derived")), ("na.would_fill", (c.get("na") or {}).get("would_fill"))):
            if not isinstance(f, dict):
                continue
            got: list[str] = []
            _walk_refs(f, got)
            for ref in got:
                if ref not in first:
                    out.append(
                        (i, f"{key}.operands", f"refers to unknown claim {ref!r}{close_names(ref, list(first))}")
                    )
                elif ref == c.get("id"):
                    out.append((i, f"{key}.operands", "refers to itself"))
            if key == "derived" and c.get("id") is not None:
                refs[c["id"]] = [r for r in got if r in first and r != c["id"]]
    seen: set[str] = set()

    def visit(cid: str, path: tuple[str, ...]) -> None:
        if cid in path:
            cycle = path[path.index(cid) :] + (cid,)
            if cycle[0] not in seen:
                seen.update(cycle)
                out.append(
                    (
                        first[cycle[0]],
                        "derived.operands",
                        f"claims refer to each other in a cycle: {' -> '.join(cycle)}",
                    )
                )
            return
        for ref in refs.get(cid, []):
            visit(ref, path + (cid,))

    for cid in refs:
        visit(cid, ())
    return out


def line_of(node: Any, loc: tuple) -> int | None:
    """The 1-based line of the YAML node at ``loc``, or of the deepest node on the way there."""
    if node is None:
        return None
    line = node.start_mark.line + 1
    for key in loc:
        child = None
        if isinstance(node, yaml.MappingNode):
            child = next((v for k, v in node.value if getattr(k, "value", None) == key), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and 0 <= key < len(node.value):
            child = node.value[key]
        if child is None:
            if isinstance(key, str) and key in _TAGS:
                continue  # a discriminator tag, not a key of the file
            break
        node, line = child, child.start_mark.line + 1
    return line


_TAGS = ("claim", "literal", "metric", "formula")


def field_path(loc: tuple) -> str:
    """('derived', 'operands', 1, 'literal', 'kind') -> 'derived.operands[1].kind'."""
    out = ""
    for key in loc:
        if isinstance(key, int):
            out += f"[{key}]"
        elif key in _TAGS and out.endswith("]"):
            continue
        else:
            out += ("." if out else "") + str(key)
    return out


def _plain(err: dict) -> str:
    """A pydantic error in plain words."""
    last = next((str(k) for k in reversed(err["loc"]) if not isinstance(k, int) and k not in _TAGS), "value")
    kind, msg = err["type"], err["msg"]
    if kind == "missing":
        return f"`{last}` is missing"
    if kind == "extra_forbidden":
        return f"`{last}` is not a field here{close_names(last, _all_fields()) or ' (misspelt?)'}"
    if msg.startswith(("Value error, ", "Assertion failed, ")):
        return msg.split(", ", 1)[1]
    shown = err.get("input")
    shown = "" if isinstance(shown, dict | list) or shown is None else f" (got {shown!r})"
    return f"`{last}`: {msg}{shown}"


def _all_fields() -> list[str]:
    models = (
        ClaimsFile,
        Claim,
        SourceReportRef,
        ScopeSpec,
        MetricSpec,
        MetricOperand,
        LiteralNumber,
        Formula,
        Derived,
        Quoted,
        Estimated,
        NotAvailable,
        DraftInfo,
        SkippedNumber,
    )
    return sorted({f for mdl in models for f in mdl.model_fields})


@dataclass(frozen=True)
class Problem:
    """One error of a claims file: where (claim, YAML line, field) and what, in plain words."""

    line: int | None
    claim: str | None
    field: str | None
    message: str

    def text(self) -> str:
        where = f"line {self.line}" if self.line else "?"
        who = f"claim {self.claim}" if self.claim else "file"
        return f"{where}: {who}" + (f", field {self.field}" if self.field else "") + f": {self.message}"


def problem_at(node: Any, raw: Any, loc: tuple, message: str) -> Problem:
    """A problem at a location of the file's data ('claims', i, ...)."""
    claim = None
    rest = loc
    if len(loc) >= 2 and loc[0] == "claims" and isinstance(loc[1], int):
        items = raw.get("claims") if isinstance(raw, dict) else None
        if isinstance(items, list) and loc[1] < len(items) and isinstance(items[loc[1]], dict):
            claim = str(items[loc[1]].get("id") or f"#{loc[1] + 1}")
        else:
            claim = f"#{loc[1] + 1}"
        rest = loc[2:]
    return Problem(line_of(node, loc), claim, field_path(rest) or None, message)


NESTED_TOO_DEEPLY = "nested too deeply to read (beyond Python's recursion limit)"


def _compose_and_load(text: str) -> tuple[Any, Any]:
    """The YAML's node tree (for line numbers) and its data, parsed once: what ``yaml.compose`` and
    ``yaml.safe_load`` give, the data constructed from the same nodes (the file was parsed twice).

    Parsed by libyaml where PyYAML has it (``CSafeLoader``: the same nodes and marks, the same safe
    constructor; the case study's claims file 0.11 -> 0.02 s); a file it refuses is parsed again by
    the pure-Python loader, whose error message (or data) is the one reported."""
    refused: yaml.YAMLError | None = None
    for loader_class in dict.fromkeys((getattr(yaml, "CSafeLoader", yaml.SafeLoader), yaml.SafeLoader)):
        loader = loader_class(text)
        try:
            node = loader.get_single_node()
            return node, (loader.construct_document(node) if node is not None else None)
        except yaml.YAMLError as exc:
            if loader_class is yaml.SafeLoader:
                raise
            refused = exc
        except RecursionError:
            # the pure-Python composer recurses per level; libyaml refused the file first, saying where
            # nesting passed its limit: that is the answer
            if refused is not None:
                raise refused from None
            raise yaml.MarkedYAMLError(problem=NESTED_TOO_DEEPLY, problem_mark=loader.get_mark()) from None
        finally:
            loader.dispose()
    raise AssertionError("unreachable")  # pragma: no cover


def load_claims(path: str | Path) -> ClaimsFile:
    """Read and validate a claims file. Every error at once (:class:`ClaimsInvalid`), each with
    its claim id, YAML line and field in plain words."""
    from bench_ledger.errors import ClaimsInvalid

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        node, data = _compose_and_load(text)
    except yaml.MarkedYAMLError as exc:
        if exc.problem_mark is None:
            raise InputError(f"{path}: cannot read claims file: {exc}") from None
        line = exc.problem_mark.line
        raise ParseError(
            path,
            f"line {line + 1} column {exc.problem_mark.column + 1}",
            line_key(text.split("\n", line + 1)[line]),
            f"{exc.problem}" + (f" ({exc.context})" if exc.context else ""),
        ) from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise InputError(f"{path}: cannot read claims file: {exc}") from None
    problems: list[Problem] = []
    raw_claims = data.get("claims") if isinstance(data, dict) else None
    if isinstance(raw_claims, list):
        problems += [
            problem_at(node, data, ("claims", i, *field.split(".")), msg)
            for i, field, msg in reference_problems(raw_claims)
        ]
    try:
        cf = ClaimsFile.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors():
            if err["loc"] == () and problems:
                continue  # the reference problems, already listed one by one
            problems.append(problem_at(node, data, tuple(err["loc"]), _plain(dict(err))))
        cf = None
    if problems:
        problems.sort(key=lambda p: p.line or 0)
        raise ClaimsInvalid(path, [p.text() for p in problems])
    assert cf is not None
    cf._node = node
    return cf


def claims_schema() -> dict:
    """The JSON Schema of the claims file, as published in docs/claims.schema.json."""
    schema = ClaimsFile.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://bench-ledger.invalid/claims.schema.json"
    return schema


def schema_text() -> str:
    return json.dumps(claims_schema(), indent=2, ensure_ascii=False) + "\n"


GENERATED = ("lattice", "kinds")


def generated_block(name: str) -> str:
    """A table docs/claims.md embeds, generated from the code (queries.lattice, queries.kind_algebra)."""
    from bench_ledger.queries import kind_algebra, lattice

    body = {"lattice": lattice.markdown, "kinds": kind_algebra.markdown}[name]()
    return (
        f"<!-- generated:{name} (python -m bench_ledger.queries.claims --docs docs/claims.md) -->\n{body}"
        f"<!-- /generated:{name} -->"
    )


def update_docs(text: str) -> str:
    """``text`` with every generated block replaced by the current one."""
    import re

    def _constant(block: str) -> Callable[[re.Match[str]], str]:
        return lambda _m: block  # a function, so that backslashes in the block stay literal

    for name in GENERATED:
        pattern = re.compile(rf"<!-- generated:{name} .*?<!-- /generated:{name} -->", re.S)
        text = pattern.sub(_constant(generated_block(name)), text)
    return text


if __name__ == "__main__":  # pragma: no cover
    if sys.argv[1:] == ["--schema"]:
        sys.stdout.write(schema_text())
    elif len(sys.argv) == 3 and sys.argv[1] == "--docs":
        doc = Path(sys.argv[2])
        doc.write_text(update_docs(doc.read_text(encoding="utf-8")), encoding="utf-8")
    else:
        sys.stderr.write(
            "usage: python -m bench_ledger.queries.claims --schema > docs/claims.schema.json\n"
            "       python -m bench_ledger.queries.claims --docs docs/claims.md\n"
        )
        sys.exit(2)
