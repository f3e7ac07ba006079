"""Propose how each found number may be checked: metric, derived, na or quoted (a draft, never a verdict).

* **guess**: unit and quantity kind from the printed unit, the column header, the row label and the
  nearest cue word (:mod:`queries.draft_lexicon`), with a confidence and the cues that produced it.
* **metric**: a registered metric over a ledger scope whose value lies in the printed interval, when
  the row / column / sentence names that scope (tier, C/N, label words, batch, launch), or when it is
  the only candidate that reproduces and nothing in the context contradicts it. A candidate is
  checked by running the audit itself (:class:`queries.audit.Auditor`) on a one-claim file, so the
  draft and the audit agree on intervals, units and integer kinds. A named scope whose metric is
  n/a is proposed too (the audit will say not-derivable: the evidence the ledger lacks).
* **derived**: the number is a percent change, ratio, quotient, sum or conversion of other numbers
  of the same sentence or table row, consistent within rounding (:mod:`queries.intervals`).
* **na** for a printed N/A (its reason: the footnote it points to, or the words after it);
  **quoted** otherwise, with the nearest phrase as source.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from bench_ledger.errors import LedgerError, Refused
from bench_ledger.factors import same_model
from bench_ledger.kinds import COUNTER_KINDS, INTEGER_KINDS
from bench_ledger.queries import intervals as iv
from bench_ledger.queries.draft_lexicon import (
    CHANGE_WORDS,
    CONCURRENCY_HEADER,
    CONCURRENCY_NAME,
    CUES,
    LABEL_WORDS,
    NEGATIVE_WORDS,
    SCOPE_LABEL,
    STATS,
    UNITS,
    Cue,
)
from bench_ledger.queries.draft_numbers import Found
from bench_ledger.units import dimension

# ----------------------------------------------------------------------------- guess unit and kind

_UNIT_KIND = {
    "s": "latency",
    "ms": "latency",
    "us": "latency",
    "ns": "latency",
    "min": "duration",
    "h": "duration",
    "W": "power",
    "kW": "power",
    "GB": "device_memory",
    "GiB": "device_memory",
    "MiB": "device_memory",
    "MB": "device_memory",
    "TB": "device_memory",
    "tokens/s": "aggregate_token_rate",
    "tokens/min": "aggregate_token_rate",
    "tokens": "token_count",
    "requests": "request_count",
    "GPUs": "count",
    "nodes": "count",
    "users": "concurrency",
    "streams": "concurrency",
    "x": "ratio",
    "Gb/s": "bandwidth",
    "GB/s": "bandwidth",
    "MB/s": "bandwidth",
    "MHz": "clock_frequency",
    "C": "temperature",
    "requests/s": "request_rate",
    "runs": "record_count",
    "launches": "count",
    "layers": "count",
    "experts": "count",
    "groups": "count",
    "links": "count",
    "stages": "count",
}


@dataclass
class Guess:
    unit: str | None
    kind: str
    confidence: str  # high | medium | low
    cues: list[str] = field(default_factory=list)
    metric_stem: str | None = None
    stat: str | None = None
    sign: int = 0  # -1 when the words say the change is a fall ("回落", "drop"), +1 a rise, 0 unknown
    printed_unit: str | None = None  # the unit printed with the number or in its column header


def context_texts(f: Found) -> list[tuple[str, str]]:
    """The texts that say what a number is, nearest first: (where, text). A number shared by several
    subjects ("A、B 均为 0") is read through its own subject only."""
    if f.subject is not None:
        return [("subject", f.subject)] + ([("column", f.place.column)] if f.place.column else [])
    out = [("before", _aligned(f, f.before)), ("after", f.after)]
    if f.place.column and not _names_load(f.place.column) and not _GENERIC_COLUMN.match(f.place.column):
        out.append(("column", _aligned(f, f.place.column)))
    if f.place.row:
        out.append(("row", _aligned(f, f.place.row)))
    out.append(("sentence before", _aligned(f, f.lead)))
    out.append(("sentence", _aligned(f, f.sentence)))
    # a load point named in the text ("出现在 128 并发") says where, not what: its words are no cue
    return [(w, CONCURRENCY_NAME.sub(lambda m: " " * len(m.group(0)), t)) for w, t in out]


_LOAD_AFTER = re.compile(r"\s*(?:并发|concurrent\b|concurrency\b)", re.IGNORECASE)
# the value column of a two-column "metric | value" table says nothing of what a row measures
_GENERIC_COLUMN = re.compile(r"^\s*(?:values?|数值|值|结果|results?)(?![A-Za-z])", re.IGNORECASE)


def _names_load(header: str) -> bool:
    """A header that names the load point ("1 并发", "c2"), not what the column measures."""
    return CONCURRENCY_NAME.fullmatch(header.strip()) is not None


_WORD_PAIR = re.compile(r"([A-Za-z0-9\u4e00-\u9fff]+)\s*/\s*([A-Za-z0-9\u4e00-\u9fff]+)")


def _aligned(f: Found, text: str) -> str:
    """For a member of an a/b pair, keep only its own word of a printed word pair ("冷/暖", "p50 / max")."""
    if f.form != "pair" or f.group is None:
        return text
    m = None
    for cand in _WORD_PAIR.finditer(text):
        if cand.group(0).upper() == "N/A" or (
            len(cand.group(1)) == 1 and len(cand.group(2)) == 1 and cand.group(1).isascii()
        ):
            continue
        if not any(ch.isdigit() for ch in cand.group(1) + cand.group(2)) or re.fullmatch(r"p\d+", cand.group(1)):
            m = cand
    if m is None:
        return text
    own = m.group(1) if f.member == 0 else m.group(2)
    return text[: m.start()] + own + text[m.end() :]


def _cue_words() -> list[tuple[Cue, str, re.Pattern[str] | None, str]]:
    """Each cue word once: (cue, word, a whole-word pattern for a Latin word or None, the lowered word)."""
    out: list[tuple[Cue, str, re.Pattern[str] | None, str]] = []
    for cue in CUES:
        for w in cue.words:
            if w.strip().isascii() and w.strip().replace(" ", "").isalnum():
                low = w.strip().lower()
                out.append((cue, w.strip(), re.compile(rf"(?<![A-Za-z0-9]){re.escape(low)}(?![A-Za-z0-9])"), low))
            else:
                out.append((cue, w, None, w.lower()))
    return out


_CUE_WORDS = _cue_words()


def _find_cue(text: str) -> tuple[Cue, str, int] | None:
    """The cue nearest the end of ``text`` (the number follows it)."""
    best = None
    low = text.lower()
    for cue, w, pattern, lw in _CUE_WORDS:
        if lw not in low:
            continue
        if pattern is not None:
            hits = list(pattern.finditer(low))
            i = hits[-1].start() if hits else -1
        else:
            i = low.rfind(lw)
        if i >= 0:
            end = i + len(w)
            key = (end, len(w))
            if best is None or key > best[0]:
                best = (key, cue, w)
    return (best[1], best[2], best[0][0]) if best else None


def _member_stat(f: Found) -> str | None:
    """For a member of a list "a / b / c" printed against a label listing one statistic per member
    ("TTFT avg / p50 / p90 (ms)"), that member's statistic."""
    if f.form != "pair" or f.group is None:
        return None
    for text in (f.place.row, f.place.column):
        parts = re.split(r"\s*/\s*", text or "")
        stats = [_stat([("part", p)]) for p in parts]
        if len(parts) > 1 and all(stats) and f.member < len(parts):
            return stats[f.member]
    return None


