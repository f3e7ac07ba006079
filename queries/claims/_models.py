"""The claims file: a source report and every number it publishes, each with how to check it.

A claims file (YAML, documented in docs/claims.md, JSON Schema in docs/claims.schema.json generated
from these models) names its source report and lists claims. Each claim is exactly one of:

* ``metric``: a registered metric over a scope, re-derived from the ledger's records;
* ``derived``: a formula over other claims or literal printed numbers, recomputed with intervals;
* ``quoted``: reported by another source, kept and shown, never re-derived;
* ``estimated``: computed from targets or assumptions: flagged, never verified;
* ``na``: not available, with its reason; a ``would_fill`` derivation is refused (R9).

Regenerate the schema with ``python -m bench_ledger.queries.claims --schema > docs/claims.schema.json``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from bench_ledger.errors import close_names
from bench_ledger.kinds import KINDS
from bench_ledger.queries.claims._locations import line_of
from bench_ledger.queries.claims._references import reference_problems
from bench_ledger.queries.values import FACTORS, Scope
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    field_validator,
    model_validator,
)

__all__ = [
    "VERDICTS",
    "Claim",
    "ClaimsFile",
    "Derived",
    "DraftInfo",
    "Estimated",
    "Formula",
    "LiteralNumber",
    "MetricOperand",
    "MetricSpec",
    "NotAvailable",
    "Quoted",
    "ScopeSpec",
    "SkippedNumber",
    "SourceReportRef",
    "claim_refs",
]

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
