"""TensorRT-LLM ``trtllm-bench`` ``--report_json``: one JSON object of sections, aggregates only.

Sections (``tensorrt_llm/bench/dataclasses/reporting.py``): ``engine`` (model, version, backend,
dtypes, quantization), ``machine`` (GPU name, memory, clock; latency reports), ``world_info``
(tp/pp/ep/world size, batch and token limits, ``issue_rate``), ``request_info``, ``performance``,
``streaming_metrics`` (streaming runs only), ``decoding_stats`` (speculative decoding only) and
``dataset``. Units are in the key names (``_ms``, ``_tok_s``, ``_req_s``); percentile blocks of
``*_ms`` sections are milliseconds, ``gen_tps_percentiles`` tokens/s per user.

Every number is the tool's claim (reported). Kept out of the numbers on purpose:
``world_info.issue_rate`` in latency mode (``latency`` reports carry a ``machine`` section and no
real issue schedule: the value is queue time / requests, e.g. 6.8e16 req/s, meaningless there) is
kept as ``n/a`` with that note. The engine and world sections become run metadata (strings as
printed; ``engine_dir`` is the string ``"None"`` for the PyTorch backend).

trtllm-bench's percentiles use a *floor index*: ``sorted(values)[int(n * q)]`` (``PercentileStats``
in ``statistics.py``), not interpolation; with 20 requests p95 and p99 are both the maximum.
"""

from __future__ import annotations

from pathlib import Path

from bench_ledger.importers._toolfiles import (
    as_dict,
    has_key,
    head_text,
    integer,
    is_number,
    jpath,
    mapping,
    placeholder,
    published,
    stated,
)
from bench_ledger.importers.base import ParseOptions, load_json
from bench_ledger.records import Capture, ParsedArtefact, ParsedRun, Published, RunInfo
from bench_ledger.tools import Tool

__all__ = ["IMPORTER", "NO_GPU_MEMORY"]

TOOL = Tool.TRTLLM_BENCH
ISSUE_RATE_NOTE = "latency mode: issue_rate is queue time / requests with no issue schedule, not a rate; ignored"
# reporting.py's _query_gpu_info: what it writes where torch could not read the GPU's properties
NO_GPU_NAME = "Unknown"
NO_GPU_MEMORY = (
    "trtllm-bench's placeholder, not a measurement: machine.name 'Unknown' (torch could not read the "
    "GPU's properties), memory.total then 0.0"
)
SUCCESS_RULE = "aggregates only: trtllm-bench reports no per-request success"
_SECTIONS = ("world_info", "request_info", "performance", "streaming_metrics", "decoding_stats", "dataset", "machine")
_META = {
    "engine": (
        "model",
        "model_path",
        "engine_dir",
        "revision",
        "version",
        "backend",
        "dtype",
        "kv_cache_dtype",
        "quantization",
        "max_input_length",
        "max_sequence_length",
    ),
    "world_info": (
        "tp_size",
        "pp_size",
        "ep_size",
        "world_size",
        "max_batch_size",
        "max_num_tokens",
        "scheduling_policy",
        "kv_cache_percentage",
    ),
    "machine": ("name",),
}


# What the report states of the system under test and the load (reporting.py's sections): the GPU
# count is the world size (one rank per GPU); the lengths are the dataset's averages as the report
# states them in request_info.
FACTORS = {
    "model": (("engine", "model"),),
    "engine": (("engine", "backend"),),
    "engine_version": (("engine", "version"),),
    "hardware": (("machine", "name"),),
    "gpu_count": (("world_info", "world_size"),),
    "tp": (("world_info", "tp_size"),),
    "pp": (("world_info", "pp_size"),),
    "ep": (("world_info", "ep_size"),),
    "dataset": (("dataset", "dataset_path"),),
    "input_len": (("request_info", "avg_input_length"),),
    "output_len": (("request_info", "avg_output_length"),),
    "prompt_count": (("request_info", "num_requests"),),
}


def _factors(path: Path, data: dict) -> dict:
    """:data:`FACTORS` as the report states them; a GPU name 'Unknown' (:data:`NO_GPU_NAME`) states none."""
    found = stated(path, data, FACTORS)
    if "hardware" in found and found["hardware"].value == NO_GPU_NAME:
        del found["hardware"]
    return found