def _stat(texts: list[tuple[str, str]]) -> str | None:
    for _, t in texts:
        low = t.lower()
        hit = None
        for words, stat in STATS:
            for w in words:
                i = low.rfind(w.lower())
                if i >= 0 and (hit is None or i > hit[0]):
                    hit = (i, stat)
        if hit:
            return hit[1]
    return None


def guess(f: Found) -> Guess:
    texts = context_texts(f)
    cue = None
    where = None
    for w, t in texts:
        if w == "after":
            found = _find_cue(t[:16]) if t else None  # words right after the number ("322 次 API 请求")
        else:
            found = _find_cue(t)
        if found:
            cue, where = found, w
            break
    unit = f.unit
    cues = []
    if f.unit is None and f.form == "number" and _LOAD_AFTER.match(f.after):
        # "128 并发", "64 concurrent": the number is a load point
        return Guess(None, "concurrency", "medium", [f"after: {f.after.strip()[:12]!r} (a load point)"])
    header_unit = _header_unit(f.place.column) if f.unit is None else None
    if header_unit is not None:
        f = _with_unit(f, header_unit)
        unit = header_unit
        cues.append(f"column unit {header_unit!r}")
    elif f.unit is None and (row_unit := _header_unit(f.place.row)) is not None:
        f = _with_unit(f, row_unit)  # the row label prints it: "TTFT avg / p50 (ms)"
        unit = row_unit
        cues.append(f"row unit {row_unit!r}")
    kind = None
    conf = "low"
    if cue is not None:
        c, word, _ = cue
        cues.append(f"{where}: {word!r}")
        kind = c.kind
        if unit is None:
            unit = c.unit
        conf = "medium"
    if f.unit is not None:
        cues.append(f"printed unit {f.unit!r}")
        ukind = _UNIT_KIND.get(f.unit)
        if f.unit == "%":
            if kind not in COUNTER_KINDS:
                kind = "percent_change" if (_is_change(f) or kind is None or kind != "other") else kind
            conf = "high" if cue else "medium"
        elif f.unit == "x":
            if kind != "capacity_ratio":
                kind = "ratio"
            conf = "high" if cue else "medium"
        elif kind is None or (
            ukind in ("count", "token_count")
            and kind not in ("token_setting", "kv_pool_tokens", "concurrency", "token_count")
        ):
            kind, conf = ukind or "other", "medium"
        elif ukind == "request_rate" and kind != "request_rate":
            kind, conf = ukind, "medium"  # req/s printed: a rate, whatever count word stands near it
        elif (
            ukind is not None
            and dimension(f.unit) is not None
            and dimension(_default_unit(kind) or "") not in (None, dimension(f.unit))
        ):
            kind = ukind
            conf = "medium"
        else:
            conf = "high"
    if kind is None:
        kind = "count" if (f.value or "").replace(",", "").lstrip("+-−").isdigit() else "other"
        cues.append("no cue: default")
    stat = _member_stat(f) or _stat(texts)
    if (
        kind in INTEGER_KINDS
        and f.value is not None
        and f.form != "word"
        and _fraction_only(f.value)
        and stat not in FRACTIONAL_STATS
    ):
        # 0.9, 46.67: a print that allows no integer is not a count, whatever the cue word says
        cues.append(f"{f.value} allows no integer: not a {kind}")
        kind = (
            ukind_rate if (ukind_rate := _UNIT_KIND.get(f.unit or "")) and ukind_rate not in INTEGER_KINDS else "other"
        )
        conf = "low"
    if f.form == "word" and kind not in ("record_count", "concurrency"):
        kind = "count"  # 九次, 五次, "ten files": a count of events or things, whatever the verb after it
        unit = f.unit
    if kind == "percent_change" and unit is None:
        unit = "%"
    sign = 0
    if kind in ("percent_change",):
        low = f.before.lower()
        if any(w in low for w in NEGATIVE_WORDS):
            sign = -1
        elif any(w in low for w in CHANGE_WORDS):
            sign = 1
    return Guess(unit, kind, conf, cues, cue[0].metric if cue else None, stat, sign, f.unit)


