"""Read and validate a claims file: every error at once, each with its claim id, YAML line and field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from bench_ledger.errors import InputError, ParseError, close_names, line_key
from bench_ledger.queries.claims._locations import TAGS, Problem, problem_at
from bench_ledger.queries.claims._models import (
    Claim,
    ClaimsFile,
    Derived,
    DraftInfo,
    Estimated,
    Formula,
    LiteralNumber,
    MetricOperand,
    MetricSpec,
    NotAvailable,
    Quoted,
    ScopeSpec,
    SkippedNumber,
    SourceReportRef,
)
from bench_ledger.queries.claims._references import reference_problems
from pydantic import (
    ValidationError,
)

__all__ = ["load_claims"]


def _plain(err: dict) -> str:
    """A pydantic error in plain words."""
    last = next((str(k) for k in reversed(err["loc"]) if not isinstance(k, int) and k not in TAGS), "value")
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


_NESTED_TOO_DEEPLY = "nested too deeply to read (beyond Python's recursion limit)"


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
            raise yaml.MarkedYAMLError(problem=_NESTED_TOO_DEEPLY, problem_mark=loader.get_mark()) from None
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
