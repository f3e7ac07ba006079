"""`ledger report` of real files whose every user-written name is hostile markup: nothing runs, nothing is
markup, every name is shown as written (HTML and Markdown), on both backends (issue 39)."""

from __future__ import annotations

import html
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml
from bench_ledger.queries.report.model import anchor
from bench_ledger.queries.report.render import md_code, md_text
from markdown_it import MarkdownIt

from tests import browser
from tests.clirun import run


def hostile(field: str) -> str:
    """Markup, a script, Markdown's active characters and a mathtext command, named after its field."""
    return (
        f'{field}"><script>document.title="pwned-{field}"</script><img src=x onerror=alert(1)>'
        f"*_[x](javascript:alert(1))|`#~ $\\nocmd{{$ &amp; \\"
    )


NAMES = ("batch", "run", "dep", "cause", "node", "slug", "title")
BATCH, RUN, DEP, CAUSE, NODE, SLUG, TITLE = (hostile(f) for f in NAMES)
LOG = hostile("logfile").replace("/", "")  # a file name: anything but '/' and NUL
# the llmperf files' model under a hostile owner (a deployment's model the files contradict is refused)
MODEL = hostile("model") + "/llama2-70b-4096"
CLAIM_TEXT, CLAIM_UNIT, CLAIM_NOTE = (hostile(f) for f in ("claimtext", "claimunit", "claimnote"))
CSP = (
    "default-src 'none'; script-src 'none'; style-src 'unsafe-inline'; img-src 'none'; font-src 'none'; "
    "connect-src 'none'; base-uri 'none'; form-action 'none'"
)