# statistics of a count that need not be integers (a mean of output tokens, an interpolated percentile)
FRACTIONAL_STATS = frozenset({"mean", "std", "p25", "p50", "p75", "p90", "p95", "p99", "p99_9"})


def fraction_only(value: str) -> bool:
    """A printed number whose rounding interval holds no integer (0.9, 46.67): never a count."""
    return _fraction_only(value)


_PAREN = re.compile(r"[(（]([^)）]+)[)）]")


def _fraction_only(value: str) -> bool:
    try:
        x = iv.interval_of(value)
    except ValueError:
        return False
    return not iv.is_range(value) and iv.integers_in(x) is None


def _header_unit(column: str | None) -> str | None:
    """The unit a column header prints: 'TTFT p50 (s)', 'TTFT p50（s）', 'Output throughput (tok/s)'."""
    if not column:
        return None
    for m in _PAREN.finditer(column):
        u = m.group(1).strip()
        if u in UNITS:
            return UNITS[u]
    for u in sorted(UNITS, key=len, reverse=True):
        if "/" in u and u in column:
            return UNITS[u]
    return None


def _with_unit(f: Found, unit: str) -> Found:
    from dataclasses import replace

    return replace(f, unit=unit)


def _default_unit(kind: str) -> str | None:
    for c in CUES:
        if c.kind == kind and c.unit:
            return c.unit
    return None


def _is_change(f: Found) -> bool:
    low = (f.before + " " + (f.place.column or "")).lower()
    return bool(f.core and f.core[0][:1] in "+-−") or any(w in low for w in CHANGE_WORDS)


# ----------------------------------------------------------------------------- scopes named by the context


@dataclass(frozen=True)
class RunScope:
    batch: str
    label: str
    input_target: int | None
    output_cap: int | None
    concurrency: int | None
    requests: int | None
    stated: tuple[tuple[str, str], ...] = ()  # what the run's files state of the system (ledger.factors)


@dataclass
class Facets:
    """What a number's context says about its scope."""

    input_target: int | None = None
    output_cap: int | None = None
    concurrency: int | None = None
    requests: int | None = None
    words: set[str] = field(default_factory=set)
    launch: int | None = None
    stated: list[str] = field(default_factory=list)
    system: dict[str, set[str]] = field(default_factory=dict)  # factor -> the values the context names


# the system under test as a report's cells and headings name it: a GPU, a parallel layout
_GPU_NAME = re.compile(r"(?:[abhlv]\d{2,3}[a-z]?|gh?b\d{3}|gh\d{3}|mi\d{3}[a-z]?|l40s|a10g|rtx\d{4}[a-z]*)", re.I)
_LAYOUT = re.compile(r"(tp|dp|pp|ep)(\d+)", re.I)


# a model as a report names it: a known family, then its version and size ("Qwen2.5-3B-Instruct", "llama2")
_MODEL_NAME = re.compile(
    r"(?<![A-Za-z0-9])(?:llama|qwen|mistral|mixtral|deepseek|gemma|phi|glm|chatglm|minimax|baichuan|internlm|"
    r"kimi|gpt-oss|granite|nemotron|falcon|olmo|yi(?=-))(?:[A-Za-z0-9]|[.\-_](?=[A-Za-z0-9]))*",
    re.I,
)
# an engine and a dataset as a report names them -> the name compared
_ENGINES = {
    "vllm": "vllm",
    "sglang": "sglang",
    "tensorrt-llm": "tensorrt-llm",
    "trt-llm": "tensorrt-llm",
    "trtllm": "tensorrt-llm",
    "tgi": "tgi",
    "text-generation-inference": "tgi",
    "lmdeploy": "lmdeploy",
    "llama.cpp": "llama.cpp",
    "ollama": "ollama",
}
_ENGINE_NAME = re.compile(r"(?<![A-Za-z0-9])(" + "|".join(re.escape(k) for k in _ENGINES) + r")(?![A-Za-z0-9])", re.I)
_DATASET_NAME = re.compile(r"(?<![A-Za-z0-9])(sharegpt|sonnet|burstgpt|random)(?![A-Za-z0-9])", re.I)
# what a run states that a context may contradict but never names a run by (every run of a sweep agrees)
_IDENTITY = ("model", "served_model", "engine", "dataset")


