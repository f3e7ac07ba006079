"""What `ledger report` shows, as typed data: the run, launch and card rows, plot series, evidence
entries and the audit rows, with the markers and ids the renderers (:mod:`queries.report.render`) use.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from bench_ledger.queries.values import MetricValue

__all__ = [
    "CARD_STATS",
    "MARKER_LEGEND",
    "NOT_FROM_RECORDS",
    "PLOTTED_KINDS",
    "POWER_STATS",
    "RUN_COLUMNS",
    "SAMPLERS",
    "AuditRow",
    "CardRow",
    "Evidence",
    "LaunchRow",
    "Plot",
    "ReportData",
    "RunRow",
    "Series",
    "anchor",
    "card_column",
    "evidence_id",
    "figure",
]

# the run-table columns: (metric, heading, number format)
RUN_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("requests_ok", "ok", ",.0f"),
    ("requests_failed", "failed", ",.0f"),
    ("total_tpm", "total TPM", ",.0f"),
    ("output_tpm", "output TPM", ",.0f"),
    ("ttft_p50", "TTFT p50 s", ".4f"),
    ("ttft_p99", "TTFT p99 s", ".4f"),
    ("e2e_latency_p50", "E2E p50 s", ".4f"),
    ("per_stream_decode_rate_median", "decode tok/s per stream (median)", ",.2f"),
)
_MARKERS = {"derived": "d", "reported": "r", "estimated": "e", "measured": "m"}
MARKER_LEGEND = (
    "d = derived here from the captured records; r = the tool's own figure, or computed from one (reported: the weakest input decides); "
    "e = estimated; m = measured; n/a[k] = not available, reason in footnote k"
)
# why a run's figure is in the run table but not on a distribution drawn from its per-request records
NOT_FROM_RECORDS = (
    "the run's figure is the tool's own ({flag}), not derived here from per-request records; "
    "it is in the run table, marked, and has no distribution to draw"
)
POWER_STATS = ("power_sum_of_card_means_w", "power_peak_of_sum_w", "power_sum_of_card_peaks_w")
# the per-card columns: (quantity kind, statistic, heading); each sampler's counter of that kind fills it
# (dmon pwr / sm / mem, nvidia-smi power.draw / utilization.gpu / utilization.memory, dcgmi POWER / GPUTL / MCUTL)
CARD_STATS = (
    ("power", "mean", "power mean"),
    ("power", "max", "power max"),
    ("activity_time_percent", "mean", "GPU activity time mean"),
    ("memory_busy_percent", "mean", "memory busy mean"),
)
PLOTTED_KINDS = ("power", "activity_time_percent")  # a plot over time per counter of these kinds
SAMPLERS = {
    "nvidia-smi-dmon": "nvidia-smi dmon",
    "nvidia-smi-csv": "nvidia-smi --query-gpu (CSV)",
    "dcgmi-dmon": "dcgmi dmon",
}


def figure(v: MetricValue, fmt: str, notes: dict[str, int]) -> str:
    """A value with its provenance marker ("1,840,234 d"), or n/a with a footnote number (``notes``
    maps each distinct "metric: reason" to its number, in order of first use)."""
    if v.value is None:
        k = notes.setdefault(f"{v.metric}: {v.na_reason}", len(notes) + 1)
        return f"n/a[{k}]"
    x = float(v.value)
    return f"{format(x, fmt if abs(x) >= 100 or fmt != ',.0f' else '.4g')} {_MARKERS.get(v.flag, v.flag)}"


# --------------------------------------------------------------------------- typed results


@dataclass
class Evidence:
    """One numbered chain of the report: what a figure is and where it comes from."""

    id: str
    title: str
    lines: list[str]


@dataclass
class RunRow:
    batch: str
    run_id: int
    label: str
    input_target_tokens: int | None
    output_cap_tokens: int | None
    concurrency: int | None
    request_count: int | None
    values: dict[str, MetricValue]


@dataclass
class LaunchRow:
    deployment: str
    attempt: int
    outcome: str
    cause: str | None
    seconds_to_ready: MetricValue
    log: str | None  # file name and sha256 of the server log
    first_line_at: str | None  # as printed by the log (no year)
    last_line_at: str | None
    ready_at: str | None
    evidence: str = ""


@dataclass
class CardRow:
    """One card's statistics from one sampler's file (evidence: ``ev-hw-BATCH-KIND-STAT``): ``values`` and
    ``units`` keyed by ``card_column(kind, stat)``; ``source`` names the file's format and counters."""

    batch: str
    card: str
    values: dict[str, float | None]
    source: str = ""
    units: dict[str, str] = field(default_factory=dict)


def card_column(kind: str, stat: str) -> str:
    return f"{kind}-{stat}"


@dataclass
class Series:
    """One line of a plot: points (x, y) of one run or one batch; never pooled across batches."""

    label: str
    batch: str
    x: list[float]
    y: list[float]
    group: str = ""  # the panel (input tier, card kind, ...)
    # sampling intervals drawn as error bars: (position, low, high); a CDF's at the share y = position
    # (horizontal), a trend's at the point x = position (vertical)
    bars: list[tuple[float, float, float]] = field(default_factory=list)
    marks: list[float] = field(default_factory=list)  # x of the change points of a trend


@dataclass
class Plot:
    id: str
    title: str
    what: str
    unit: str
    provenance: str
    synthetic: bool
    kind: str  # cdf | tpm | timeseries | timeline | trend
    series: list[Series] = field(default_factory=list)
    windows: list[tuple[str, float, float]] = field(default_factory=list)  # (run label, start, end) on x
    missing: list[str] = field(default_factory=list)  # series left out, each with its reason
    x_label: str = ""
    y_label: str = ""
    notes: list[str] = field(default_factory=list)


@dataclass
class AuditRow:
    claim_id: str
    printed: str
    unit: str | None
    verdict: str
    rule: str | None
    recomputed: str | None
    detail: str | None
    evidence: str


@dataclass
class ReportData:
    title: str
    batches: list[str]
    generated_at: datetime
    ledger_url: str
    synthetic_batches: list[str]
    runs: list[RunRow]
    launches: list[LaunchRow]
    cards: list[CardRow]
    power: dict[str, dict[str, MetricValue]]  # batch -> the three R14 statistics
    plots: list[Plot]
    audit_source: dict | None = None
    audit_synthetic: bool = False
    audit: dict[str, list[AuditRow]] = field(default_factory=dict)  # verdict -> rows, in VERDICTS order
    evidence: dict[str, Evidence] = field(default_factory=dict)

    @property
    def synthetic(self) -> bool:
        return bool(self.synthetic_batches) or self.audit_synthetic


def anchor(*parts: object) -> str:
    """An id of the page (an evidence entry, a plot and the ids inside its inline SVG) built from
    ``parts``: ASCII letters, digits, ``_`` and ``-`` are kept, every other character is written as
    ``.<hex code point>.``, and the parts are joined by ``-``. Batch names, run labels, claim ids and
    the like are user text: an id never carries them raw (they would land inside attributes)."""
    return "-".join(_ANCHOR_UNSAFE.sub(lambda mo: f".{ord(mo.group()):x}.", str(p)) for p in parts)


_ANCHOR_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def evidence_id(run_id: int | str, metric: str) -> str:
    return anchor("ev-run", run_id, metric)
