"""Render a :class:`queries.report.model.ReportData` as one self-contained HTML file or as Markdown.

Why these libraries (docs/architecture.md says the same): the page must open without a network,
so every plot is an inline SVG drawn by matplotlib (text drawn as paths: no font is fetched or
needed) and the page has no script at all; the template is Jinja2 with autoescaping, so a claim's
text or a file name can never inject markup. Both only format: every figure, marker and n/a reason
comes from the report data, which the Markdown tables share.
"""

from __future__ import annotations

import functools
import html
import io
import re
from dataclasses import replace
from importlib import resources
from pathlib import Path

from bench_ledger.queries.claims import VERDICTS
from bench_ledger.queries.report.model import (
    CARD_STATS,
    MARKER_LEGEND,
    POWER_STATS,
    RUN_COLUMNS,
    Plot,
    ReportData,
    anchor,
    card_column,
    evidence_id,
    figure,
)

__all__ = ["fallback_font", "md_code", "md_text", "render_html", "render_markdown", "render_plot"]

_CARD_LEGEND = (
    "each card's own samples of one counter of the sampler named in 'source', unit as printed; GPU "
    "activity time is dmon `sm` / nvidia-smi `utilization.gpu` / dcgmi `GPUTL`, the share of time a kernel "
    "ran, not SM occupancy, tensor utilisation or MFU; memory busy is dmon `mem` / `utilization.memory` / "
    "`MCUTL`, memory-controller busy time, not bandwidth utilisation (R13); power counters are never "
    "combined (R14)"
)
_SYNTHETIC_NOTE = "SYNTHETIC data: generated, not measured on real hardware"
_OUTCOME_COLOURS = {"ready": "#2a9d3f", "failed": "#c0392b", "unknown": "#7f8c8d"}


# --------------------------------------------------------------------------- shared table rows


def _workload(r) -> tuple[str, str]:
    return (
        f"{r.input_target_tokens if r.input_target_tokens is not None else '?'} / "
        f"{r.output_cap_tokens if r.output_cap_tokens is not None else '?'}",
        f"{r.concurrency if r.concurrency is not None else '?'} / {r.request_count if r.request_count is not None else '?'}",
    )


def _run_tables(data: ReportData) -> tuple[dict[str, list[dict]], dict[str, int]]:
    """Per batch, one row per run: cells as text with marker, and the evidence id of each cell."""
    notes: dict[str, int] = {}
    out: dict[str, list[dict]] = {}
    for r in data.runs:
        inout, cn = _workload(r)
        cells = [
            {
                "text": figure(r.values[name], fmt, notes),
                "ev": evidence_id(r.run_id, name),
                "na": r.values[name].value is None,
            }
            for name, _, fmt in RUN_COLUMNS
        ]
        out.setdefault(r.batch, []).append({"run": f"{r.run_id} {r.label}", "inout": inout, "cn": cn, "cells": cells})
    return out, notes


def _num(x: float | None, fmt: str = ",.2f") -> str:
    return "n/a" if x is None else format(x, fmt)


def _hardware_rows(data: ReportData) -> tuple[list[dict], list[dict], dict[str, int]]:
    notes: dict[str, int] = {}
    power = []
    for b, stats in data.power.items():
        power.append(
            {
                "batch": b,
                "cells": [{"text": figure(stats[s], ",.1f", notes), "ev": anchor("ev-hw", b, s)} for s in POWER_STATS],
            }
        )
    cards = [
        {
            "batch": c.batch,
            "card": c.card,
            "source": c.source,
            "cells": [
                {
                    "text": _card_cell(c, card_column(kind, stat)),
                    "ev": anchor("ev-hw", c.batch, card_column(kind, stat)),
                }
                for kind, stat, _ in CARD_STATS
            ],
        }
        for c in data.cards
    ]
    return power, cards, notes


def _card_cell(c, col: str) -> str:
    """A card's figure with its unit as printed and the derived marker; n/a where its file has no such counter."""
    value = c.values.get(col)
    return "n/a" if value is None else f"{_num(value)} {c.units[col]} d"