def unit_kind(parts: list[str]) -> tuple[str | None, str]:
    """Unit and quantity kind of one number from the key names trtllm-bench chose."""
    key, parent = parts[-1], (parts[-2] if len(parts) > 1 else "")
    section = parts[0]
    name = key if not parent.endswith("_percentiles") and not parent.endswith("_stats") else parent
    if name.endswith("_ms") or parent.endswith("_percentiles_ms") or parent in ("tpot_percentiles", "ttft_percentiles"):
        return "ms", "duration" if name == "total_latency_ms" else "latency"
    if name.endswith("_req_s"):
        return "requests/s", "request_rate"
    if name.endswith("_tok_s") or parent == "gen_tps_percentiles":
        per_stream = "per_user" in name or name == "token_output_speed_tok_s" or parent == "gen_tps_percentiles"
        return "tokens/s", "per_stream_token_rate" if per_stream else "aggregate_token_rate"
    if section == "dataset" and (
        parent in ("isl_stats", "osl_stats", "seq_len_stats") or key.startswith(("max_", "avg_"))
    ):
        return "tokens", "token_count"
    if section == "request_info":
        if key == "num_requests":
            return None, "request_count"
        if key == "avg_num_concurrent_requests":
            return None, "concurrency"
        return "tokens", "token_count"
    if key == "num_requests":
        return None, "request_count"
    if section == "world_info":
        if key in ("tp_size", "pp_size", "ep_size", "world_size", "max_batch_size"):
            return None, "count"
        if key == "max_num_tokens":
            return "tokens", "token_setting"
        if key == "kv_cache_percentage":
            return None, "ratio"
        if key == "issue_rate":
            return "requests/s", "request_rate"
    if section == "machine":
        if key == "memory.total":
            return "GiB", "device_memory"
        if key == "clocks.mem":
            return "GHz", "clock_frequency"
    return None, "other"


class TrtllmBenchImporter:
    name = "trtllm-bench"
    description = "TensorRT-LLM trtllm-bench --report_json (engine, world, request, performance sections)"

    def sniff(self, head: bytes) -> str | None:
        text = head_text(head)
        if not text.startswith("{"):
            return "not a JSON object"
        if not all(has_key(text, k) for k in ("engine", "world_info", "request_info")):
            return "no trtllm-bench engine / world_info / request_info sections"
        return None

    def parse(self, path: Path, options: ParseOptions) -> ParsedArtefact:
        data = mapping(path, "$", None, load_json(path))
        engine = mapping(path, jpath("engine"), "engine", data.get("engine"))
        world = mapping(path, jpath("world_info"), "world_info", data.get("world_info"))
        req = mapping(path, jpath("request_info"), "request_info", data.get("request_info"))
        mapping(path, jpath("performance"), "performance", data.get("performance"))
        latency_mode = isinstance(data.get("machine"), dict)
        out: list[Published] = []
        for section in _SECTIONS:
            if isinstance(data.get(section), dict):
                self._walk(path, data[section], [section], out, latency_mode)
        metadata = {
            f"{sec}.{k}": str(data[sec][k])
            for sec, keys in _META.items()
            if isinstance(data.get(sec), dict)
            for k in keys
            if data[sec].get(k) is not None
        }
        metadata["mode"] = "latency" if latency_mode else "throughput"
        if isinstance(data.get("decoding_stats"), dict) and data["decoding_stats"].get("mode") is not None:
            metadata["decoding_stats.mode"] = str(data["decoding_stats"]["mode"])
        dataset = as_dict(data.get("dataset"))
        model = engine.get("model")
        n = integer(path, jpath("request_info", "num_requests"), "num_requests", req.get("num_requests"))
        label = f"{TOOL} {model} tp{world.get('tp_size')} pp{world.get('pp_size')} bs{world.get('max_batch_size')} n{n}"
        run = ParsedRun(
            info=RunInfo(
                label=label,
                tool=TOOL,
                tool_version=str(engine["version"]) if engine.get("version") is not None else None,
                request_count=n,
                dataset=str(dataset["dataset_path"]) if dataset.get("dataset_path") is not None else None,
                locator="$",
                metadata=metadata,
                factors=_factors(path, data),
            ),
            capture=Capture(fields=[], record_count=0, token_source="unknown", success_rule=SUCCESS_RULE),
            published=out,
        )
        return ParsedArtefact(
            format=self.name, format_version=str(engine.get("version")) if engine.get("version") else None, runs=[run]
        )

    def _walk(self, path: Path, obj: dict, parts: list[str], out: list[Published], latency_mode: bool) -> None:
        for key, value in obj.items():
            here = [*parts, str(key)]
            if isinstance(value, dict):
                self._walk(path, value, here, out, latency_mode)
                continue
            if not (is_number(value) or value is None) or isinstance(value, bool):
                continue
            unit, kind = unit_kind(here)
            if here == ["world_info", "issue_rate"] and latency_mode:
                out.append(
                    Published(
                        key="world_info.issue_rate",
                        text=repr(value) if isinstance(value, float) else str(value),
                        flag="n/a",
                        na_reason=ISSUE_RATE_NOTE,
                        unit=unit,
                        quantity_kind=kind,
                        locator=jpath(*here),
                        note=ISSUE_RATE_NOTE,
                    )
                )
                continue
            p = published(".".join(here), value, locator=jpath(*here), unit=unit, kind=kind)
            if (
                p is not None
                and here == ["machine", "memory.total"]
                and p.value == 0
                and obj.get("name") == NO_GPU_NAME
            ):
                p = placeholder(p, NO_GPU_MEMORY)
            if p is not None:
                out.append(p)


IMPORTER = TrtllmBenchImporter()