def system_names(texts: list[str]) -> dict[str, set[str]]:
    """The system under test as a report's cells, headings and sentences name it: a GPU, a parallel
    layout, a model, an engine, a dataset (factor -> the names)."""
    out: dict[str, set[str]] = {}
    for text in texts:
        for tok in re.split(r"[^A-Za-z0-9]+", text):
            if _GPU_NAME.fullmatch(tok):
                out.setdefault("hardware", set()).add(tok.upper())
            elif m := _LAYOUT.fullmatch(tok):
                out.setdefault(m.group(1).lower(), set()).add(m.group(2))
        for factor, pattern in (("model", _MODEL_NAME), ("engine", _ENGINE_NAME), ("dataset", _DATASET_NAME)):
            for hit in pattern.finditer(text):
                name = hit.group(0) if factor == "model" else hit.group(0).lower()
                out.setdefault(factor, set()).add(_ENGINES.get(name, name))
    return out


def _identity_clash(fa: Facets, r: RunScope) -> str | None:
    """The model, engine or dataset the context names that the run's files contradict, in words."""
    stated = dict(r.stated)
    models = [v for k, v in r.stated if k in ("model", "served_model")]
    said = fa.system.get("model")
    if said and models and not any(same_model(m, n) for m in models for n in said):
        return f"model {'/'.join(sorted(said))} != {stated.get('model') or models[0]}"
    for factor, pattern in (("engine", _ENGINE_NAME), ("dataset", _DATASET_NAME)):
        said, value = fa.system.get(factor), stated.get(factor)
        hit = pattern.search(value or "")
        if said and hit is not None:  # only a value the run states in a name the context can use
            own = _ENGINES.get(hit.group(0).lower(), hit.group(0).lower())
            if own not in said:
                return f"{factor} {'/'.join(sorted(said))} != {value}"
    return None


_TIER = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)([Kk]?)\s*/\s*(\d+(?:\.\d+)?)([Kk]?)(?![\w.])")
_KTOKEN = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)[Kk](?![A-Za-z])")
_CN = re.compile(r"(?<![A-Za-z0-9])(C\d+(?:N\d+)?|N\d+)(?![A-Za-z0-9])")


def _k(num: str, k: str) -> int:
    return int(Fraction(num) * (1000 if k else 1))


def facets_of(f: Found, known: set[str] = frozenset()) -> Facets:  # type: ignore[assignment]
    """What the number's sentence (or row) says about its scope; when the sentence says nothing, the
    sentences before it in the same paragraph (a number often refers back: "输出分别 77/78 token")."""
    fa = _facets(f, f.sentence)
    said = fa.stated or fa.words & (set(LABEL_WORDS.values()) | known)
    if not said and not f.place.row and f.earlier.strip():
        wider = _facets(f, f.earlier + f.sentence)
        wider.stated = [f"earlier in the paragraph: {s}" for s in wider.stated]
        return wider
    return fa


def _facets(f: Found, sentence: str) -> Facets:
    fa = Facets()
    row = f.place.row or ""
    texts = [_aligned(f, row), _aligned(f, sentence) if not f.place.row else "", f.place.column or ""]
    m = _TIER.search(row) or (None if f.place.row else _TIER.search(f.before))
    if m:
        fa.input_target, fa.output_cap = _k(m.group(1), m.group(2)), _k(m.group(3), m.group(4))
        fa.stated.append(f"tier {m.group(0)}")
    elif not f.place.row:
        km = list(_KTOKEN.finditer(f.before))
        if km:
            fa.input_target = _k(km[-1].group(1), "k")
            fa.stated.append(f"input {km[-1].group(0)}")
    for t in texts:
        for cm in _CN.finditer(t):
            sm = SCOPE_LABEL.match(cm.group(1))
            if sm and sm.group("c") and fa.concurrency is None:
                fa.concurrency = int(sm.group("c"))
                fa.stated.append(cm.group(1))
            if sm and sm.group("n") and fa.requests is None:
                fa.requests = int(sm.group("n"))
    low = " ".join(texts).lower()
    for w, tr in LABEL_WORDS.items():
        if w in low:
            fa.words.add(tr)
    for tok in re.findall(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)+|[a-z]+\d+|[a-z]{2,}", low):
        fa.words.add(tok)
    if row.strip().isdigit():
        fa.launch = int(row.strip())
    return fa


def facets_with_row(f: Found, header: list[str], cells: list[str], known: set[str] = frozenset()) -> Facets:  # type: ignore[assignment]
    fa = facets_of(f, known)
    for h, c in zip(header, cells):
        hm = re.fullmatch(r"\s*C\s*/\s*N\s*", h)
        cm = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", c)
        if hm and cm:
            fa.concurrency, fa.requests = int(cm.group(1)), int(cm.group(2))
            fa.stated.append(f"C/N {c.strip()}")
        elif CONCURRENCY_HEADER.match(h) and c.strip().isdigit() and fa.concurrency is None:
            fa.concurrency = int(c.strip())  # a column of concurrencies: the row's load point
            fa.stated.append(f"{h.strip()} {c.strip()}")
            if fa.launch == fa.concurrency:
                fa.launch = None  # the row label is the concurrency, not a launch attempt
    # the system the row, column, headings or sentence name ("Aggregated (GH200)", "TP8"): checked
    # against what each run's files state of it
    fa.system = system_names(
        [*cells, f.place.column or "", f.place.heading or "", f.sentence if f.place.row is None else ""]
    )
    # the load point named by the number's column ("1 并发"), its row's cells ("c1 (repeat)"), and
    # failing those its enclosing headings ("`agent_flat` c2 — INVALID")
    prose = () if f.place.row is not None else (("sentence", f.sentence),)
    for where, text in (
        ("column", f.place.column or ""),
        *(("row", c) for c in cells),
        *prose,
        ("heading", f.place.heading or ""),
    ):
        if fa.concurrency is not None:
            break
        names = {int(next(g for g in m.groups() if g)) for m in CONCURRENCY_NAME.finditer(text)}
        if len(names) == 1:
            fa.concurrency = names.pop()
            fa.stated.append(f"{where} {text.strip()[:40]}")
    return fa


