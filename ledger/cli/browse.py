"""Commands that read a ledger: batches, runs, show, metrics, check, compare."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import click
from bench_ledger.cli.app import (
    exit_on,
    json_option,
    main,
    parse_fail_on,
    table,
    with_ledger,
)
from bench_ledger.vocab import RUN_FACTORS

if TYPE_CHECKING:  # the store (SQLAlchemy, DuckDB, Alembic) loads when a command runs, not for --help
    from bench_ledger.store import Ledger


@main.command()
@with_ledger
@json_option
def batches(ledger: Ledger, as_json: bool) -> None:
    """List batches with their status and how many runs, requests and artefacts they hold.

    \b
    Example:
      ledger batches --json
    """
    from bench_ledger.queries.catalog import list_batches, to_json

    rows = [b.as_dict() for b in list_batches(ledger)]
    if as_json:
        click.echo(to_json(rows))
    else:
        table(rows, ["id", "name", "status", "deployment", "runs", "requests", "artefacts", "closed_at"])


RUN_COLUMNS = ["id", "batch", "label", "tool", "input_target_tokens", "output_cap_tokens", "concurrency",
               "request_count", "requests", "artefacts"]  # fmt: skip


@main.command()
@with_ledger
@click.option("--batch", "batches", metavar="B", multiple=True, help="Only runs of this batch (repeatable).")
@click.option("--column", "columns", metavar="NAME", multiple=True,
              type=click.Choice(RUN_COLUMNS + [f for f in RUN_FACTORS if f not in RUN_COLUMNS]),
              help="Also show this column: a factor the run's files state (model, tp, hardware...) or a run column (repeatable).")  # fmt: skip
@click.option("--as-of", "as_of", type=click.DateTime(), help="As the ledger stood then (UTC): latest revisions recorded by then.")
@json_option
def runs(ledger: Ledger, batches: tuple[str, ...], columns: tuple[str, ...], as_of, as_json: bool) -> None:
    """List runs (load points), optionally of some batches (each row names its batch). A factor column
    shows what the run's files state (n/a: they do not); --json carries every factor and where it
    was read.

    \b
    Example:
      ledger runs --batch fx --batch m17
      ledger runs --column model --column tp
      ledger runs --as-of 2026-07-08T12:00:00
    """
    from bench_ledger.queries.catalog import list_runs, to_json

    rows = [r.as_dict() for b in each_batch(batches) for r in list_runs(ledger, b, as_of)]
    if as_json:
        click.echo(to_json(rows))
    else:
        extra = [c for c in dict.fromkeys(columns) if c not in RUN_COLUMNS]
        table([{**r, **{c: r["factors"][c]["value"] if c in r["factors"] else "n/a" for c in extra}} for r in rows],
              RUN_COLUMNS + extra)  # fmt: skip


@main.group()
def show() -> None:
    """Show one entity in detail."""


@show.command("run")
@with_ledger
@click.argument("run_id", type=int)
@json_option
def show_run(ledger: Ledger, run_id: int, as_json: bool) -> None:
    """Show a run: workload, warm state, requests and captured fields, the tool's reported aggregates.

    \b
    Example:
      ledger show run 3
    """
    from bench_ledger.queries.catalog import run_detail, to_json

    d = run_detail(ledger, run_id)
    if as_json:
        click.echo(to_json(d.as_dict()))
        return
    r = d.run
    click.echo(f"run {r.id}  {r.label}  (batch {r.batch}, deployment {d.deployment or 'n/a'})")
    click.echo(f"  tool: {r.tool or 'n/a'}   dataset: {d.dataset or 'n/a'}   seed: {d.seed if d.seed is not None else 'n/a'}")
    click.echo(f"  workload: input target {r.input_target_tokens or 'n/a'} tokens, output cap {r.output_cap_tokens or 'n/a'}"
               f" tokens, C {r.concurrency or 'n/a'}, N {r.request_count or 'n/a'}, rate {d.request_rate or 'n/a'}")  # fmt: skip
    click.echo("  warm state: " + ", ".join(f"{k} {v}" for k, v in d.warm.items()))
    if d.factors:
        click.echo("  stated by its files:")
        for k, f in d.factors.items():
            click.echo(f"    {k:<14} {f['value']}  ({f['at']})")
    la = d.launch
    click.echo(f"  launch: {la['deployment']}#{la['attempt']} ({la['label']})" if la else f"  launch: n/a ({d.launch_reason})")
    click.echo(f"  compile cache (measured): {d.warm_compile_measured or 'unknown'} ({d.warm_compile_basis})")
    sc = d.status_counts
    click.echo(f"  requests: {r.requests} ({sc['ok']} ok, {sc['failed']} failed, {sc['unknown']} unknown)")
    for c in d.captures:
        click.echo(f"  artefact {c.artefact_id} {c.file_name} [{c.format}] sha256 {c.sha256[:12]}…")
        click.echo(f"    records: {c.record_count}{'  (SAMPLED: ' + (c.sample_note or '') + ')' if c.sampled else ''}")
        if c.record_count:
            click.echo(f"    fields captured: {', '.join(c.fields) or 'none'}")
            click.echo(f"    not captured (n/a): {', '.join(c.missing) or 'none'}")
            click.echo(f"    clock: {c.clock or 'no times'}   tokens: {c.token_source}")
            click.echo(f"    success: {c.success_rule}")
    if d.published:
        click.echo("  reported by the tool (as printed, not recomputed here):")
        width = max(len(p.key) for p in d.published)
        for p in d.published:
            shown = p.text if p.flag != "n/a" else f"n/a ({p.na_reason})"
            click.echo(f"    {p.key:<{width}}  {shown} {p.unit or ''}".rstrip())


@main.command()
@with_ledger
@click.option("--batch", "batches", metavar="B", multiple=True, help="Only runs of this batch (repeatable).")
@click.option("--run", "run_id", type=int, metavar="ID", help="Only this run.")
@json_option
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV (value, flag and reason per metric).")
@click.option("--list", "as_list", is_flag=True, help="List every registered metric (name, unit, quantity kind).")
def metrics(ledger: Ledger, batches: tuple[str, ...], run_id: int | None, as_json: bool, as_csv: bool,
            as_list: bool = False) -> None:  # fmt: skip
    """One row per run: workload settings, total and output TPM, TTFT p50, each with its provenance.

    Rows of several batches are shown side by side, each labelled with its batch; nothing is
    totalled or pooled across runs or batches (R2). `--list` lists the metrics a claims file
    can name.

    \b
    Example:
      ledger metrics --batch fx --batch m17
      ledger metrics --list
    """
    import csv

    from bench_ledger.queries.metrics import list_metrics, run_metrics
    from bench_ledger.queries.report import figure as _cell

    if as_list:
        described = list_metrics()
        if as_json:
            click.echo(json.dumps(described, indent=2))
        else:
            table(described, ["name", "unit", "quantity_kind", "statistic", "family"])
        return

    rows = run_metrics(ledger, list(batches) or None, run_id)
    if as_json:
        click.echo(json.dumps([r.as_dict() for r in rows], indent=2, default=str))
        return
    if as_csv:
        flat = [r.flat() for r in rows]
        writer = csv.DictWriter(sys.stdout, fieldnames=list(flat[0]) if flat else ["run_id"])
        writer.writeheader()
        writer.writerows(flat)
        return
    notes: dict[str, int] = {}
    out = []
    for r in rows:
        v = r.values
        out.append({
            "batch": r.batch, "run": f"{r.run_id} {r.label}",
            "in/out": f"{r.input_target_tokens or '?'} / {r.output_cap_tokens or '?'}",
            "C/N": f"{r.concurrency or '?'} / {r.request_count or '?'}",
            "ok/failed": f"{_cell(v['requests_ok'], ',.0f', notes)} / {_cell(v['requests_failed'], ',.0f', notes)}",
            "total TPM": _cell(v["total_tpm"], ",.0f", notes), "output TPM": _cell(v["output_tpm"], ",.0f", notes),
            "TTFT p50 s": _cell(v["ttft_p50"], ".4f", notes),
        })  # fmt: skip
    table(out, ["batch", "run", "in/out", "C/N", "ok/failed", "total TPM", "output TPM", "TTFT p50 s"])
    shown = sorted({r.batch for r in rows})
    if len(shown) > 1:
        click.echo(f"{len(shown)} batches side by side ({', '.join(shown)}): nothing is pooled across batches (R2)")
    click.echo("d = derived here from the captured records; r = the tool's own figure, or computed from one (reported: the weakest input decides); "
               "in/out = input target / output cap (settings, not actual lengths, R3); C/N = concurrency / requests")  # fmt: skip
    for text, k in notes.items():
        click.echo(f"[{k}] n/a: {text}")


CHECK_OUTCOMES = ("agree", "disagree", "not-re-derivable")  # --fail-on names ("not re-derivable" as one word)


def each_batch(batches: tuple[str, ...]) -> list[str | None]:
    """The batches named by a repeatable --batch, each once, in the order given; none: all (None)."""
    return list(dict.fromkeys(batches)) or [None]


@main.command()
@with_ledger
@click.option("--batch", "batches", metavar="B", multiple=True, help="Only runs of this batch (repeatable).")
@click.option("--run", "run_id", type=int, metavar="ID", help="Only this run.")
@click.option("--fail-on", "fail_on", metavar="STATUS,...", default="",
              help="Exit 1 when one of these occurs: agree, disagree, not-re-derivable.")
@json_option
def check(ledger: Ledger, batches: tuple[str, ...], run_id: int | None, fail_on: str, as_json: bool) -> None:
    """Check what the tools reported, by each tool's own definitions (R15).

    Two sections. "recomputed from records": each reported value recomputed from the run's
    per-request records by the tool's statistic definition (named in the "definition" column:
    numpy-linear, pandas-linear, guidellm-inverted-cdf...), or not re-derivable with the reason
    (aggregates only, sampled records, field not captured...). "internal identities": the tool's
    own summary identities over its reported values (output_throughput = total_output_tokens /
    duration, median = p50, avg x count = sum...). Agreement is within the printed precision.

    \b
    Example:
      ledger check --batch fx --fail-on disagree
    """
    from bench_ledger.queries.check import IDENTITY, RECORDS
    from bench_ledger.queries.check import check as do_check

    wanted = parse_fail_on(fail_on, CHECK_OUTCOMES)
    rows = [r for b in each_batch(batches) for r in do_check(ledger, b, run_id)]
    found: dict[str, list[str]] = {}
    for r in rows:
        found.setdefault(r.status.replace(" ", "-"), []).append(f"run {r.run_id} {r.key}")
    if as_json:
        click.echo(json.dumps([r.as_dict() for r in rows], indent=2, default=str))
        exit_on(wanted, found, "reported value(s)")
        return
    show = [{**r.as_dict(), "run": f"{r.run_id}", "recomputed": "" if r.recomputed is None else repr(r.recomputed)}
            for r in rows]  # fmt: skip
    statuses = ("agree", "disagree", "not re-derivable")
    for section, title, cols in (
        (RECORDS, "recomputed from records", ["batch", "run", "key", "reported", "recomputed", "tolerance", "status",
                                              "definition", "reason"]),
        (IDENTITY, "internal identities", ["batch", "run", "key", "reported", "recomputed", "tolerance", "status",
                                           "definition"]),
    ):  # fmt: skip
        part = [r for r in show if r["section"] == section]
        if section == IDENTITY and not part:
            continue
        table(part, cols, title=f"== {title}")
        counts = {st: sum(r["status"] == st for r in part) for st in statuses}
        click.echo(f"{title}: " + ", ".join(f"{n} {st}" for st, n in counts.items()))
        click.echo("")
    counts = {st: sum(r.status == st for r in rows) for st in statuses}
    click.echo(", ".join(f"{n} {st}" for st, n in counts.items()))
    exit_on(wanted, found, "reported value(s)")


@main.command()
@with_ledger
@click.argument("a")
@click.argument("b")
@click.option("--metric", metavar="M", help="Also give B / A of this metric, labelled with what differs.")
@click.option("--attribute-to", "claim_factor", metavar="FACTOR", help="Claim the difference is due to FACTOR (R6, R8).")
@click.option("--equal-resources", is_flag=True, help="Claim an equal-resource comparison (R6).")
@click.option("--paired", is_flag=True, help="Claim a per-request paired comparison (R6).")
@json_option
def compare(ledger: Ledger, a: str, b: str, metric: str | None, claim_factor: str | None, equal_resources: bool,
            paired: bool, as_json: bool) -> None:  # fmt: skip
    """List every factor that differs between A and B (run:ID, batch:NAME, deployment:NAME).

    A claim the factors do not support is refused with its rule (exit 3).

    \b
    Example:
      ledger compare deployment:h20-old deployment:h20-1017 --metric total_tpm
    """
    from dataclasses import asdict

    from bench_ledger.queries.compare import compare as do_compare
    from bench_ledger.queries.compare import ratio

    if metric:
        res = ratio(ledger, metric, a, b, claim_factor, equal_resources=equal_resources, paired=paired)
        cmp = res.comparison
    else:
        res, cmp = None, do_compare(ledger, a, b, claim_factor, equal_resources=equal_resources, paired=paired)
    if as_json:
        click.echo(json.dumps(res.as_dict() if res else asdict(cmp), indent=2, default=str))
        return
    table([{"factor": f.name, "A": f.a, "B": f.b} for f in cmp.differences], ["factor", "A", "B"],
          title=f"A = {a}\nB = {b}\nfactors that differ:")  # fmt: skip
    click.echo(f"attributable to: {cmp.attributable_to or 'none (not exactly one difference)'}")
    click.echo(f"stack ratio: {'yes' if cmp.stack_ratio else 'no'}   equal resources: "
               f"{'yes' if cmp.equal_resources else 'no'}   paired: {'yes' if cmp.paired else 'no'}")  # fmt: skip
    for note in cmp.notes:
        click.echo(f"  note: {note}")
    if res:
        def shown(v) -> str:
            return f"{float(v.value):.6g} {v.unit} ({v.flag})" if v.value is not None else f"n/a ({v.na_reason})"

        click.echo(f"{metric}: A {shown(res.a)}; B {shown(res.b)}")
        click.echo(f"B / A = {'n/a' if res.ratio is None else f'{float(res.ratio):.4g}'}: {res.label}")


@main.command()
@with_ledger
@click.option("--batch", "batch", metavar="B", help="Only cards with samples in this batch.")
@click.option("--deployment", "deployment", metavar="D", help="Only cards with samples of this deployment.")
@json_option
def cards(ledger: Ledger, batch: str | None, deployment: str | None, as_json: bool) -> None:
    """List the GPU cards with hardware samples, named as a claim's scope `gpu` names them.

    \b
    Example:
      ledger cards --batch fx
    """
    from bench_ledger.queries.catalog import list_cards

    names = list_cards(ledger, batch=batch, deployment=deployment)
    if as_json:
        click.echo(json.dumps(names))
    else:
        table([{"card": c} for c in names], ["card"])