@pytest.fixture(scope="module")
def hostile_reports(module_ledger_url: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A ledger of the real llmperf pair, a real dmon file and a real vLLM server log, every name hostile;
    its report as HTML and as Markdown (each with the audit of a claims file of hostile texts)."""
    from tests.conftest import SAMPLES, shared_folder

    samples = shared_folder(SAMPLES)
    folder = tmp_path_factory.mktemp("hostile")
    shutil.copyfile(samples / "vllm-server-log" / "vllm-7B-1gpuA10080GB-0.5GRAM.log", folder / LOG)
    (folder / "report.txt").write_text("a report\n", encoding="utf-8")
    manifest = {
        "version": 1,
        "source_reports": [{"slug": SLUG, "title": TITLE, "file": "report.txt"}],
        "deployments": [
            {
                "name": DEP,
                "model": MODEL,
                "gpu_model": hostile("gpu"),
                "launches": [{"attempt": 1, "outcome": "ready", "cause": CAUSE, "log": LOG}],
            }
        ],
        "batches": [{"name": BATCH, "deployment": DEP, "description": hostile("description")}],
        "runs": [{"batch": BATCH, "label": RUN, "concurrency": 5, "request_count": 150}],
    }
    (folder / "m.yaml").write_text(yaml.safe_dump(manifest, allow_unicode=True), encoding="utf-8")
    claims = {
        "version": 1,
        "source_report": {"slug": SLUG, "title": TITLE},
        "claims": [
            {
                "id": "c-1.x_y",
                "text": CLAIM_TEXT,
                "value": "0.22",
                "unit": CLAIM_UNIT,
                "kind": "latency",
                "note": CLAIM_NOTE,
                "quoted": {"source": hostile("source")},
            },
            {
                "id": "c-2",
                "text": "0.2219",
                "unit": "s",
                "kind": "latency",
                "metric": {"name": "ttft_p50", "scope": {"batch": BATCH, "run": RUN}},
            },
        ],
    }
    (folder / "claims.yaml").write_text(yaml.safe_dump(claims, allow_unicode=True), encoding="utf-8")
    db = ("--db", module_ledger_url)
    run("declare", folder / "m.yaml", *db)
    run(
        "import",
        samples / "llmperf" / "individual_groq_70b.json",
        samples / "llmperf" / "summary_groq_70b.json",
        "--batch",
        BATCH,
        *db,
    )
    run("import", samples / "dmon" / "dmon_3gpu_rtx30xx.txt", "--batch", BATCH, "--node", NODE, *db)
    out = folder / "report.html"
    run("report", "--batch", BATCH, "--claims", folder / "claims.yaml", "--out", out, *db)
    md = run("report", "--batch", BATCH, "--claims", folder / "claims.yaml", "--format", "md", *db).output
    return out.read_text(encoding="utf-8"), md


class _Page(HTMLParser):
    """The tags, ids, in-page links and text of an HTML page as a browser's tokenizer reads them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.attrs: list[tuple[str, str, str | None]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attrs += [(tag, k, v) for k, v in attrs]

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _page(text: str) -> _Page:
    page = _Page()
    page.feed(text)
    return page


# every element the report writes: its own markup and matplotlib's SVG
REPORT_TAGS = {
    "html",
    "head",
    "meta",
    "title",
    "style",
    "body",
    "h1",
    "h2",
    "h3",
    "p",
    "nav",
    "a",
    "code",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "ol",
    "li",
    "span",
    "figure",
    "figcaption",
    "b",
    "br",
    "div",
    "pre",
    "svg",
    "metadata",
    "defs",
    "g",
    "path",
    "use",
    "clippath",
    "rect",
    "rdf:rdf",
    "cc:work",
    "dc:type",
    "dc:date",
    "dc:format",
    "dc:creator",
    "cc:agent",
    "dc:title",
}


def test_hostile_names_are_text_in_the_html_report(hostile_reports: tuple[str, str]) -> None:
    page = _page(hostile_reports[0])
    assert page.tags <= REPORT_TAGS, sorted(page.tags - REPORT_TAGS)  # no script, no img, no element of a name
    assert not [a for a in page.attrs if a[1].startswith("on")]  # no event handler attribute
    ids = [v for _, k, v in page.attrs if k == "id"]
    assert ids and all(re.fullmatch(r"[A-Za-z0-9_.-]+", v or "") for v in ids), [v for v in ids if "<" in (v or "")][:3]
    links = {v[1:] for _, k, v in page.attrs if k in ("href", "xlink:href") and v and v.startswith("#")}
    assert links <= set(ids)  # every in-page link and SVG reference still has its target
    text = "".join(page.text)
    for name in (BATCH, RUN, DEP, CAUSE, LOG, TITLE, SLUG, CLAIM_TEXT, CLAIM_UNIT, f"{NODE}:gpu0"):
        assert name in text, name[:12]  # shown as written
    assert f"batch {BATCH}" in text and f"1 {RUN}" in text  # the heading, the run's row (id and label)


def test_the_html_report_forbids_scripts_and_loads(hostile_reports: tuple[str, str]) -> None:
    page = _page(hostile_reports[0])
    assert ("meta", "content", CSP) in page.attrs
    head = hostile_reports[0][: hostile_reports[0].index("<title>")]
    assert f'<meta http-equiv="Content-Security-Policy" content="{CSP}">' in head  # before anything it governs


def test_anchor_keeps_no_character_that_needs_escaping() -> None:
    assert anchor("ev-claim", "tier-50k-total-tpm") == "ev-claim-tier-50k-total-tpm"
    assert anchor("cdf", "ttft", 'q"><s>') == "cdf-ttft-q.22..3e..3c.s.3e."
    assert anchor("hw", "pwr", "a.b") != anchor("hw", "pwr", "a.2e.b")  # '.' is itself encoded: no two names meet


def test_hostile_names_are_text_in_the_markdown_report(hostile_reports: tuple[str, str]) -> None:
    md = hostile_reports[1]
    rendered = MarkdownIt("commonmark").enable("table").render(md)
    page = _page(rendered)
    assert page.tags <= {"h1", "h2", "h3", "p", "table", "thead", "tbody", "tr", "th", "td", "strong", "code"}
    # each name reads back as written (no element inside): the headings, the table cells, the audit's source
    heads = [html.unescape(h) for h in re.findall(r"<h[13]>([^<]*)</h[13]>", rendered)]
    assert f"bench-ledger report: {BATCH}" in heads and f"batch {BATCH}" in heads
    cells = [html.unescape(c) for c in re.findall(r"<td>([^<]*)</td>", rendered)]
    for name in (f"1 {RUN}", DEP, CAUSE, BATCH, f"{NODE}:gpu0", CLAIM_TEXT, CLAIM_UNIT):
        assert name in cells, name[:12]
    assert f"{LOG} sha256 " in "".join(cells)
    source = re.search(r"<p>Source report <code>([^<]*)</code>: ([^<]*)</p>", rendered)
    assert source and [html.unescape(x) for x in source.groups()] == [SLUG, TITLE]


def test_markdown_escapes() -> None:
    assert md_text("a<b>&c*d_e|f\ng") == "a&lt;b&gt;&amp;c\\*d\\_e\\|f g"
    assert md_text("[x](javascript:y) `#~$!\\") == "\\[x\\](javascript:y) \\`\\#\\~\\$\\!\\\\"
    assert md_code("a`b") == "`` a`b ``" and md_code("plain") == "`plain`"


def test_no_script_runs_in_a_browser(hostile_reports: tuple[str, str], tmp_path: Path) -> None:
    found = browser.require()
    page = tmp_path / "report.html"
    page.write_text(hostile_reports[0], encoding="utf-8")
    b = browser.Browser(*found, profile=tmp_path / "profile")
    try:
        b.open(page.resolve().as_uri())
        seen = b.script("""return {title: document.title,
            scripts: document.querySelectorAll('script, img, iframe, object').length,
            drawn: [...document.querySelectorAll('figure.plot svg')].filter(s => s.getBBox().width > 100).length,
            svgs: document.querySelectorAll('figure.plot svg').length};""")
        errors = [e for e in b.console() if e.get("level") == "SEVERE"]
    finally:
        b.close()
    assert seen["title"] == f"bench-ledger report: {BATCH}"
    assert seen["scripts"] == 0 and errors == []
    assert seen["svgs"] == seen["drawn"] > 0  # inline SVG and its styles still render under the policy
