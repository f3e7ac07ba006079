"""Helpers shared by the importers of benchmark-tool files (AIPerf, GenAI-Perf, llmperf, guidellm).

Why a shared module: these four tools are all Python and write JSON, so the same questions come up
in each importer — how to keep a printed number exactly as printed (``repr(float)`` reproduces the
token Python wrote), how to turn seconds or milliseconds into integer nanoseconds without float
rounding, how to name a JSON path in an error, and how to turn per-request rows into the column
lists of :class:`ledger.records.RequestColumns`. Keeping one answer here keeps the four consistent.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Literal, TypeGuard, overload

from bench_ledger.errors import ParseError
from bench_ledger.importers.base import NS_PER_S, seconds_ns
from bench_ledger.kinds import check_kind
from bench_ledger.records import FIELD_COLUMN, Published, RequestColumns, Stated, text_violation
from bench_ledger.units import printed_places

__all__ = [
    "AIPERF_MARKERS",
    "ENGINE_BACKENDS",
    "TIME_UNITS",
    "TOKEN_UNITS",
    "as_dict",
    "build_columns",
    "distinct_served",
    "factor_text",
    "has_key",
    "head_text",
    "integer",
    "is_number",
    "jpath",
    "kind_for_unit",
    "mapping",
    "ns_gap_s",
    "number",
    "placeholder",
    "present_fields",
    "published",
    "sequence",
    "stated",
    "to_ns",
    "to_seconds",
    "walk_metric_objects",
    "whole",
]

# Time units as the tools print them, in seconds. Anything else is refused, never guessed.
TIME_UNITS: dict[str, Decimal] = {
    "ns": Decimal("1e-9"),
    "us": Decimal("1e-6"),
    "µs": Decimal("1e-6"),
    "ms": Decimal("0.001"),
    "s": Decimal(1),
    "sec": Decimal(1),
    "secs": Decimal(1),
    "seconds": Decimal(1),
}
TOKEN_UNITS = frozenset({"tokens", "token", "tok"})

# Keys only AIPerf's aggregate JSON writes: GenAI-Perf's summary has the same metric-object shape,
# so these keys are what keeps the two sniffs apart.
AIPERF_MARKERS = ("benchmark_duration", "error_summary", "aiperf_version", "loadgen", "telemetry_data")

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# --- paths and errors -------------------------------------------------------------------------


def jpath(*parts: str | int) -> str:
    """A JSON path for error messages and locators: ``$.a.b[3]``, ``$['localhost:9401']``."""
    out = "$"
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _IDENT.match(part):
            out += f".{part}"
        else:
            out += f"[{part!r}]"
    return out


def is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@overload
def number(path: Path, where: str, field: str | None, value: object, *, optional: Literal[False]) -> float | int: ...
@overload
def number(
    path: Path, where: str, field: str | None, value: object, *, optional: bool = True
) -> float | int | None: ...
def number(path: Path, where: str, field: str | None, value: object, *, optional: bool = True) -> float | int | None:
    """A JSON number (or None when optional); anything else is a ParseError naming the field."""
    if value is None and optional:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > sys.float_info.max:
        raise ParseError(path, where, field, f"a {value.bit_length()}-bit integer: beyond the range of a double")
    if is_number(value):
        return value
    raise ParseError(path, where, field, f"expected a number, got {value!r}")


@overload
def integer(path: Path, where: str, field: str | None, value: object, *, optional: Literal[False]) -> int: ...
@overload
def integer(path: Path, where: str, field: str | None, value: object, *, optional: bool = True) -> int | None: ...
def integer(path: Path, where: str, field: str | None, value: object, *, optional: bool = True) -> int | None:
    """A whole number. llmperf writes with ``default=str``, so ``"550"`` is accepted as 550."""
    if value is None and optional:
        return None
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ParseError(path, where, field, f"expected an integer, got {value!r}")


def whole(value: object) -> int | None:
    """A whole number from optional configuration, else None (config layouts are not validated)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value if isinstance(value, int) else None


def mapping(path: Path, where: str, field: str | None, value: object, *, optional: bool = False) -> dict:
    if value is None and optional:
        return {}
    if not isinstance(value, dict):
        raise ParseError(path, where, field, f"expected an object, got {_kind(value)}")
    return value


def as_dict(value: object) -> dict[str, Any]:
    """An optional JSON object from a layout that is not validated: the object, else ``{}``."""
    return value if isinstance(value, dict) else {}


def sequence(path: Path, where: str, field: str | None, value: object, *, optional: bool = False) -> list:
    if value is None and optional:
        return []
    if not isinstance(value, list):
        raise ParseError(path, where, field, f"expected a list, got {_kind(value)}")
    return value


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, (dict, list)):
        return {dict: "an object", list: "a list"}[type(value)]
    return repr(value)


# --- exact numbers ----------------------------------------------------------------------------


def exact(value: float | int | str) -> Decimal:
    """The exact decimal of a printed number: ``repr(float)`` is the token Python printed."""
    return Decimal(value if isinstance(value, str) else repr(value))