def _launch_rows(data: ReportData) -> tuple[list[dict], dict[str, int]]:
    notes: dict[str, int] = {}
    rows = []
    for x in data.launches:
        rows.append(
            {
                "deployment": x.deployment,
                "attempt": x.attempt,
                "outcome": x.outcome,
                "cause": x.cause or "",
                "ready": figure(x.seconds_to_ready, ",.0f", notes),
                "log": x.log or "no log linked",
                "first": x.first_line_at or "n/a",
                "last": x.last_line_at or "n/a",
                "ev": x.evidence,
            }
        )
    return rows, notes


# --------------------------------------------------------------------------- plots (matplotlib -> SVG)


def _figure(nrows: int, ncols: int, width: float, height: float, left_in: float = 0.85):
    """Fixed margins in inches: a layout engine ("tight", "constrained") doubled the render time."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout=None)
    grid = {
        "left": left_in / width,
        "right": 1 - 0.15 / width,
        "top": 1 - 0.5 / height,
        "bottom": 0.55 / height,
        "wspace": 0.32,
        "hspace": 0.55,
    }
    axes = fig.subplots(nrows, ncols, squeeze=False, gridspec_kw=grid)
    return fig, [ax for row in axes for ax in row]


def _svg(fig, salt: str) -> str:
    """``salt`` is the plot's id (:func:`queries.report.model.anchor`: no character that needs escaping)."""
    import matplotlib

    with matplotlib.rc_context({"svg.hashsalt": salt, "svg.fonttype": "path"}):
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    text = text[text.index("<svg") :]  # drop the XML declaration and DOCTYPE: the SVG is inline
    # ids unique per plot (several SVGs share one HTML document); matplotlib escapes the text it writes
    return re.sub(
        r'id="([^"]+)"',
        lambda mo: f'id="{salt}-{mo.group(1)}"',
        re.sub(r'(href="#|url\(#)([^")]+)', lambda mo: f"{mo.group(1)}{salt}-{mo.group(2)}", text),
    )


def _groups(plot: Plot) -> list[str]:
    seen: list[str] = []
    for s in plot.series:
        if s.group not in seen:
            seen.append(s.group)
    return seen


# --------------------------------------------------------------------------- text the default font cannot draw

_DEFAULT_FONT = "DejaVu Sans"  # matplotlib's own font, shipped with it: Latin, Greek, Cyrillic, no CJK


@functools.cache
def _charmap(path: str) -> frozenset[int]:
    from matplotlib.ft2font import FT2Font

    return frozenset(FT2Font(path).get_charmap())


def _default_lacks(text: str) -> set[str]:
    """The characters of ``text`` DejaVu Sans has no glyph for (matplotlib would draw each as a box)."""
    from matplotlib import font_manager

    have = _charmap(font_manager.findfont(_DEFAULT_FONT, fallback_to_default=False))
    return {ch for ch in text if ord(ch) not in have and not ch.isspace()}


@functools.cache
def fallback_font(chars: frozenset[str]) -> str | None:
    """The family name of an installed font with a glyph for each of ``chars`` (CJK text: e.g. WenQuanYi
    Micro Hei, fonts-wqy-microhei), registered with matplotlib; None when no installed font has them all.
    The system's font folders are searched too, since matplotlib's font list is a cache made when it first
    ran (a font installed later is not in it)."""
    from matplotlib import font_manager
    from matplotlib.ft2font import FT2Font

    paths = list(dict.fromkeys([*(f.fname for f in font_manager.fontManager.ttflist), *font_manager.findSystemFonts()]))
    for path in sorted(paths, key=lambda f: (Path(f).suffix.lower() not in (".ttf", ".ttc", ".otf"), f)):
        try:
            if all(ord(ch) in _charmap(path) for ch in chars):
                family = FT2Font(path).family_name
                if family.startswith("LastResort") or family.startswith("Last Resort"):
                    continue  # matplotlib's bundled Last Resort maps every code point to a box: no glyph at all
                font_manager.fontManager.addfont(path)
                return family
        except (OSError, RuntimeError, ValueError):  # a file FreeType cannot read is no candidate
            continue
    return None


def _plot_texts(plot: Plot) -> list[str]:
    return [
        plot.title,
        plot.x_label,
        plot.y_label,
        *(s.label for s in plot.series),
        *(s.group for s in plot.series),
        *(w[0] for w in plot.windows),
    ]


