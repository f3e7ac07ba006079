"""A report read as a sequence of segments: the title, headings (``## 3.3 Results`` or a plain
``3.3 各档最高观察值`` line), prose lines (split into sentences), table cells (``| a | b |`` rows: the first
row is the header, the first cell of a body row is its label) and footnotes (a line opening with ¹²³...),
each with its :class:`Place` (section, heading path, line, span; a cell's row label and column header).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["SUPERSCRIPTS", "Place", "Report", "Segment", "normalize", "read_report"]

SUPERSCRIPTS = "¹²³⁴⁵⁶⁷⁸⁹⁰"


@dataclass(frozen=True)
class Place:
    """Where a number stands in the report."""

    section: str  # "3.3", "title", "" before the first heading, or a heading's text when unnumbered
    heading: str  # the heading path, "3 压测方法与实测结果 > 3.3 各档最高观察值"
    line: int  # 1-based
    start: int  # character span within the line
    end: int
    table: int | None = None  # ordinal of the table within its section (1-based)
    row: str | None = None  # a table row's label (its first cell)
    column: str | None = None  # the column header
    footnote: str | None = None  # a footnote line's mark

    @property
    def locator(self) -> str:
        where = "title" if self.section == "title" else (f"§{self.section}" if self.section else "preamble")
        if self.row is not None:
            where += f" row {self.row}"
            if self.column:
                where += f", col {self.column}"
        elif self.footnote is not None:
            where += f" footnote {self.footnote}"
        return f"{where} (line {self.line}:{self.start + 1}-{self.end})"


@dataclass
class Segment:
    """A piece of the report read as one context: a sentence, a table cell, a heading, a footnote."""

    kind: str  # title | heading | prose | cell | footnote
    text: str
    line: int
    offset: int  # where ``text`` starts within its line
    section: str
    heading: str
    table: int | None = None
    row: str | None = None
    column: str | None = None
    row_cells: list[str] = field(default_factory=list)
    header: list[str] = field(default_factory=list)
    footnote: str | None = None
    is_label: bool = False  # the first cell of a row, or a header cell
    row_id: int | None = None  # body rows of one table share a table id; cells of one row a row id
    para: str | None = None  # a prose segment's whole paragraph (its lines joined by one space)
    breaks: list[tuple[int, int, int]] = field(default_factory=list)  # (position in para, line, column)


@dataclass
class Report:
    segments: list[Segment]
    footnotes: dict[str, str]  # mark -> footnote text
    lines: list[str]


# ----------------------------------------------------------------------------- structure

_FULLWIDTH = str.maketrans(
    {**{chr(0xFF10 + i): str(i) for i in range(10)}, "．": ".", "％": "%", "＋": "+", "＝": "=", "：": "：", "（": "（"}
)
_MD_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_NUM_HEADING = re.compile(r"^(\d+(?:\.\d+)*)\.?\s+(\S.*)$")
_TABLE_SEP = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_SENTENCE_END = re.compile(r"[。；;！？!?]|\.(?=\s|$)")
_LIST_ITEM = re.compile(r"^(\s*)(?:[-*+]\s+|(?P<ord>\d+)[.)、]\s+)")


def normalize(text: str) -> str:
    """Full-width digits and signs to ASCII, one character for one (spans stay valid)."""
    return text.translate(_FULLWIDTH)


def _is_plain_heading(line: str) -> re.Match | None:
    m = _NUM_HEADING.match(line.strip())
    if not m or "|" in line or len(m.group(2)) > 60 or _SENTENCE_END.search(m.group(2)[-1:]):
        return None
    if len(m.group(1)) > 8 or "，" in m.group(2) and len(m.group(2)) > 30:
        return None
    return m


def read_report(text: str) -> Report:
    """Split a report into segments with their section, table and row context."""
    lines = normalize(text).splitlines()
    markdown = any(_MD_HEADING.match(ln) for ln in lines)
    segs: list[Segment] = []
    footnotes: dict[str, str] = {}
    stack: list[tuple[int, str]] = []  # (depth, "3.3 title")
    section = ""
    tables_in_section = 0
    title_seen = False
    i = 0
    row_id = 0
    while i < len(lines):
        raw = lines[i]
        lineno = i + 1
        stripped = raw.strip()
        if not stripped:
            i += 1
            continue
        heading = " > ".join(t for _, t in stack)
        md = _MD_HEADING.match(raw)
        plain = None if markdown else _is_plain_heading(raw)
        if not title_seen and not md and not plain:
            title_seen = True
            segs.append(Segment("title", raw, lineno, 0, "title", "title"))
            i += 1
            continue
        if md or plain:
            if md:
                depth = len(md.group(1))
                htext = md.group(2)
                nm = _NUM_HEADING.match(htext)
                if md and depth == 1 and not title_seen:
                    title_seen = True
                    segs.append(Segment("title", htext, lineno, raw.index(htext), "title", "title"))
                    i += 1
                    continue
                number = nm.group(1) if nm else None
            else:
                number, htext = plain.group(1), plain.group(2)  # type: ignore[union-attr]
                depth = number.count(".") + 1
            title_seen = True
            label = (
                f"{number} {htext if not md or not number else htext[len(number) :].lstrip('. ')}" if number else htext
            )
            stack = [(d, t) for d, t in stack if d < depth] + [(depth, label.strip())]
            section = number or htext.strip()
            tables_in_section = 0
            start = raw.index(htext) if htext in raw else 0
            if number and not md:
                start = raw.index(plain.group(2))  # type: ignore[union-attr]
            elif number and md:
                start = raw.index(htext) + len(number)
            if number:
                nstart = raw.index(number)
                segs.append(Segment("secnum", number, lineno, nstart, section, " > ".join(t for _, t in stack)))
            segs.append(Segment("heading", raw[start:], lineno, start, section, " > ".join(t for _, t in stack)))
            i += 1
            continue
        if stripped.startswith("|"):
            block = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                block.append((i + 1, lines[i]))
                i += 1
            tables_in_section += 1
            header: list[str] = []
            for n, (ln, row) in enumerate(block):
                if _TABLE_SEP.match(row.strip()):
                    continue
                cells = _cells(row)
                texts = [c for c, _ in cells]
                if n == 0:
                    header = [c.strip() for c in texts]
                    for col, (c, off) in enumerate(cells):
                        segs.append(
                            Segment(
                                "cell",
                                c,
                                ln,
                                off,
                                section,
                                heading,
                                tables_in_section,
                                None,
                                header[col],
                                [],
                                header,
                                is_label=True,
                            )
                        )
                    continue
                row_id += 1
                label = texts[0].strip() if texts else ""
                for col, (c, off) in enumerate(cells):
                    segs.append(
                        Segment(
                            "cell",
                            c,
                            ln,
                            off,
                            section,
                            heading,
                            tables_in_section,
                            label,
                            header[col] if col < len(header) else None,
                            [t.strip() for t in texts],
                            header,
                            is_label=(col == 0),
                            row_id=row_id,
                        )
                    )
            continue
        if stripped[0] in SUPERSCRIPTS:
            mark = stripped[0]
            footnotes[mark] = stripped[1:].strip()
            off = raw.index(stripped[0]) + 1
            segs.append(Segment("footnote", raw[off:], lineno, off, section, heading, footnote=mark))
            i += 1
            continue
        offset = 0
        lm = _LIST_ITEM.match(raw)
        if lm:
            offset = lm.end()
            if lm.group("ord") and markdown:
                segs.append(Segment("ordinal", lm.group("ord"), lineno, raw.index(lm.group("ord")), section, heading))
        # a Markdown paragraph runs on over the following lines until a blank line or another block
        body, breaks = raw[offset:], [(0, lineno, offset)]
        i += 1
        while markdown and i < len(lines) and lines[i].strip() and not _block_start(lines[i]):
            breaks.append((len(body) + 1, i + 1, 0))
            body += " " + lines[i]
            i += 1
        start = 0
        pieces = []
        for m in _SENTENCE_END.finditer(body):
            pieces.append((start, body[start : m.end()]))
            start = m.end()
        pieces.append((start, body[start:]))
        for pstart, piece in pieces:
            if piece.strip():
                segs.append(Segment("prose", piece, lineno, pstart, section, heading, para=body, breaks=breaks))
    return Report(segs, footnotes, lines)


def _block_start(line: str) -> bool:
    st = line.strip()
    return bool(_MD_HEADING.match(line) or st.startswith("|") or st[0] in SUPERSCRIPTS or _LIST_ITEM.match(line))


def _cells(row: str) -> list[tuple[str, int]]:
    """The cells of a table row with their offsets in the line (outer pipes dropped)."""
    out = []
    pos = row.index("|") + 1
    parts = row[pos:].split("|")
    if parts and not parts[-1].strip():
        parts = parts[:-1]
    for p in parts:
        out.append((p, pos))
        pos += len(p) + 1
    return out
