"""The basis proposer of `ledger claims draft` on small reports with known answers.

Derivations and n/a need no ledger. Metric proposals run against a small in-memory view of a ledger
(runs with their settings and a table of metric values); the candidate check itself is the audit's.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

from bench_ledger.errors import NotFound
from bench_ledger.queries.audit import audit
from bench_ledger.queries.draft import RunScope, draft_claims
from bench_ledger.queries.metrics.registry import METRICS
from bench_ledger.queries.values import MetricValue, Scope


def drafted(tmp_path: Path, text: str, **kw):
    report = tmp_path / "report.md"
    report.write_text(text, encoding="utf-8")
    return draft_claims(report, **kw).claims


def by_text(cf, text: str):
    hits = [c for c in cf.claims if c.text == text]
    assert len(hits) == 1, [c.text for c in cf.claims]
    return hits[0]


def operands(cf, claim) -> list[str]:
    ids = cf.by_id()
    return [ids[o].text for o in claim.derived.operands]


ZH = """压测报告
1. 结果
| 项目 | 旧版 | 新版 | 观察 |
|---|---|---|---|
| TTFT | 11.51s | 9.65s | 约 −16.2% |
总 TPM 的最小/最大值为 21,170 与 1,840,234，约 86.9 倍。
C64 聚合输出由 2,577.0 降至 2,329.1，约 9.6%。
单卡可见显存 97,871 MiB，约 95.577 GiB。
专家分片：384÷16＝24 专家/卡。
2.3 九次启动：五次失败，四次就绪
3. 其他
在 4 与 8 并发之间变化 +97.2%。
| 档位 | 总/输出 TPM |
|---|---|
| 50K/200 | N/A¹ |
¹ 归档报告的 TPM 按目标比例换算，不是实测。
本次结论另有来源：归档报告给出 7,063 token/s。
"""


def test_derivations_of_nearby_numbers(tmp_path: Path) -> None:
    cf = drafted(tmp_path, ZH)
    change = by_text(cf, "约 −16.2%")  # a table row: (9.65 / 11.51 - 1) x 100
    assert (change.derived.op, operands(cf, change)) == ("percent_change", ["11.51s", "9.65s"])
    ratio = by_text(cf, "约 86.9 倍")  # the larger over the smaller, whatever the order printed
    assert (ratio.derived.op, operands(cf, ratio)) == ("ratio", ["1,840,234", "21,170"])
    fall = by_text(cf, "约 9.6%")  # printed without a sign after 降至: the sign comes from the arithmetic
    assert (fall.derived.op, operands(cf, fall), fall.value) == ("percent_change", ["2,577.0", "2,329.1"], "−9.6%")
    conv = by_text(cf, "约 95.577 GiB")
    assert (conv.derived.op, operands(cf, conv)) == ("convert", ["97,871 MiB"])
    quotient = by_text(cf, "24")
    assert (quotient.derived.op, operands(cf, quotient)) == ("divide", ["384", "16"])
    total = by_text(cf, "九次")
    assert (total.derived.op, operands(cf, total)) == ("sum", ["五次", "四次"])
    assert all(c.draft for c in cf.claims)


def test_coarse_operands_prove_nothing_and_na_takes_its_footnote(tmp_path: Path) -> None:
    cf = drafted(tmp_path, ZH)
    coarse = by_text(cf, "+97.2%")  # 4 -> 8 "fits" +97.2% only because 4 and 8 are printed coarsely
    assert coarse.basis == "quoted"
    na = by_text(cf, "N/A¹")
    assert na.na.reason == "归档报告的 TPM 按目标比例换算，不是实测。"
    assert na.kind == "aggregate_token_rate" and na.unit == "tokens/min"
    quoted = by_text(cf, "7,063 token/s")
    assert quoted.basis == "quoted" and "归档报告给出" in quoted.quoted.source


def test_drafted_derivations_audit_consistent(tmp_path: Path) -> None:
    """What the drafter proposes as derived, the audit finds consistent (one interval arithmetic)."""
    cf = drafted(tmp_path, ZH)
    report = audit(cf, None)
    verdicts = {r.text: r.verdict for r in report.results if r.basis == "derived"}
    assert verdicts == {
        "约 −16.2%": "consistent",
        "约 86.9 倍": "consistent",
        "约 9.6%": "consistent",
        "约 95.577 GiB": "consistent",
        "24": "consistent",
        "九次": "consistent",
    }


# ----------------------------------------------------------------------------- metric proposals


class FakeView:
    """The part of queries.draft._candidates.LedgerView the proposer reads, over a table of values."""

    def __init__(self, runs: list[RunScope], values: dict[tuple[str, Scope], MetricValue]) -> None:
        self.ledger = None
        self.metrics = METRICS
        self.runs = runs
        self.batches = sorted({r.batch for r in runs})
        self.launches: list[tuple[str, int]] = []
        self.values = values

    @property
    def known_words(self) -> set[str]:
        return {b.lower() for b in self.batches} | {r.label.lower() for r in self.runs}

    def cards(self, name: str, batch: str) -> list[str]:
        return []

    def evaluate(self, ledger, name: str, scope: Scope) -> MetricValue:
        mt = METRICS[name]
        v = self.values.get((name, scope))
        if v is None:
            if (name, scope) in self.values:
                raise NotFound("unreachable")
            return MetricValue(name, scope, None, mt.unit, mt.quantity_kind, "n/a", na_reason="not in this test")
        return v


def value(name: str, scope: Scope, x: str | None, reason: str | None = None) -> MetricValue:
    mt = METRICS[name]
    if x is None:
        return MetricValue(name, scope, None, mt.unit, mt.quantity_kind, "n/a", na_reason=reason)
    return MetricValue(name, scope, Fraction(x), mt.unit, mt.quantity_kind, "derived")


RUNS = [
    RunScope("fx", "50k-200-c4n8", 50000, 200, 4, 8),
    RunScope("fx", "50k-200-c8n16", 50000, 200, 8, 16),
    RunScope("fx", "cold-50k-cold", 50000, None, 1, 1),
    RunScope("fx", "cold-50k-warm", 50000, None, 1, 1),
]


def scope(label: str) -> Scope:
    return Scope(batch="fx", run=label)


VALUES = {
    ("total_tpm", scope("50k-200-c4n8")): value("total_tpm", scope("50k-200-c4n8"), "1840234.2"),
    ("total_tpm", scope("50k-200-c8n16")): value("total_tpm", scope("50k-200-c8n16"), "1840233.9"),  # same print
    ("output_tpm", scope("50k-200-c8n16")): value("output_tpm", scope("50k-200-c8n16"), "2791.2"),
    ("output_tpm", scope("50k-200-c4n8")): value("output_tpm", scope("50k-200-c4n8"), "2800.4"),  # off
    ("total_tpm", scope("cold-50k-cold")): value("total_tpm", scope("cold-50k-cold"), None, "no times captured"),
    ("total_tpm", scope("cold-50k-warm")): value("total_tpm", scope("cold-50k-warm"), None, "no times captured"),
    **{
        (m, scope("cold-50k-cold")): value(m, scope("cold-50k-cold"), "11.019")
        for m in ("ttft_mean", "ttft_p50", "ttft_p90", "ttft_p99", "ttft_max")
    },  # one request: every statistic agrees
    **{
        (m, scope("cold-50k-warm")): value(m, scope("cold-50k-warm"), "0.336")
        for m in ("ttft_mean", "ttft_p50", "ttft_p90", "ttft_p99", "ttft_max")
    },
}

REPORT = """Metric test
3.3 档位
| 档位 | C / N | 总 TPM | 输出 TPM |
|---|---|---|---|
| 50K / 200 | 4 / 8 | 1,840,234 | 2,791 |
3.4 冷暖
fx 的单请求对照，冷/暖 TTFT 为 11.019/0.336 秒。总 TPM 为 397,849/6,615,887。
"""


def test_metric_proposed_when_the_row_names_the_scope(tmp_path: Path) -> None:
    cf = drafted(tmp_path, REPORT, view=FakeView(RUNS, VALUES))
    tpm = by_text(cf, "1,840,234")
    assert tpm.metric.name == "total_tpm" and tpm.metric.scope.run == "50k-200-c4n8"
    ev = tpm.evidence["basis"]
    assert ev["confidence"] == "high"
    # the other run reproduces the printed number too, but the C / N column contradicts it
    assert any("50k-200-c8n16" in r and "concurrency 4 != 8" in r for r in ev["rejected"])
    # reproduced only by a run the row contradicts: not proposed, the candidate is shown
    out = by_text(cf, "2,791")
    assert out.basis == "quoted"
    assert any("50k-200-c8n16" in c for c in out.evidence["candidates_not_proposed"])


def test_pair_members_take_their_own_word_and_equal_statistics_take_the_median(tmp_path: Path) -> None:
    cf = drafted(tmp_path, REPORT, view=FakeView(RUNS, VALUES))
    cold, warm = by_text(cf, "11.019"), by_text(cf, "0.336 秒")
    assert (cold.metric.name, cold.metric.scope.run) == ("ttft_p50", "cold-50k-cold")  # 冷 -> cold
    assert (warm.metric.name, warm.metric.scope.run) == ("ttft_p50", "cold-50k-warm")  # 暖 -> warm
    assert cold.unit == "s"


def test_named_scope_whose_metric_is_na_is_proposed_for_the_audit_to_say_so(tmp_path: Path) -> None:
    cf = drafted(tmp_path, REPORT, view=FakeView(RUNS, VALUES))
    a, b = by_text(cf, "397,849"), by_text(cf, "6,615,887")
    assert (a.metric.name, a.metric.scope.run, b.metric.scope.run) == ("total_tpm", "cold-50k-cold", "cold-50k-warm")
    assert a.evidence["basis"]["confidence"] == "medium"
    verdicts = {r.text: r.verdict for r in audit(cf, None, evaluate=FakeView(RUNS, VALUES).evaluate).results}
    assert verdicts["397,849"] == "not-derivable" and verdicts["1,840,234"] == "reproduced"


def test_unique_match_without_context_needs_enough_digits(tmp_path: Path) -> None:
    runs = [RunScope("b", f"r{i}", None, None, i, i) for i in range(1, 5)]
    rates = {"r1": "133.391", "r2": "51.2", "r3": "70.4", "r4": "90.8"}
    vals = {
        ("per_stream_decode_rate_median", Scope(batch="b", run=r)): value(
            "per_stream_decode_rate_median", Scope(batch="b", run=r), x
        )
        for r, x in rates.items()
    }
    cf = drafted(tmp_path, "t\n1 x\n单流速度为 133.39 token/s。\n单流速度约 51 token/s。\n", view=FakeView(runs, vals))
    first, second = by_text(cf, "133.39 token/s"), by_text(cf, "约 51 token/s")
    assert (first.metric.scope.run, first.evidence["basis"]["confidence"]) == ("r1", "low")
    assert second.basis == "quoted"  # two digits matching one of four runs could be chance
