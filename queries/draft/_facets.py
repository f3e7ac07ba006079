"""The scopes a number's context names: run facets (tier, C/N, label words, batch, launch; model, engine,
dataset, GPU) read from the sentence, the table row and its headings, and whether they name a run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction

from bench_ledger.factors import same_model
from bench_ledger.queries.draft._guess import own_word
from bench_ledger.queries.draft._lexicon import (
    CONCURRENCY_HEADER,
    CONCURRENCY_NAME,
    LABEL_WORDS,
    SCOPE_LABEL,
)
from bench_ledger.queries.draft._numbers import Found

__all__ = ["IDENTITY", "Facets", "RunScope", "facets_with_row", "names_run", "system_names"]


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
IDENTITY = ("model", "served_model", "engine", "dataset")


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
    texts = [own_word(f, row), own_word(f, sentence) if not f.place.row else "", f.place.column or ""]
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
        if factor in IDENTITY:
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
