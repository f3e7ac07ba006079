"""SGLang ``python -m sglang.bench_serving`` JSON Lines results (formats.md section 2).

Decisions, and why:

* **Layout.** JSON Lines, each run appends one object: one :class:`ParsedRun` per line, addressed
  ``line N $.key`` even when the file has a single line (the format is always JSON Lines).
  Older versions write a subset of the keys; every numeric key that is not a setting is kept.
* **Token source: "requested".** With ``--output-details`` the file carries ``output_lens``. SGLang
  fills it from the server's ``usage.completion_tokens`` when the reply had usage, and otherwise
  with the *requested* output length (older versions: always the requested length). Nothing in the
  file says which happened, so the conservative reading is the only safe one: the capture's
  ``token_source`` is ``"requested"`` and the output token counts are never offered as measured
  (R3). ``input_lens`` are prompt lengths counted by the client tokenizer. The same caveat is noted
  on ``total_output_tokens`` and the throughputs derived from it, and it applies to runs without
  per-request arrays as well, since those aggregates are sums of the same ``output_lens``.
* **Success.** As in vLLM: ``ok`` when ``errors[i] == ""``, else ``failed``; without ``errors``
  every status is ``unknown``. TTFT 0.0 of a failed request is a placeholder, stored as None.
  There are no start times and no latency array, so no clock and no send/end times.
* **``concurrency`` is not a setting.** SGLang defines it as sum(e2e latency) / duration, the mean
  number of requests in flight. It is kept as ``Published`` key ``concurrency`` with a note;
  ``RunInfo.concurrency`` is ``max_concurrency`` (the configured limit), or None.
* **Settings are not actual lengths (R3).** For ``dataset_name`` random, ``random_input_len`` and
  ``random_output_len`` become ``input_target_tokens`` / ``output_cap_tokens`` (with
  ``random_range_ratio`` < 1 they are upper bounds of a range); for sharegpt,
  ``sharegpt_output_len`` when set. The argparse defaults of the other dataset's settings are
  written too; they are dropped. Without ``dataset_name`` (oldest versions) the settings are only
  kept as metadata text, since nothing says which dataset ran.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench_ledger.errors import ParseError
from bench_ledger.importers._toolfiles import distinct_served, stated
from bench_ledger.importers._vllm_result import (
    NUMBER,
    factors_of,
    float_or_none,
    int_or_none,
    jpath_of,
    placeholders,
    published,
    read_arrays,
    success_rule_lists,
    top_keys,
    type_name,
    validate_columns,
    where,
)
from bench_ledger.importers.base import ParseOptions, first_json_value, iter_json_lines, prefetched, setting_text
from bench_ledger.records import Capture, ParsedArtefact, ParsedRun, Published, RequestColumns, RunInfo, Stated
from bench_ledger.tools import SERVING_LATENCY_STAT, Tool

__all__ = ["IMPORTER"]

TOKENS_NOTE = (
    "sum of output_lens: the server's usage.completion_tokens where the reply had it, "
    "else the requested output length; the file does not say which (not confirmed measured)"
)
AGGREGATES: dict[str, tuple[str | None, str, str | None]] = {
    "duration": ("s", "duration", None),
    "completed": ("requests", "request_count", None),
    "total_input_tokens": ("tokens", "token_count", None),
    "total_input_text_tokens": ("tokens", "token_count", None),
    "total_input_vision_tokens": ("tokens", "token_count", None),
    "total_output_tokens": ("tokens", "token_count", TOKENS_NOTE),
    "total_output_tokens_retokenized": ("tokens", "token_count", "generated text re-counted by the client tokenizer"),
    "request_throughput": ("requests/s", "request_rate", None),
    "input_throughput": ("tokens/s", "aggregate_token_rate", None),
    "output_throughput": ("tokens/s", "aggregate_token_rate", "total_output_tokens / duration; " + TOKENS_NOTE),
    "total_throughput": ("tokens/s", "aggregate_token_rate", "(input + output tokens) / duration; " + TOKENS_NOTE),
    "max_output_tokens_per_s": ("tokens/s", "aggregate_token_rate", None),
    "max_concurrent_requests": ("requests", "concurrency", None),
    "concurrency": (
        "requests",
        "concurrency",
        "SGLang's sum of end-to-end latencies / duration (mean requests in flight), "
        "NOT the configured concurrency (that is max_concurrency)",
    ),
    "accept_length": ("tokens", "other", "speculative decoding: mean tokens accepted per step"),
}
SETTINGS = {
    "backend",
    "dataset_name",
    "request_rate",
    "max_concurrency",
    "sharegpt_output_len",
    "random_input_len",
    "random_output_len",
    "random_range_ratio",
    "fixed_output_len",
    "num_prompts",
    "seed",
    "tag",
}
ARRAYS = ("input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors")
MARKERS = {"dataset_name", "random_input_len", "total_output_tokens_retokenized"}

SUCCESS_RULE = (
    "ok when errors[i] == '' else failed (SGLang writes no success flag in the file); TTFT 0.0 of "
    "failed requests is a placeholder, stored as None. output_lens may be requested lengths, not "
    "measurements (token_source 'requested')."
)
NO_ERRORS_RULE = "no errors array in the file (--output-details not used): every status is unknown"
SAMPLE_NOTE = (
    "output_lens are usage.completion_tokens when the server sent usage, else the requested "
    "length; the file does not say which, so token counts are recorded as 'requested'"
)


def _label(obj: dict[str, Any], dataset: str | None, rate: str | None) -> str:
    parts = [str(obj.get("backend") or "sglang")]
    if dataset:
        parts.append(dataset)
    if dataset and dataset.startswith("random"):
        # the lengths are drawn from [len x random_range_ratio, len]: exact only with a ratio of 1 (R3);
        # otherwise (or when the file does not say) the settings are upper bounds, and the label says so
        ratio = obj.get("random_range_ratio")
        exact = type(ratio) in NUMBER and ratio == 1
        rel = "=" if exact else "<="
        parts += [f"in{rel}{obj.get('random_input_len')}", f"out{rel}{obj.get('random_output_len')}"]
        if ratio is not None and not exact:
            parts.append(f"range_ratio={ratio}")
    elif dataset == "sharegpt" and obj.get("sharegpt_output_len") is not None:
        parts.append(f"out={obj['sharegpt_output_len']}")
    conc = obj.get("max_concurrency")
    parts += [f"rate={rate}", f"c={'inf' if conc is None else conc}"]
    if isinstance(obj.get("tag"), str) and obj["tag"]:
        parts.append(obj["tag"])
    return " ".join(parts)


def _unused_default(key: str, dataset: str | None) -> bool:
    """A length setting of another dataset: argparse defaults written even though unused."""
    if dataset is None:
        return False
    if key.startswith("random_"):
        return not dataset.startswith("random")
    return key == "sharegpt_output_len" and dataset != "sharegpt"


def _targets(obj: dict[str, Any], dataset: str | None, path: Path, prefix: str) -> tuple[int | None, int | None]:
    """(input target, output cap) in tokens: workload settings, never actual lengths (R3)."""
    if dataset and dataset.startswith("random"):
        return (int_or_none(obj, "random_input_len", path, prefix), int_or_none(obj, "random_output_len", path, prefix))
    if dataset == "sharegpt":
        return None, int_or_none(obj, "sharegpt_output_len", path, prefix)
    return None, None


# server_info (the server's own arguments, ``/get_server_info``): factor -> its key there
_SERVER = {
    "model": "model_path",
    "served_model": "served_model_name",
    "engine_version": "version",
    "tp": "tp_size",
    "dp": "dp_size",
    "pp": "pp_size",
    "ep": "ep_size",
}


def _factors(obj: dict[str, Any], dataset: str | None, prefix: str, path: Path) -> dict[str, Stated]:
    """What one result line states of the system under test: the settings vLLM's results share
    (``_vllm_result.factors_of``), the lengths of the dataset that ran (as :func:`_targets`) and the
    server's arguments in ``server_info``; of a prefill/decode pair (``server_info.prefill``,
    ``.decode``) a factor only where every server states the same value."""

    def at(parts: tuple) -> str:
        return where(prefix, jpath_of(parts))

    found = factors_of(obj, prefix, path)
    if dataset is not None:
        for factor, key in (
            ("input_len", "random_input_len"),
            ("output_len", "random_output_len"),
            ("output_len", "sharegpt_output_len"),
        ):
            if factor not in found and not _unused_default(key, dataset):
                found.update(stated(path, obj, {factor: ((key,),)}, at))
    info = obj.get("server_info")
    info = info if isinstance(info, dict) else {}
    servers: list[tuple[str | int, ...]] = (
        [("server_info",)]
        if "model_path" in info
        else [
            ("server_info", role, i)
            for role in ("prefill", "decode")
            if isinstance(info.get(role), list)
            for i in range(len(info[role]))
        ]
    )
    for factor, key in _SERVER.items():
        got = [stated(path, obj, {factor: ((*server, key),)}, at).get(factor) for server in servers]
        if got and all(g is not None for g in got) and len({g.value for g in got if g is not None}) == 1:
            found.setdefault(factor, got[0])
    return distinct_served(found)


def _requests(arrays: dict[str, list], n: int, line: int, path: Path, prefix: str) -> RequestColumns:
    none = [None] * n
    ruled = success_rule_lists(arrays, n, ("ttfts",))
    status, error, kept = ruled or (["unknown"] * n, arrays.get("errors", none), arrays)
    cols: dict[str, list[Any]] = {
        "idx": list(range(n)),
        "line": [line] * n,
        "status": status,
        "error": error,
        "retries": none,
        "input_tokens": arrays.get("input_lens", none),
        "output_tokens": arrays.get("output_lens", none),
        "send_ns": none,
        "first_token_ns": none,
        "end_ns": none,
        "ttft_s": kept.get("ttfts", none),
        "latency_s": none,
        "queue_s": none,
        "itl_mean_s": none,
        "cached_tokens": none,
        "chunk_gaps_s": arrays.get("itls", none),
    }
    return validate_columns(cols, path, prefix, ruled is not None)


def _fields(arrays: dict[str, list]) -> list[str]:
    pairs = (
        ("input_lens", "input_tokens"),
        ("output_lens", "output_tokens"),
        ("ttfts", "ttft_s"),
        ("itls", "chunk_gaps"),
    )
    fields = [field for array, field in pairs if array in arrays]
    return fields + (["status", "error"] if "errors" in arrays else [])


def parse_run(obj: object, line: int, path: Path) -> ParsedRun:
    """One JSON Lines object -> one run."""
    prefix = f"line {line}"
    if not isinstance(obj, dict):
        raise ParseError(path, where(prefix), None, f"expected a JSON object, got {type_name(obj)}")
    arrays, n = read_arrays(obj, ARRAYS, path, prefix)
    rate = setting_text(obj.get("request_rate"), path, where(prefix, ".request_rate"), "request_rate")
    dataset = obj.get("dataset_name") if isinstance(obj.get("dataset_name"), str) else None
    pubs: list[Published] = []
    metadata: dict[str, str] = {}
    ignored: list[str] = []
    for key, value in obj.items():
        if key in ARRAYS or key in {"request_rate", "max_concurrency", "num_prompts", "dataset_name"}:
            continue
        if key in AGGREGATES:
            unit, kind, note = AGGREGATES[key]
            pubs.append(published(key, value, prefix, path, unit, kind, note))
        elif SERVING_LATENCY_STAT.fullmatch(key):
            pubs.append(published(key, value, prefix, path, "ms", "latency"))
        elif isinstance(value, str):
            metadata[key] = value
        elif key in SETTINGS:
            if value is not None and not _unused_default(key, dataset):
                metadata[key] = setting_text(value, path, where(prefix, f".{key}"), key) or ""
        elif type(value) in NUMBER:
            pubs.append(published(key, value, prefix, path, None, "other", "key not known to the importer"))
        elif value is not None:
            ignored.append(key)
    if ignored:
        metadata["ignored_keys"] = ",".join(ignored)
    target, cap = _targets(obj, dataset, path, prefix)
    info = RunInfo(
        label=_label(obj, dataset, rate),
        tool=Tool.SGLANG_BENCH,
        input_target_tokens=target,
        output_cap_tokens=cap,
        concurrency=int_or_none(obj, "max_concurrency", path, prefix),
        request_count=int_or_none(obj, "num_prompts", path, prefix),
        request_rate=rate,
        dataset=dataset,
        duration_s=float_or_none(obj, "duration"),
        locator=where(prefix),
        metadata=metadata,
        factors=_factors(obj, dataset, prefix, path),
    )
    capture = Capture(
        fields=_fields(arrays),
        record_count=n,
        clock=None,
        token_source="requested",
        success_rule=SUCCESS_RULE if "errors" in arrays else NO_ERRORS_RULE,
        sample_note=SAMPLE_NOTE,
    )
    requests = _requests(arrays, n, line, path, prefix) if n else None
    return ParsedRun(info=info, capture=capture, requests=requests, published=placeholders(pubs))


class SglangBenchImporter:
    name = "sglang-bench"
    description = "SGLang bench_serving JSON Lines (one run per line, with or without --output-details)"

    def sniff(self, head: bytes) -> str | None:
        kind, _ = first_json_value(head)
        if kind != "object":
            return "not a JSON object"
        keys = top_keys(head)
        if "endpoint_type" in keys:
            return "has vLLM's 'endpoint_type' key"
        if not {"duration", "completed"} <= keys:
            return "no 'duration' and 'completed' keys"
        if not keys & MARKERS:
            return "none of SGLang's keys dataset_name / random_input_len / total_output_tokens_retokenized"
        return None

    def parse(self, path: Path, options: ParseOptions) -> ParsedArtefact:
        """Runs are streamed line by line; an error in a later line raises while iterating."""
        path = Path(path)

        def runs() -> Iterator[ParsedRun]:
            found = False
            for line, obj in iter_json_lines(path):
                found = True
                yield parse_run(obj, line, path)
            if not found:
                raise ParseError(path, None, None, "empty file: no JSON Lines runs")

        return ParsedArtefact(format=self.name, format_version=None, runs=prefetched(runs()))


IMPORTER = SglangBenchImporter()