def _same_value(a: str, b: str) -> bool:
    try:
        return float(a) == float(b)
    except ValueError:
        return a.strip().casefold() == b.strip().casefold()


def names_run(fa: Facets, r: RunScope) -> tuple[bool, int, list[str]]:
    """(named, score, why): the context names this run when what it states agrees with the run's
    settings and it states at least one of concurrency, input target or a word of the label."""
    why = []
    score = 0
    for name, stated, actual in (
        ("input target", fa.input_target, r.input_target),
        ("output cap", fa.output_cap, r.output_cap),
        ("concurrency", fa.concurrency, r.concurrency),
        ("requests", fa.requests, r.requests),
    ):
        if stated is None:
            continue
        if actual is not None and stated != actual:
            return False, 0, [f"{name} {stated} != {actual}"]
        if actual is not None:
            score += 2
            why.append(f"{name} {stated}")
    clash = _identity_clash(fa, r)
    if clash is not None:
        return False, 0, [clash]
    for factor, value in r.stated:
        if factor in _IDENTITY:
            continue
        named_values = fa.system.get(factor)
        if not named_values:
            continue
        if not any(_same_value(value, v) for v in named_values):
            return False, 0, [f"{factor} {'/'.join(sorted(named_values))} != {value}"]
        score += 1
        why.append(f"{factor} {value}")
    parts = [p for p in re.split(r"[-_]", r.label.lower()) if p]
    label_hits = [p for p in parts if p in fa.words and not p.isdigit()]
    if r.label.lower() in fa.words:
        label_hits.append(r.label.lower())
    # a label word the context contradicts (cold vs warm)
    state_words = set(LABEL_WORDS.values())
    in_label = {p for p in parts if p in state_words}
    in_context = fa.words & state_words
    if in_label and in_context and not (in_label & in_context):
        return False, 0, [f"label word {'/'.join(sorted(in_label))} not in the context"]
    score += len(label_hits)
    if label_hits:
        why.append("label " + "/".join(label_hits))
    if r.batch.lower() in fa.words:
        score += 1
        why.append(f"batch {r.batch}")
    named = (
        fa.concurrency is not None
        or bool(label_hits)
        or fa.input_target is not None
        or any(w.split(" ")[0] in fa.system for w in why)
    )
    return named and score > 0, score, why


# ----------------------------------------------------------------------------- the ledger side


class LedgerView:
    """The scopes of a ledger a draft may name, and its metric values (:class:`queries.metrics.Evaluator`)."""

    @property
    def known_words(self) -> set[str]:
        return (
            {b.lower() for b in self.batches}
            | {r.label.lower() for r in self.runs}
            | {d.lower() for d, _ in self.launches}
        )

    def __init__(self, ledger: Any, batches: list[str] | None = None) -> None:
        import sqlalchemy as sa
        from bench_ledger import models as m
        from bench_ledger.queries.metrics.registry import METRICS, Evaluator, run_metrics
        from bench_ledger.revisions import not_superseded

        self.ledger = ledger
        self.metrics = METRICS
        self._evaluate = Evaluator()  # each (metric, scope) once; the run scopes of a batch together
        from bench_ledger.factors import of_metadata, run_metadata
        from bench_ledger.queries.metrics.reported import Reported

        self.reported = Reported()  # the tools' own figures, read once per run
        # (metric, scope, cards, printed text, unit) -> (verdict, recomputed, metric unit): one audit each
        self.checked: dict[tuple, tuple[str, str | None, str | None]] = {}
        rows = run_metrics(ledger, batches or None, metrics=())
        with ledger.connection() as conn:
            R = m.Run.__table__
            ids = [r.run_id for r in rows]
            stated = (
                {
                    rid: of_metadata(run_metadata(text))
                    for rid, text in conn.execute(sa.select(R.c.id, R.c.metadata_json).where(R.c.id.in_(ids)))
                }
                if ids
                else {}
            )

        def setting(value: int | None, rid: int, factor: str) -> int | None:
            # the run's column, else what its file (or its names) state (ledger.factors)
            if value is not None:
                return value
            said = stated.get(rid, {}).get(factor)
            return int(said.value) if said is not None and said.value.isdigit() else None

        self.runs = [
            RunScope(
                r.batch,
                r.label,
                setting(r.input_target_tokens, r.run_id, "input_len"),
                setting(r.output_cap_tokens, r.run_id, "output_len"),
                setting(r.concurrency, r.run_id, "concurrency"),
                setting(r.request_count, r.run_id, "prompt_count"),
                tuple(
                    (k, v.value)
                    for k, v in stated.get(r.run_id, {}).items()
                    if k in ("hardware", "tp", "dp", "pp", "ep", *_IDENTITY)
                ),
            )
            for r in rows
        ]
        self.batches = sorted({r.batch for r in self.runs} | set(batches or []))
        with ledger.connection() as conn:
            L, D = m.Launch.__table__, m.Deployment.__table__
            q = sa.select(D.c.name, L.c.attempt).join(D, D.c.id == L.c.deployment_id).where(not_superseded(L))
            self.launches = sorted({(r[0], r[1]) for r in conn.execute(q)})
            if not batches:
                self.batches = sorted(set(self.batches) | {r[0] for r in conn.execute(sa.select(m.Batch.name))})

    def cards(self, name: str, batch: str) -> list[str]:
        """The cards of a batch a per-card hardware metric names (empty when it is one value)."""
        from bench_ledger.queries.values import Scope

        try:
            v = self.evaluate(self.ledger, name, Scope(batch=batch))
        except (LedgerError, Refused, KeyError, ValueError):
            return []
        per_card = (v.inputs or {}).get("per_card") if v.value is None else None
        return sorted(per_card) if isinstance(per_card, dict) else []

    def evaluate(self, ledger: Any, name: str, scope: Any) -> Any:
        return self._evaluate(ledger, name, scope)


