"""Chinese in plot legends (issue 39): drawn with an installed CJK font (fonts-wqy-microhei, which .ci/run
installs), or, with none installed, kept out of the SVG as keys that the page lists under the plot; never
matplotlib's boxes (a glyph DejaVu Sans lacks)."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest
from bench_ledger.queries.report import render as rr
from bench_ledger.queries.report.model import Plot, Series

from tests.clirun import run

LABEL, GROUP = "并发 5 用户", "输入 550 tokens"


def _plot() -> Plot:
    return Plot(
        id="p1",
        title="total TPM",
        what="w",
        unit="tokens/min",
        provenance="derived",
        synthetic=False,
        kind="tpm",
        series=[Series(label=LABEL, batch="b", x=[1, 2, 4], y=[10.0, 20.0, 30.0], group=GROUP)],
        x_label="concurrency",
        y_label="TPM",
    )


def _render(plot: Plot) -> tuple[str | None, list[tuple[str, str]], list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        svg, keys = rr.render_plot(plot)
    return svg, keys, [str(w.message) for w in caught]


def _glyph_fonts(svg: str) -> set[str]:
    """The fonts whose glyphs the SVG defines (text drawn as paths: ids '<plot>-<font>-<code point>')."""
    return set(re.findall(r'id="p1-([A-Za-z]+)-[0-9a-f]+"', svg))


def test_chinese_labels_are_drawn_with_an_installed_cjk_font() -> None:
    family = rr.fallback_font(frozenset(LABEL + GROUP) - frozenset(" 0123456789abcdefghijklmnopqrstuvwxyz"))
    if family is None:
        pytest.skip("no CJK font installed (.ci/run installs fonts-wqy-microhei)")
    svg, keys, messages = _render(_plot())
    assert messages == [] and keys == []
    assert _glyph_fonts(svg) == {"DejaVuSans", family.replace(" ", "")}


def test_without_a_cjk_font_the_text_stays_out_of_the_svg_as_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rr, "fallback_font", lambda chars: None)
    svg, keys, messages = _render(_plot())
    assert messages == []  # no "Glyph ... missing from font(s) DejaVu Sans": no boxes
    assert keys == [("[1]", LABEL), ("[2]", GROUP)]
    assert _glyph_fonts(svg) == {"DejaVuSans"} and LABEL not in svg


def test_the_report_lists_the_keys_under_the_plot(
    ledger_url: str, samples: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real llmperf run labelled in Chinese (--run), its report written with no CJK font found."""
    records = samples / "llmperf" / "individual_groq_70b.json"
    run("import", "--db", ledger_url, "--batch", "b", "--run", LABEL, "-q", records)
    monkeypatch.setattr(rr, "fallback_font", lambda chars: None)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # a missing glyph would be a UserWarning: fail on it
        run("report", "--db", ledger_url, "--batch", "b", "--out", tmp_path / "r.html")
    html = (tmp_path / "r.html").read_text()
    assert f"Keys in the plot (no installed font draws these texts): [1] = {LABEL}." in html
    for svg in re.findall(r"<svg.*?</svg>", html, flags=re.S):
        assert LABEL not in svg


def test_matplotlibs_last_resort_font_is_never_the_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    """Matplotlib bundles Last Resort, whose every glyph is a box: a font search that meets it first (a
    checkout whose path sorts before /usr) must not pick it."""
    import glob

    import matplotlib
    from matplotlib import font_manager

    last_resort = glob.glob(f"{matplotlib.get_data_path()}/fonts/*/LastResort*")
    assert last_resort, "matplotlib ships its Last Resort font"
    monkeypatch.setattr(font_manager.fontManager, "ttflist", [])
    monkeypatch.setattr(font_manager, "findSystemFonts", lambda: last_resort)
    assert rr.fallback_font(frozenset(LABEL)) is None
