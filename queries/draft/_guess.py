"""A found number's unit and quantity kind, guessed from the printed unit, the column header, the row label
and the nearest cue word (:mod:`queries.draft._lexicon`), with a confidence and the cues that produced it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bench_ledger.kinds import COUNTER_KINDS, INTEGER_KINDS
from bench_ledger.queries import intervals as iv
from bench_ledger.queries.draft._lexicon import (
    CHANGE_WORDS,
    CONCURRENCY_NAME,
    CUES,
    NEGATIVE_WORDS,
    STATS,
    UNITS,
    Cue,
)
from bench_ledger.queries.draft._numbers import Found
from bench_ledger.units import dimension

__all__ = ["Guess", "fraction_only", "guess", "own_word"]

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
    out = [("before", own_word(f, f.before)), ("after", f.after)]
    if f.place.column and not _names_load(f.place.column) and not _GENERIC_COLUMN.match(f.place.column):
        out.append(("column", own_word(f, f.place.column)))
    if f.place.row:
        out.append(("row", own_word(f, f.place.row)))
    out.append(("sentence before", own_word(f, f.lead)))
    out.append(("sentence", own_word(f, f.sentence)))
    # a load point named in the text ("出现在 128 并发") says where, not what: its words are no cue
    return [(w, CONCURRENCY_NAME.sub(lambda m: " " * len(m.group(0)), t)) for w, t in out]


_LOAD_AFTER = re.compile(r"\s*(?:并发|concurrent\b|concurrency\b)", re.IGNORECASE)
# the value column of a two-column "metric | value" table says nothing of what a row measures
_GENERIC_COLUMN = re.compile(r"^\s*(?:values?|数值|值|结果|results?)(?![A-Za-z])", re.IGNORECASE)


def _names_load(header: str) -> bool:
    """A header that names the load point ("1 并发", "c2"), not what the column measures."""
    return CONCURRENCY_NAME.fullmatch(header.strip()) is not None


_WORD_PAIR = re.compile(r"([A-Za-z0-9\u4e00-\u9fff]+)\s*/\s*([A-Za-z0-9\u4e00-\u9fff]+)")


def own_word(f: Found, text: str) -> str:
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