@dataclass
class Candidate:
    metric: str
    scope: dict
    verdict: str  # what the audit gives it: reproduced | mismatch | not-derivable | refused
    recomputed: str | None
    named: bool
    score: int
    why: list[str]
    over_cards: str | None = None
    unit: str | None = None  # the metric value's unit ("unconfirmed" for an unread dmon column)

    def describe(self) -> str:
        sc = ", ".join(f"{k}={v}" for k, v in self.scope.items())
        shown = f" = {self.recomputed}" if self.recomputed else ""
        return f"{self.metric} over {{{sc}}}{shown}: {self.verdict}" + (f" ({'; '.join(self.why)})" if self.why else "")


def metric_names(g: Guess, metrics: dict) -> list[str]:
    """The registered metrics a guess points at: the cue's stem (with the statistic when one is
    printed), else every metric of the guessed kind."""
    names = []
    if g.metric_stem:
        if g.metric_stem in metrics:
            names = [g.metric_stem]
        else:
            names = [n for n in metrics if n.startswith(g.metric_stem + "_")]
            if g.stat:
                narrowed = [n for n in names if n.endswith("_" + g.stat) or f"_{g.stat}_" in n]
                names = narrowed or names
    names = [n for n in names if metrics[n].quantity_kind == g.kind]
    hardware = [n for n in names if metrics[n].family == "hardware" and n.endswith(("_mean", "_max"))]
    if hardware and not g.stat and len(hardware) == len(names):
        # a hardware counter printed without a statistic word is read as its window mean (the summary)
        names = [n for n in names if n.endswith("_mean")]
    if not names:
        names = [
            n
            for n, mt in metrics.items()
            if mt.quantity_kind == g.kind and g.kind not in ("count", "other", "ratio", "percent_change")
        ]
    return names


def metric_candidates(f: Found, g: Guess, view: LedgerView, fa: Facets, claim_text: str) -> list[Candidate]:
    """Every (metric, scope) the guess allows, checked by the audit on a one-claim file."""
    from bench_ledger.queries.audit import Auditor
    from bench_ledger.queries.claims import ClaimsFile

    names = metric_names(g, view.metrics)
    if g.kind == "power" and f.unit not in ("W", "kW"):
        names = []  # a power statistic needs its unit printed ("功耗归一化比值" is not a power)
    out: list[Candidate] = []
    for name in names:
        mt = view.metrics[name]
        scopes: list[tuple[dict, bool, int, list[str], str | None]] = []
        if mt.family in ("requests", "reported"):
            for r in view.runs:
                named, score, why = names_run(fa, r)
                scopes.append(({"batch": r.batch, "run": r.label}, named, score, why, None))
            for b in view.batches if mt.pools and mt.family == "requests" else ():
                scopes.append(
                    ({"batch": b}, b.lower() in fa.words, 1, [f"batch {b}"] if b.lower() in fa.words else [], None)
                )
        elif mt.family == "hardware":
            for b in view.batches:
                named = b.lower() in fa.words
                over = "mean" if name.endswith("_mean") and not name.startswith("power_sum") else None
                scopes.append(({"batch": b}, named, 1 if named else 0, [f"batch {b}"] if named else [], over))
                if not name.startswith("power_sum") and not name.startswith("power_peak"):
                    # a per-card statistic over several cards: each card is a scope of its own
                    for card in view.cards(name, b):
                        scopes.append(
                            ({"batch": b, "gpu": card}, named, 1 if named else 0, [f"batch {b}"] if named else [], None)
                        )
        else:
            for dep, attempt in view.launches:
                named = fa.launch == attempt or dep.lower() in fa.words
                scopes.append(
                    (
                        {"deployment": dep, "launch": attempt},
                        named,
                        1 if named else 0,
                        [f"launch {attempt}"] if fa.launch == attempt else [],
                        None,
                    )
                )
        for scope, named, score, why, over in scopes:
            if fa.launch is not None and "launch" in scope and scope["launch"] != fa.launch:
                continue
            key = (name, repr(sorted(scope.items())), over, claim_text, g.printed_unit)
            done = view.checked.get(key) if hasattr(view, "checked") else None
            if done is not None:  # the same number against the same scope: audited once per draft
                out.append(Candidate(name, scope, done[0], done[1], named, score, why, over, done[2]))
                continue
            claim = {
                "id": "candidate",
                "text": claim_text,
                "kind": mt.quantity_kind,
                "unit": g.printed_unit,
                "metric": {"name": name, "scope": scope, **({"over_cards": over} if over else {})},
            }
            cf = ClaimsFile.model_validate(
                {"version": 1, "source_report": {"slug": "draft", "title": "draft"}, "claims": [claim]}
            )
            res = None
            shown: str | None
            try:
                res = Auditor(cf, view.ledger, evaluate=view.evaluate, reported=getattr(view, "reported", None)).result(
                    "candidate"
                )
            except Exception as exc:  # noqa: BLE001 - a candidate the audit cannot run is not proposed
                verdict, shown = "refused", str(exc)[:80]
            else:
                verdict, shown = res.verdict, res.recomputed
            unit = (res.evidence or {}).get("metric_unit") if res is not None else None
            if hasattr(view, "checked"):
                view.checked[key] = (verdict, shown, unit)
            out.append(Candidate(name, scope, verdict, shown, named, score, why, over, unit))
    return out