def _keyed(plot: Plot, lacks) -> tuple[Plot, list[tuple[str, str]]]:
    """The plot with each text the fonts cannot draw replaced by a key ('[1]', '[2]', ...), and the keys with
    their texts, which the page lists under the plot (the browser's fonts draw them there)."""
    keys: dict[str, str] = {}

    def key(text: str) -> str:
        if not lacks(text):
            return text
        return keys.setdefault(text, f"[{len(keys) + 1}]")

    keyed = replace(
        plot,
        title=key(plot.title),
        x_label=key(plot.x_label),
        y_label=key(plot.y_label),
        series=[replace(s, label=key(s.label), group=key(s.group)) for s in plot.series],
        windows=[(key(w[0]), w[1], w[2]) for w in plot.windows],
    )
    return keyed, [(k, text) for text, k in keys.items()]


def render_plot(plot: Plot) -> tuple[str | None, list[tuple[str, str]]]:
    """The plot as inline SVG (None when it has no series: the caption says why), and the legend keys that
    stand for texts no installed font can draw. Text DejaVu Sans lacks (Chinese run labels) is drawn with
    an installed font that has it (:func:`fallback_font`); when there is none, it is kept out of the SVG
    (a key instead of boxes) and the keys are listed in the page. Labels are user text drawn as written:
    matplotlib's mathtext (``$...$``) is off, so a ``$`` neither typesets nor fails."""
    import matplotlib

    if not plot.series:
        return None, []
    missing = frozenset().union(*map(_default_lacks, _plot_texts(plot)))
    family = fallback_font(missing) if missing else None
    if missing and family is None:
        plot, keys = _keyed(plot, _default_lacks)
    else:
        keys = []
    fonts = [_DEFAULT_FONT, family] if family else [_DEFAULT_FONT]
    with matplotlib.rc_context({"text.parse_math": False, "font.family": fonts}):
        return _draw(plot), keys


def _draw(plot: Plot) -> str:
    groups = _groups(plot)
    if plot.kind == "timeline":
        return _timeline(plot)
    n = len(groups)
    cols = min(n, 3)
    rows = (n + cols - 1) // cols
    fig, axes = _figure(rows, cols, 4.4 * cols, 3.3 * rows)
    for ax, g in zip(axes, groups, strict=False):
        mine = [s for s in plot.series if s.group == g]
        for i, s in enumerate(mine):
            colour = f"C{i % 10}"
            if plot.kind == "cdf":  # from (first value, 0): a run of one request is one visible step
                ax.step([s.x[0], *s.x], [0.0, *s.y], where="post", color=colour, linewidth=1.2, label=s.label)
            elif plot.kind == "tpm":
                ax.plot(s.x, s.y, marker="o", color=colour, linestyle="-" if i % 2 == 0 else "--", label=s.label)
            elif plot.kind == "trend":
                ax.plot(s.x, s.y, marker="o", markersize=3, color=colour, linewidth=1.0, label=s.label)
            else:
                ax.plot(s.x, s.y, color=colour, linewidth=0.7, label=s.label)
            for pos, low, high in s.bars:  # sampling intervals
                if plot.kind == "cdf":
                    ax.errorbar(
                        [(low + high) / 2],
                        [pos],
                        xerr=[[(high - low) / 2]],
                        color=colour,
                        capsize=2,
                        linewidth=0.8,
                        fmt="none",
                    )
                else:
                    ax.errorbar(
                        [pos],
                        [(low + high) / 2],
                        yerr=[[(high - low) / 2]],
                        color=colour,
                        capsize=2,
                        linewidth=0.8,
                        fmt="none",
                    )
            for x in s.marks:  # change points: the first point of the new segment
                ax.axvline(x - 0.5, color=colour, linestyle="--", linewidth=1.0)
        if plot.kind == "tpm":
            ax.set_xscale("log", base=2)
            ax.set_xticks(sorted({x for s2 in mine for x in s2.x}))
            ax.get_xaxis().set_major_formatter("{x:g}")
            ax.set_ylim(bottom=0, top=max(y for s2 in mine for y in s2.y) * 1.12)
            ax.get_yaxis().set_major_formatter(_thousands)
        if plot.kind == "cdf":
            ax.set_ylim(0, 1.02)
        if plot.kind == "trend":
            ax.get_xaxis().get_major_locator().set_params(integer=True)
        for label, start, end in plot.windows:
            ax.axvspan(start, end, color="#f1c40f", alpha=0.15)
            ax.text(start, ax.get_ylim()[1], label, fontsize=6, va="top")
        ax.set_title(g or plot.title, fontsize=9)
        ax.set_xlabel(plot.x_label, fontsize=8)
        ax.set_ylabel(plot.y_label, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6, ncols=2 if len(mine) > 6 else 1)
    for ax in axes[n:]:
        ax.set_visible(False)
    if plot.synthetic:
        fig.suptitle("SYNTHETIC DATA", color="#c0392b", fontsize=9)
    return _svg(fig, plot.id)