def to_ns(value: float | int | None, unit_s: Decimal = Decimal(1)) -> int | None:
    """A printed time in ``unit_s`` seconds as integer nanoseconds, by Decimal arithmetic (no float multiply):
    the importers' one rule, :func:`bench_ledger.importers.base.seconds_ns` (exact, truncated toward zero)."""
    if value is None:
        return None
    return seconds_ns(exact(value) * unit_s)


def to_seconds(value: float | int | None, unit_s: Decimal) -> float | None:
    """A duration in ``unit_s`` seconds as float seconds, scaled exactly before the one rounding."""
    if value is None:
        return None
    if unit_s == 1:
        return float(value)
    return float(exact(value) * unit_s)


def ns_gap_s(later: int | None, earlier: int | None) -> float | None:
    """Seconds between two integer-ns times (exact difference, one rounding to float)."""
    if later is None or earlier is None:
        return None
    return float(Decimal(later - earlier) / NS_PER_S)


# --- published values -------------------------------------------------------------------------


def published(
    key: str,
    raw: object,
    *,
    locator: str,
    unit: str | None,
    kind: str | None,
    note: str | None = None,
) -> Published | None:
    """A tool's printed aggregate as a ``reported`` Published; None for values that are not numbers.

    The one reading of a printed aggregate, for every importer. ``null``, NaN and infinities become
    ``n/a`` rows that keep the token the file holds (``NaN``, ``Infinity``: Python's json writes them);
    a numeric string such as llmperf's ``"550"`` keeps its text. Booleans, objects and lists are not
    aggregates. The precision is :func:`bench_ledger.units.printed_places` of the text.
    """
    if kind is not None:
        check_kind(kind)
    common = {"key": key, "unit": unit, "quantity_kind": kind, "locator": locator, "note": note}
    if raw is None:
        return Published(text="null", flag="n/a", na_reason="the tool wrote null", **common)
    if isinstance(raw, bool) or isinstance(raw, (dict, list)):
        return None
    if isinstance(raw, float) and not math.isfinite(raw):
        token = "NaN" if math.isnan(raw) else ("Infinity" if raw > 0 else "-Infinity")
        return Published(text=token, flag="n/a", na_reason=f"the tool wrote {token}", **common)
    if is_number(raw):
        text = repr(raw) if isinstance(raw, float) else str(raw)
    elif isinstance(raw, str):
        text = raw
        try:
            value = Decimal(raw.strip())
        except InvalidOperation:
            # kept with its kind: the records contract refuses a reported value of a kind without a number
            return Published(text=text, value=None, flag="reported", **common)
        if not value.is_finite():
            return Published(text=text, flag="n/a", na_reason=f"the tool wrote {raw!r}", **common)
        return Published(text=text, value=value, precision=printed_places(text), flag="reported", **common)
    else:
        return None
    return Published(text=text, value=Decimal(text), precision=printed_places(text), flag="reported", **common)


def placeholder(p: Published, reason: str) -> Published:
    """``p`` as n/a: the tool wrote a fixed value where it measured nothing (``reason`` names the tool's
    placeholder); the text stays as printed."""
    return p.model_copy(update={"flag": "n/a", "value": None, "precision": None, "na_reason": reason})


def kind_for_unit(name: str, unit: str | None) -> str:
    """Quantity kind of a per-metric statistic from its name and the unit the file states.

    Used for AIPerf and GenAI-Perf summaries, whose files carry a unit per metric.
    """
    low = name.lower()
    u = (unit or "").strip().lower()
    if u in TIME_UNITS:
        return "duration" if "duration" in low else "latency"
    if u in TOKEN_UNITS:
        return "token_count"
    if "token" in u and "/" in u:
        per_stream = "user" in u or "per_user" in low or "per_request" in low
        return "per_stream_token_rate" if per_stream else "aggregate_token_rate"
    if u.startswith("request") and "/" in u:
        return "request_rate"
    if u in {"requests", "request", "count"} or low.endswith("request_count"):
        return "request_count"
    if u == "w":
        return "power"
    if u in {"°c", "c", "celsius"}:
        return "temperature"
    if u in {"mhz", "ghz"}:
        return "clock_frequency"
    if u == "%":
        return "utilization_percent"
    if u in {"gb", "gib", "mb", "mib"}:
        return "device_memory"
    return "other"


def stat_dict_published(
    stats: Mapping[str, Any], parts: Sequence[str], stat_keys: Iterable[str] | None = None
) -> list[Published]:
    """Every number of one ``{unit, avg, p50, ...}`` metric dict, keyed ``metric.stat``."""
    unit = stats.get("unit") if isinstance(stats.get("unit"), str) else None
    name = parts[-1]
    kind = kind_for_unit(name, unit)
    keys = list(stat_keys) if stat_keys is not None else [k for k in stats if k != "unit"]
    out = []
    for stat in keys:
        if stat not in stats:
            continue
        # count: how many values the statistics cover (requests, or chunks for inter_chunk_latency)
        counted = stat == "count"
        p = published(
            ".".join([*parts, stat]),
            stats[stat],
            locator=jpath(*parts, stat),
            unit=None if counted else unit,
            kind="count" if counted else kind,
        )
        if p is not None:
            out.append(p)
    return out