_STAT_ORDER = ("p50", "mean", "", "p90", "p95", "p99", "max", "min", "p25", "p75", "std", "p99_9")
# what a number printed without a statistic word may be taken for: a level, a median, a mean
_PLAIN_STATS = ("", "p50", "mean")


def _stat_of(metric: str) -> str:
    hit = re.search(r"_(p\d+(?:_\d+)?|mean|max|min|std)$", metric)
    return hit.group(1) if hit and hit.group(1) in _STAT_ORDER else ""


def significant_digits(value: str) -> int:
    digits = re.sub(r"[^0-9]", "", re.split(r"[A-Za-z%×倍\s]", value.strip().lstrip("+-−"))[0])
    return len(digits.lstrip("0"))


def choose_metric(
    cands: list[Candidate],
    fa: Facets,
    significant: int = 0,
    stem: str | None = None,
    stat: str | None = None,
) -> tuple[Candidate | None, str, list[Candidate]]:
    """The proposal among the candidates: (chosen, confidence, rejected)."""
    reproduced = [c for c in cands if c.verdict == "reproduced"]
    if any(c.over_cards for c in reproduced):
        # the summary over the cards reproduces: one card matching it too is a coincidence
        reproduced = [c for c in reproduced if c.over_cards or "gpu" not in c.scope]
    named_rep = [c for c in reproduced if c.named]
    if named_rep:
        best = max(c.score for c in named_rep)
        top = [c for c in named_rep if c.score == best]
        if len({(c.metric, str(c.scope)) for c in top}) > 1 and len({str(c.scope) for c in top}) == 1:
            # one scope, several statistics agree (one request: mean = median = max): the median
            top = sorted(top, key=lambda c: _STAT_ORDER.index(_stat_of(c.metric)))[:1]
        if len(top) == 1:
            return top[0], "high", [c for c in cands if c is not top[0] and (c.named or c.verdict == "reproduced")]
        if len({str(c.scope) for c in top}) > 1:
            # runs tied on what names them: listed, never guessed
            return None, "", [c for c in cands if c.named or c.verdict == "reproduced"]
        return top[0], "low", [c for c in cands if c is not top[0] and (c.named or c.verdict == "reproduced")]
    named_na = [c for c in cands if c.named and c.verdict == "not-derivable" and c.score >= 2]
    if named_na:
        best = max(c.score for c in named_na)
        top = [c for c in named_na if c.score == best]
        # only when a cue named the metric: a kind alone would pick any n/a metric of that kind
        if stem and len({str(c.scope) for c in top}) == 1 and all(c.metric.startswith(stem) for c in top):
            top = sorted(top, key=lambda c: _STAT_ORDER.index(_stat_of(c.metric)))
            return top[0], "medium", [c for c in cands if c.named and c is not top[0]]
    # few scopes of that shape were tried (2 batches, not 20 runs): a unique match is not a coincidence
    few = (
        reproduced
        and len(
            {
                str(c.scope)
                for c in cands
                if c.metric == reproduced[0].metric and set(c.scope) == set(reproduced[0].scope)
            }
        )
        <= 3
    )
    if stat is None:
        # nothing names the scope and no statistic is printed: a tail statistic (p90, max, std...) that
        # happens to match is a coincidence among the many tried, not a basis
        reproduced = [c for c in reproduced if _stat_of(c.metric) in _PLAIN_STATS]
    # a run the context contradicts (another GPU, another layout) is never the unique match
    reproduced = [c for c in reproduced if not any("!=" in w or "not in the context" in w for w in c.why)]
    if len({str(c.scope) for c in reproduced}) == 1 and not fa.stated and (significant >= 3 or few):
        one = sorted(reproduced, key=lambda c: _STAT_ORDER.index(_stat_of(c.metric)))[0]
        return one, "low", [c for c in cands if c.named]
    return None, "", [c for c in cands if c.named or c.verdict == "reproduced"]


# ----------------------------------------------------------------------------- derived


@dataclass
class DerivedProposal:
    op: str
    operands: list[Found]
    recomputed: str
    value: str | None  # the printed value with its inferred sign, when the text has none
    why: str


_OP_BEFORE = {"÷": "divide", "/": "divide", "×": "product", "*": "product", "+": "sum", "＋": "sum"}


def _interval(f: Found) -> iv.Interval | None:
    """A number's printed interval; a count (an integer of an integer kind) is exactly itself (R11)."""
    if f.value is None or f.form == "range":
        return None
    try:
        p = iv.parse(f.value)
    except ValueError:
        return None
    if p.is_integer and p.step == 1 and guess(f).kind in INTEGER_KINDS:
        return iv.Interval.point(p.value)
    return p.interval


def _printed(f: Found) -> iv.Printed | None:
    if f.value is None or f.form == "range":
        return None
    try:
        return iv.parse(f.value)
    except ValueError:
        return None