def _thousands(v: float, _pos: object = None) -> str:
    return f"{v:,.0f}"


def _timeline(plot: Plot) -> str:
    """One bar per launch from its own first timestamped log line (x = 0) to its last, READY marked:
    attempts lie hours apart, so a common axis would shrink every bar to a line."""
    from matplotlib.patches import Patch

    fig, (ax,) = _figure(1, 1, 9, 0.42 * len(plot.series) + 1.3, left_in=2.4)
    for i, s in enumerate(plot.series):
        length = (s.x[1] - s.x[0]) / 60
        ax.barh(i, max(length, 0.05), left=0, color=_OUTCOME_COLOURS.get(s.group, "#7f8c8d"), height=0.6)
        if s.y[0]:
            ax.plot([(s.y[1] - s.x[0]) / 60], [i], marker="|", color="black", markersize=14, markeredgewidth=2)
        ax.text(max(length, 0.05) + 0.1, i, f"{length:.1f} min", va="center", fontsize=7)
    ax.set_yticks(range(len(plot.series)), [s.label for s in plot.series], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("minutes from the launch's first timestamped log line to its last (READY marked |)", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(True, axis="x", alpha=0.3)
    handles = [Patch(color=c, label=k) for k, c in _OUTCOME_COLOURS.items() if any(s.group == k for s in plot.series)]
    ax.legend(handles=handles, fontsize=7, loc="lower right")
    if plot.synthetic:
        ax.set_title("SYNTHETIC DATA", color="#c0392b", fontsize=9)
    return _svg(fig, plot.id)


# --------------------------------------------------------------------------- HTML


def render_html(data: ReportData) -> str:
    import jinja2

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    template = env.from_string((resources.files("bench_ledger.queries.report") / "report.html.j2").read_text("utf-8"))
    runs, run_notes = _run_tables(data)
    power, cards, hw_notes = _hardware_rows(data)
    launches, launch_notes = _launch_rows(data)
    plots = [dict(zip(("p", "svg", "keys"), (p, *render_plot(p)), strict=True)) for p in data.plots]
    return template.render(
        d=data,
        runs=runs,
        run_notes=run_notes,
        columns=[h for _, h, _ in RUN_COLUMNS],
        legend=MARKER_LEGEND,
        power=power,
        power_heads=POWER_STATS,
        cards=cards,
        card_heads=[h for _, _, h in CARD_STATS],
        hw_notes=hw_notes,
        launches=launches,
        launch_notes=launch_notes,
        plots=plots,
        verdicts=[v for v in VERDICTS if v in data.audit],
        synthetic_note=_SYNTHETIC_NOTE,
        card_legend=_CARD_LEGEND,
    )


# --------------------------------------------------------------------------- Markdown


class _Md(str):
    """Markdown this module wrote (a footnote reference): put in a table as it is."""


_MD_ACTIVE = re.compile(r"[\\`*_\[\]#!|~$]")


def md_text(x: object) -> str:
    """User text (a batch, run label, file or card name, claim text) as Markdown that shows it as
    written: ``&``, ``<``, ``>`` as character references (no raw HTML passes), the characters Markdown
    acts on backslash-escaped, line breaks as spaces (a table row is one line)."""
    text = html.escape(" ".join(str(x).splitlines()), quote=False)
    return _MD_ACTIVE.sub(lambda mo: "\\" + mo.group(), text)


def md_code(x: object) -> str:
    """Text as one Markdown code span (nothing inside one is markup): fenced by more backticks than
    any run of them in the text, and padded with a space, which CommonMark strips, when it has some."""
    text = " ".join(str(x).splitlines())
    runs = re.findall(r"`+", text)
    fence = "`" * (max(map(len, runs), default=0) + 1)
    return f"{fence} {text} {fence}" if runs else f"{fence}{text}{fence}"


def _md_table(heads: list[str], rows: list[list[object]]) -> list[str]:
    def cell(x: object) -> str:
        return x if isinstance(x, _Md) else md_text(x)

    out = ["| " + " | ".join(cell(h) for h in heads) + " |", "|" + "---|" * len(heads)]
    out += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return out


def _md_notes(text: str, notes: dict[str, int], prefix: str) -> _Md:
    """A figure of :func:`queries.report.model.figure` ('1,840,234 d', 'n/a[3]'; no user text) with 'n/a[3]' as
    'n/a[^prefix3]': a Markdown footnote per n/a reason."""
    return _Md(re.sub(r"n/a\[(\d+)\]", lambda mo: f"n/a[^{prefix}{mo.group(1)}]", text))


def render_markdown(data: ReportData) -> str:
    out = [f"# {md_text(data.title)}", ""]
    if data.synthetic:
        batches = md_text(", ".join(data.synthetic_batches)) or "the audited ledger"
        out += [f"**{_SYNTHETIC_NOTE}** (batches: {batches}).", ""]
    out += [
        f"Ledger {md_code(data.ledger_url)}, generated {data.generated_at:%Y-%m-%d %H:%M:%S} UTC. {MARKER_LEGEND}. "
        "Batches are shown side by side, never pooled (R2).",
        "",
    ]
    runs, notes = _run_tables(data)
    out += ["## Runs", ""]
    for b, rows in runs.items():
        out += [f"### batch {md_text(b)}", ""]
        out += _md_table(
            ["run", "in/out", "C/N", *[h for _, h, _ in RUN_COLUMNS]],
            [[r["run"], r["inout"], r["cn"], *[_md_notes(c["text"], notes, "r") for c in r["cells"]]] for r in rows],
        )
        out.append("")
    out += ["in/out = input target / output cap (settings, not actual lengths, R3); C/N = concurrency / requests.", ""]
    launches, lnotes = _launch_rows(data)
    if launches:
        out += ["## Launches", ""]
        out += _md_table(
            ["deployment", "attempt", "outcome", "seconds to ready", "cause", "server log"],
            [
                [x["deployment"], x["attempt"], x["outcome"], _md_notes(x["ready"], lnotes, "l"), x["cause"], x["log"]]
                for x in launches
            ],
        )
        out.append("")
    power, cards, hnotes = _hardware_rows(data)
    if power:
        out += ["## Hardware statistics", "", "Three different power statistics (R14), per batch:", ""]
        out += _md_table(
            ["batch", *POWER_STATS],
            [[p["batch"], *[_md_notes(c["text"], hnotes, "h") for c in p["cells"]]] for p in power],
        )
        out += ["", f"Per card and sampler file ({_CARD_LEGEND}):", ""]
        out += _md_table(
            ["batch", "card", "source", *[h for _, _, h in CARD_STATS]],
            [[c["batch"], c["card"], c["source"], *[x["text"] for x in c["cells"]]] for c in cards],
        )
        out.append("")
    if data.audit:
        src = data.audit_source or {}
        out += ["## Audit", "", f"Source report {md_code(src.get('slug'))}: {md_text(src.get('title'))}", ""]
        for verdict in [v for v in VERDICTS if v in data.audit]:
            arows = data.audit[verdict]
            out += [f"### {verdict} ({len(arows)})", ""]
            out += _md_table(
                ["claim", "printed", "unit", "rule", "recomputed", "detail"],
                [
                    [r.claim_id, r.printed, r.unit or "", r.rule or "", r.recomputed or "", (r.detail or "")[:160]]
                    for r in arows
                ],
            )
            out.append("")
    foot = [(f"r{k}", t) for t, k in notes.items()] + [(f"l{k}", t) for t, k in lnotes.items()]
    foot += [(f"h{k}", t) for t, k in hnotes.items()]
    if foot:
        out += [f"[^{k}]: n/a: {md_text(t)}" for k, t in foot]
        out.append("")
    return "\n".join(out)