STAT_KEY = re.compile(r"^(avg|mean|min|max|std|count|sum|p\d+(\.\d+)?)$")


def walk_metric_objects(path: Path, obj: Mapping[str, Any], parts: list[str]) -> list[Published]:
    """Metric objects (a dict with ``unit`` and statistics) at or below ``obj``, keyed by dotted path.

    AIPerf and GenAI-Perf write ``{"unit", "avg", "p50", ...}`` per metric and nest per-GPU
    telemetry deeper; strings beside the numbers (``header``, ``tag``) are labels, not aggregates.
    """
    if "unit" in obj:
        unit = obj["unit"]
        if unit is not None and not isinstance(unit, str):
            raise ParseError(path, jpath(*parts, "unit"), "unit", f"expected a unit string, got {unit!r}")
        stats = [k for k in obj if STAT_KEY.match(k)]
        for stat in stats:
            if obj[stat] is not None and not is_number(obj[stat]):
                raise ParseError(path, jpath(*parts, stat), stat, f"expected a number, got {obj[stat]!r}")
        return stat_dict_published(obj, parts, stats)
    out: list[Published] = []
    for key, value in obj.items():
        if isinstance(value, dict):
            out.extend(walk_metric_objects(path, value, [*parts, key]))
    return out


# --- what a file states of the system under test (RunInfo.factors) ----------------------------

# A benchmark client's ``--backend`` that names the engine it was pointed at (vLLM's and SGLang's
# bench_serving: one request function per engine). Any other (``openai``, ``openai-chat``, a hosted
# API) names the protocol only, so the engine is not stated.
ENGINE_BACKENDS = frozenset(
    {
        "vllm",
        "sglang",
        "sglang-native",
        "sglang-oai",
        "tgi",
        "lmdeploy",
        "deepspeed-mii",
        "tensorrt-llm",
        "trt",
        "scalellm",
    }
)


def factor_text(value: object) -> str | None:
    """A factor's value as the file wrote it: a text, a whole number, a float's ``repr`` (``inf`` for
    an unbounded rate); None where the value states nothing: null, a boolean, an object, an empty
    text, or ``None``/``null`` written as text (Python's ``str(None)``)."""
    if isinstance(value, str):
        return None if value.strip() in ("", "None", "null") else value
    if isinstance(value, float):
        return "inf" if value == math.inf else repr(value) if math.isfinite(value) else None
    return str(value) if is_number(value) else None


def at_path(obj: object, parts: Sequence[str | int]) -> object:
    """The value at a key path of nested objects and lists, None where the path does not exist."""
    for part in parts:
        if isinstance(part, int):
            obj = obj[part] if isinstance(obj, list) and -len(obj) <= part < len(obj) else None
        else:
            obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


def stated(
    path: Path,
    obj: object,
    paths: Mapping[str, Sequence[tuple[str | int, ...]]],
    where: Callable[[tuple[str | int, ...]], str] = lambda parts: jpath(*parts),
) -> dict[str, Stated]:
    """The factors ``obj`` states (``RunInfo.factors``): for each factor the first of its key paths
    holding a value (:func:`factor_text`; a list of one value is that value), with the place it was
    read (``where``: a JSON path by default). A value that cannot be stored is a ParseError there."""
    out: dict[str, Stated] = {}
    for factor, candidates in paths.items():
        for parts in candidates:
            value = at_path(obj, parts)
            if isinstance(value, list) and len(value) == 1:
                value, parts = value[0], (*parts, 0)
            if (text := factor_text(value)) is None:
                continue
            at = where(parts)
            if why := text_violation(f"the {factor} stated", text):
                raise ParseError(path, at, str(parts[-1]), why)
            out[factor] = Stated(value=text, at=at)
            break
    return distinct_served(out)


def distinct_served(factors: dict[str, Stated]) -> dict[str, Stated]:
    """``factors`` without ``served_model`` where it is the model's own name (kept where distinct)."""
    if "served_model" in factors and "model" in factors and factors["served_model"].value == factors["model"].value:
        del factors["served_model"]
    return factors


# --- request columns --------------------------------------------------------------------------


def build_columns(rows: Sequence[Mapping[str, Any]]) -> RequestColumns:
    """Columns from per-request dicts (absent keys are None); one pydantic validation in all."""
    return RequestColumns(**{name: [r.get(name) for r in rows] for name in RequestColumns.model_fields})


def present_fields(columns: RequestColumns, always: Iterable[str] = ()) -> list[str]:
    """REQUEST_FIELDS with at least one value in the columns, plus those the format always carries.

    A field whose every value is None was not captured (n/a, R9) and is left out.
    """
    found = set(always)
    for field, column in FIELD_COLUMN.items():
        if any(v is not None for v in getattr(columns, column)):
            found.add(field)
    return sorted(found)


# --- sniff helpers ----------------------------------------------------------------------------


def head_text(head: bytes) -> str:
    return head.decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")


def has_key(text: str, key: str) -> bool:
    """Whether ``"key":`` occurs in a (possibly cut) JSON text."""
    return re.search(rf'"{re.escape(key)}"\s*:', text) is not None