def _tight(res: iv.Interval, printed: iv.Interval) -> bool:
    """Consistent *and* informative: operands printed so coarsely that almost anything fits ("4 and
    8" for +97.2%) prove nothing; the recomputed interval may be at most 10x as wide as the printed one."""
    return iv.check(res, printed).consistent and res.width <= 10 * max(printed.width, Fraction(1, 10**9))


def propose_derived(f: Found, g: Guess, pool: list[Found], text_between: Any) -> DerivedProposal | None:
    """A formula over other numbers of the same sentence or row that gives this one within rounding."""
    p = _printed(f)
    if p is None:
        return None
    with_interval = [(o, i) for o in pool if o is not f and o.form != "na" and (i := _interval(o)) is not None]
    others = [o for o, _ in with_interval]
    before = [o for o in others if (o.place.line, o.place.start) < (f.place.line, f.place.start)]
    # 1. explicit arithmetic printed right before: "384÷16＝24", "16,593,113÷262,144≈63.3"
    if len(before) >= 2:
        a, b = before[-2], before[-1]
        between = text_between(a, b)
        tail = text_between(b, f)
        op = _OP_BEFORE.get(between.strip()[:1]) if between.strip() else None
        if op and (tail.strip()[:1] in "=＝≈" or f.text.lstrip().startswith("≈")):
            res = _apply(op, [a, b])
            if res is not None and _tight(res, p.interval):
                return DerivedProposal(op, [a, b], str(res), None, f"printed arithmetic {a.text}{between}{b.text}")
    ia = {id(o): i for o, i in with_interval}
    if g.kind == "percent_change" or p.unit == "%":
        if g.kind not in ("percent_change",):
            return None
        signs = [1] if p.signed else ([g.sign] if g.sign else [1, -1])
        if not p.signed and g.sign == 0:
            signs = [1, -1]
        order = _pairs(before) + _pairs(others) + _pairs(before, both=True) + _pairs(others, both=True)
        for a, b in order:
            try:
                res = iv.percent_change(ia[id(a)], ia[id(b)])
            except Refused:
                continue
            for sgn in signs:
                target = p.interval if sgn == 1 else -p.interval
                if _tight(res, target):
                    value = None
                    if not p.signed:
                        value = ("+" if sgn == 1 else "−") + p.text.strip().removeprefix("约").strip()
                        value = _clean_value(f, sgn)
                    return DerivedProposal(
                        "percent_change", [a, b], str(res), value, f"({b.text} / {a.text} − 1) × 100"
                    )
        return None
    if p.unit == "x" or g.kind in ("ratio", "capacity_ratio"):
        for a, b in _pairs(before, both=True) + _pairs(others, both=True):
            try:
                res = iv.ratio(ia[id(a)], ia[id(b)])
            except Refused:
                continue
            if _tight(res, p.interval):
                return DerivedProposal("ratio", [a, b], str(res), None, f"{a.text} / {b.text}")
        return None
    # conversion: the number just before it in the same clause, same dimension, another unit
    if before and p.unit and dimension(p.unit):
        a = before[-1]
        pa = _printed(a)
        if (
            pa
            and pa.unit
            and pa.unit != p.unit
            and dimension(pa.unit) == dimension(p.unit)
            and text_between(a, f).strip(" ，,、（(") in ("", "约", "即", "or", "=")
        ):
            try:
                res = iv.convert(pa.interval, pa.unit, p.unit)
            except (Refused, ValueError, KeyError):
                res = None
            if res is not None and _tight(res, p.interval):
                return DerivedProposal("convert", [a], str(res), None, f"{a.text} in {p.unit}")
    # a total printed with its parts in one heading or sentence: "九次启动：五次失败，四次就绪"
    same = [o for o in others if o.segment == f.segment]
    if len(same) >= 2 and all(_is_int(o) for o in same) and _is_int(f):
        # counts are integers: a printed "5" is exactly 5 (R11), so the parts must add up exactly
        res = iv.total(*(iv.Interval.point(_printed(o).value) for o in same))  # type: ignore[union-attr]
        if res.lo == p.value and res.lo > max(_printed(o).value for o in same):  # type: ignore[union-attr]
            return DerivedProposal("sum", same, str(res), None, " + ".join(o.text for o in same))
    return None


def _clean_value(f: Found, sgn: int) -> str:
    core = f.core[0].lstrip("+-−")
    return ("+" if sgn == 1 else "−") + core + "%"


def _is_int(f: Found) -> bool:
    p = _printed(f)
    return (
        p is not None
        and p.is_integer
        and p.unit in (None, "x")
        or (p is not None and p.is_integer and f.form == "word")
    )


def _pairs(items: list[Found], both: bool = False) -> list[tuple[Found, Found]]:
    """Ordered pairs nearest first: (a, b) with a before b; with ``both`` also (b, a)."""
    out = []
    n = len(items)
    for gap in range(1, n):
        for i in range(n - 1, gap - 1, -1):
            a, b = items[i - gap], items[i]
            out.append((a, b))
            if both:
                out.append((b, a))
    return out


def _apply(op: str, xs: list[Found]) -> iv.Interval | None:
    ivs = [_interval(x) for x in xs]
    if any(v is None for v in ivs):
        return None
    try:
        if op == "divide":
            return iv.ratio(ivs[0], ivs[1])  # type: ignore[arg-type]
        if op == "product":
            return iv.product(*ivs)  # type: ignore[arg-type]
        if op == "sum":
            return iv.total(*ivs)  # type: ignore[arg-type]
    except Refused:
        return None
    return None
