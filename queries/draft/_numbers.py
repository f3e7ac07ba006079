"""Find every printed number of a report, with its exact text and where it stands.

The report is read as segments (:mod:`queries.draft._segments`: title, headings, prose sentences, table cells,
footnotes); each number found gets the :class:`Place` of its segment.

The number itself is parsed by :mod:`queries.intervals` (one parser for printed numbers: the same
``parse`` / ``parse_range`` the audit uses). This module only *locates* candidates and decides what
is not a number claim: section numbers, list ordinals (``第 11 篇``, ``1.`` in a Markdown list),
dates, times, version strings, names with digits glued in (H20, SM120, Qwen2.5-7B), footnote marks,
scope labels (C4N8: context, not a claim) and the labels/headers of a table. Those are returned as
:class:`Skipped` with the reason, so a reviewer sees what was left out and why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bench_ledger.queries import intervals as iv
from bench_ledger.queries.draft._lexicon import (
    CLASSIFIERS,
    COUNT_NOUNS,
    EN_WORDS,
    SCOPE_LABEL,
    SETTING_PREFIXES,
    UNIT_ALTERNATION,
    UNITS,
    cjk_value,
)
from bench_ledger.queries.draft._segments import SUPERSCRIPTS, Place, Report, Segment, normalize, read_report

__all__ = ["Found", "find_numbers", "numbers_in", "scan"]


@dataclass
class Found:
    """One printed number (or range, or N/A) with its place and the text around it."""

    text: str  # exactly as printed
    value: str | None  # the number in a form queries.intervals parses ('9' for 九次, '8' for TP8); None for N/A
    core: tuple[str, ...]  # the digits as printed, sign and scale included ('−16.2', '18.61M'); two for a range
    unit: str | None  # canonical unit (_lexicon.UNITS), or None
    form: str  # number | range | pair | word | setting | na
    place: Place
    sentence: str  # the sentence or table cell it stands in
    earlier: str  # the sentences of the same paragraph before this one
    lead: str  # the sentence (or cell) up to the number
    before: str  # the clause before it (from the previous number or clause mark)
    after: str  # the clause after it
    segment: int  # index of the segment (a sentence, a cell, a heading line)
    group: int | None = None  # members of one a/b pair or a、b、c list share a group
    member: int = 0  # position within the group
    approx: bool = False
    footnote: str | None = None  # a superscript mark glued to it (N/A¹)
    subject: str | None = None  # one of several subjects sharing this number ("A、B 均为 0")


@dataclass(frozen=True)
class Skipped:
    text: str
    place: Place
    why: str


# ----------------------------------------------------------------------------- the scanner

_APPROX = r"(?:约|大约|approximately|approx\.|about|around|roughly|nearly|~|≈|～)"
_NUM = r"(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
_SCALE = r"(?:[KkM万亿](?![A-Za-z]))"
TOKEN = re.compile(
    rf"""
    (?P<na>(?<![A-Za-z])N/A(?![A-Za-z])[{SUPERSCRIPTS}]*)
  | (?P<secref>§\s?\d+(?:\.\d+)*)
  | (?P<date>(?<!\d)\d{{4}}-\d{{1,2}}-\d{{1,2}}(?!\d)|(?<!\d)\d{{4}}/\d{{1,2}}/\d{{1,2}}(?!\d)|(?<!\d)\d{{8}}-\d{{6}}(?!\d)
            |(?<!\d)\d{{4}}\s?年(?:\s?\d{{1,2}}\s?月)?(?:\s?\d{{1,2}}\s?日)?|(?<![\d:])\d{{1,2}}:\d{{2}}(?::\d{{2}}(?:\.\d+)?)?(?![\d:]))
  | (?P<version>(?<![\w.])v\d+(?:\.\d+)+(?![\w])|(?<![\w.])\d+\.\d+\.\d+(?:\.\d+)*(?![\d.]))
  | (?P<ident>(?<![A-Za-z0-9_.\-])[A-Za-z][A-Za-z_]*(?:-[A-Za-z_]+)*-?\d[A-Za-z0-9_.]*(?:-[A-Za-z0-9_.]+)*)
  | (?P<ordinal>第\s?\d+)
  | (?P<cjk>(?<![两二三四五六七八九十第])[两二三四五六七八九十]+(?=[{CLASSIFIERS}]))
  | (?P<word>\b(?:{"|".join(EN_WORDS)})\b(?=\s+[A-Za-z]))
  | (?P<num>(?:(?P<approx>{_APPROX})\s*)?(?P<sign>(?:(?<=[\s(（:：=])|^)[+\-−]|[+−])?(?P<digits>{_NUM}{_SCALE}?)(?![\d]))
    """,
    re.VERBOSE | re.IGNORECASE,
)
_UNIT_AFTER = re.compile(rf"(?P<sp>\s?|-(?=tokens?\b))(?P<unit>{UNIT_ALTERNATION})(?P<per>/卡|/card|/GPU)?")
# "a–b", "a-b", "a .. b", "a ~ b" print a range; "from a to b" / "由 a 增至 b" print two numbers (a change)
_RANGE_SEP = re.compile(r"\s*(?:–|—|-|~|～|\.\.|…)\s*")
_PAIR_SEP = re.compile(r"\s*/\s*")
_LIST_SEP = re.compile(r"\s*[、]\s*")
_SECOND = re.compile(rf"(?P<sign>[+\-−])?(?P<digits>{_NUM}{_SCALE}?)(?![\d.])")
_MEMBER = re.compile(rf"(?P<approx>{_APPROX}\s*)?(?P<sign>[+\-−])?(?P<digits>{_NUM}{_SCALE}?)(?![\d.])")
_CLAUSE = re.compile(r"[，、；;：:（）()]|,(?!\d)")


@dataclass
class _Tok:
    start: int
    end: int
    text: str
    value: str | None
    core: tuple[str, ...]
    unit: str | None
    form: str
    approx: bool = False
    footnote: str | None = None


def _unit_at(text: str, pos: int) -> tuple[str | None, int]:
    """A unit right after a number at ``pos``: (canonical unit, end), or (None, pos)."""
    m = _UNIT_AFTER.match(text, pos)
    if not m:
        return None, pos
    unit = m.group("unit")
    end = m.end()
    nxt = text[end : end + 1]
    if unit in ("x", "×") and nxt.isalnum():
        return None, pos  # "8×H20", "60×实际": a multiplication, not a ratio
    if unit.isascii() and unit[-1].isalpha() and nxt.isascii() and (nxt.isalnum() or nxt == "_"):
        return None, pos  # "5070Ti", "7B": not this unit
    if m.group("sp") and unit in ("x", "s", "W", "C", "h", "min", "us", "ns", "tok", "sec"):
        # a spaced single-letter unit is too often a word ("8 s" is fine, "x" alone is not)
        if unit in ("x",):
            return None, pos
    return UNITS.get(unit, unit), end


def _count_noun(text: str, pos: int) -> str | None:
    rest = text[pos : pos + 12].lstrip()
    if rest[:1] in "个次条组份":
        rest = rest[1:].lstrip()
    rest = rest.removeprefix("API ").lstrip()
    for noun in sorted(COUNT_NOUNS, key=len, reverse=True):
        if rest.startswith(noun):
            return COUNT_NOUNS[noun]
    return None


def scan(text: str) -> tuple[list[_Tok], list[tuple[int, int, str, str]]]:
    """Scan one segment's text: (numbers found, skipped (start, end, text, why))."""
    found: list[_Tok] = []
    skipped: list[tuple[int, int, str, str]] = []
    pos = 0
    while True:
        m = TOKEN.search(text, pos)
        if not m:
            break
        kind = (
            m.lastgroup
            if m.lastgroup in ("na", "secref", "date", "version", "ident", "ordinal", "cjk", "word")
            else "num"
        )
        for g in ("na", "secref", "date", "version", "ident", "ordinal", "cjk", "word", "num"):
            if m.group(g) is not None:
                kind = g
                break
        s, e = m.start(), m.end()
        pos = e
        tok = m.group(0)
        if kind == "na":
            mark = tok[3:] or None
            found.append(_Tok(s, e, tok, None, (), None, "na", footnote=mark))
        elif kind == "secref":
            skipped.append((s, e, tok, "a section reference"))
        elif kind == "date":
            skipped.append((s, e, tok, "a date or time"))
        elif kind == "version":
            skipped.append((s, e, tok, "a version string"))
        elif kind == "ordinal":
            skipped.append((s, e, tok, "an ordinal (第…)"))
        elif kind == "ident":
            t = _ident(tok, s, e)
            if isinstance(t, _Tok):
                found.append(t)
            else:
                skipped.append((s, e, tok, t))
        elif kind == "cjk":
            v = cjk_value(tok)
            if v is None:
                continue
            unit = {"卡": "GPUs", "台": "nodes", "人": "users", "倍": "x", "层": "layers"}.get(text[e : e + 1])
            unit = unit or _count_noun(text, e)
            end = e + 1 if text[e : e + 1] in "卡台人倍" else e
            found.append(
                _Tok(
                    s, end, text[s : end + (1 if end == e and text[e : e + 1] else 0)], str(v), (str(v),), unit, "word"
                )
            )
        elif kind == "word":
            v = EN_WORDS[tok.lower()]
            unit = _count_noun(text, e)
            found.append(_Tok(s, e, tok, str(v), (str(v),), unit, "word"))
        else:
            got, pos = _number(text, m)
            if got is None:
                continue
            if isinstance(got, tuple):
                skipped.append(got)
                continue
            found.extend(got)
    return found, skipped


def _ident(tok: str, s: int, e: int) -> _Tok | str:
    """A name with digits in it: a layout setting (TP8, top-6), a scope label (C4N8), or a name."""
    for prefix, (unit, _kind) in SETTING_PREFIXES.items():
        rest = tok[len(prefix) :]
        if tok.upper().startswith(prefix.upper()) and rest.isdigit():
            return _Tok(s, e, tok, rest, (rest,), unit, "setting")
    if SCOPE_LABEL.match(tok) and any(ch.isdigit() for ch in tok):
        return "a scope label (C = concurrency, N = requests): read as context"
    return "a name with digits in it (model, hardware, file or option)"


def _number(text: str, m: re.Match) -> tuple[list[_Tok] | tuple | None, int]:
    """A number at match ``m``, extended by its unit, a range end, or the members of an a/b pair or
    an a、b、c list (one unit printed after the last member applies to all)."""
    s = m.start()
    digits = m.group("digits")
    e = m.end()
    nxt = text[e : e + 1]
    unit, uend = _unit_at(text, e)
    if unit is None and nxt.isascii() and nxt.isalpha() and nxt not in "xX":
        # digits glued to letters that are no unit: a name ("6000D", "7B", "5070Ti")
        end = e
        while end < len(text) and (text[end].isalnum() and text[end].isascii() or text[end] in "_-."):
            end += 1
        return (s, end, text[s:end], "a name with digits in it (model, hardware, file or option)"), end
    end = uend
    approx = m.group("approx") is not None
    sign = m.group("sign") or ""
    # a range: "419–165,230", "1.77x-2.78x", "约 6.5%–7.8%", "21,170 .. 1,840,234"
    r = _RANGE_SEP.match(text, end)
    if r and r.end() > end:
        m2 = _SECOND.match(text, r.end())
        if m2:
            unit2, uend2 = _unit_at(text, m2.end())
            glued = text[m2.end() : m2.end() + 1]
            if unit2 is not None or not (glued.isascii() and glued.isalpha()):
                body = text[s:uend2]
                try:
                    iv.parse_range(_for_parser(body))
                except ValueError:
                    pass
                else:
                    core = (sign + digits, (m2.group("sign") or "") + m2.group("digits"))
                    return [_Tok(s, uend2, body, _for_parser(body), core, unit or unit2, "range", approx)], uend2
    first = _Tok(s, end, text[s:end], _value_text(sign, digits, text[e:end]), (sign + digits,), unit, "number", approx)
    # a/b pair or a、b、c list: members share the last member's unit
    members = [first]
    pos = end
    for sep_re, form in ((_PAIR_SEP, "pair"), (_LIST_SEP, "list")):
        while True:
            sm = sep_re.match(text, pos)
            if not sm:
                break
            m2 = _MEMBER.match(text, sm.end())
            if (
                not m2
                or text[m2.end() : m2.end() + 1].isascii()
                and text[m2.end() : m2.end() + 1].isalpha()
                and _unit_at(text, m2.end())[0] is None
            ):
                break
            u2, ue2 = _unit_at(text, m2.end())
            sg = m2.group("sign") or ""
            members.append(
                _Tok(
                    m2.start(),
                    ue2,
                    text[m2.start() : ue2],
                    _value_text(sg, m2.group("digits"), text[m2.end() : ue2]),
                    (sg + m2.group("digits"),),
                    u2,
                    form,
                    m2.group("approx") is not None,
                )
            )
            pos = ue2
        if len(members) > 1:
            break
    if len(members) > 1:
        last_unit = members[-1].unit
        for t in members:
            t.form = "pair" if members[-1].form == "pair" else "list"
            if t.unit is None and last_unit is not None:
                t.unit = last_unit
            if t.value is not None and last_unit and t is not members[-1] and not _has_unit(t.value):
                t.value = t.value + (" " + last_unit if last_unit not in ("%", "x") else last_unit)
        return members, pos
    return [first], end


def _has_unit(value: str) -> bool:
    return bool(re.search(r"[^\d,.\s+\-−KkM万亿]", value))


def _value_text(sign: str, digits: str, unit_text: str) -> str:
    unit_text = unit_text.strip().lstrip("-")
    for per in ("/卡", "/card", "/GPU"):
        unit_text = unit_text.removesuffix(per)
    return (
        f"{sign}{digits}{unit_text if unit_text in ('%', 'x', '×', '倍') else (' ' + unit_text if unit_text else '')}"
    )


def _for_parser(text: str) -> str:
    out = text
    for per in ("/卡", "/card", "/GPU"):
        out = out.replace(per, "")
    return out


# ----------------------------------------------------------------------------- the finder


@dataclass
class Findings:
    report: Report
    found: list[Found]
    skipped: list[Skipped]


def find_numbers(text: str) -> Findings:
    """Every printed number of a report with its place, and everything left out with why."""
    report = read_report(text)
    found: list[Found] = []
    skipped: list[Skipped] = []
    group = 0
    for n, seg in enumerate(report.segments):
        if seg.kind in ("ordinal", "secnum"):
            p = _place(seg, 0, len(seg.text))
            skipped.append(Skipped(seg.text, p, "a list ordinal" if seg.kind == "ordinal" else "a section number"))
            continue
        toks, skips = scan(seg.text)
        for s, e, skipped_text, why in skips:
            skipped.append(Skipped(skipped_text, _place(seg, s, e), why))
        if seg.kind == "heading" and not toks:
            continue
        clauses = _clause_bounds(seg.text)
        prev_end = 0
        grouped: dict[int, int] = {}
        for k, t in enumerate(toks):
            p = _place(seg, t.start, t.end)
            if seg.is_label:
                why = "a table header" if seg.row is None else "a table row label (read as context)"
                skipped.append(Skipped(t.text, p, why))
                continue
            cstart = max([b for b in clauses if b <= t.start] or [0])
            cend = min([b for b in clauses if b >= t.end] or [len(seg.text)])
            g = None
            if t.form in ("pair", "list"):
                key = id(toks[k - 1]) if k and toks[k - 1].form == t.form and toks[k - 1].end <= t.start else None
                if key is not None and key in grouped:
                    g = grouped[key]
                else:
                    group += 1
                    g = group
                grouped[id(t)] = g
            member = sum(1 for f in found if f.group == g) if g is not None else 0
            before = seg.text[max(cstart, prev_end if t.form not in ("pair", "list") else cstart) : t.start]
            # "失败、unknown、重试均为 0", "failed, unknown and retried were all 0": one number, one claim per subject
            subjects: list[str | None] = [*_shared_subjects(seg.text[prev_end : t.start])]
            for subject in subjects or [None]:
                found.append(
                    Found(
                        text=t.text,
                        value=t.value,
                        core=t.core,
                        unit=t.unit,
                        form=t.form,
                        place=p,
                        sentence=seg.text.strip(),
                        earlier=(seg.para or "")[: seg.offset] if seg.kind == "prose" else "",
                        lead=seg.text[: t.start],
                        before=before if subject is None else subject,
                        after=seg.text[t.end : cend],
                        segment=n,
                        group=g,
                        member=member,
                        approx=t.approx,
                        footnote=t.footnote,
                        subject=subject,
                    )
                )
            prev_end = t.end
    return Findings(report, found, skipped)


_SHARED = re.compile(
    r"(?P<subjects>[^，；;。：:]+?)\s*(?:均为|都为|都是|皆为|were all|are all|all were|were both|"
    r"are both)\s*$",
    re.IGNORECASE,
)
_SUBJECT_SEP = re.compile(r"\s*(?:、|，|,|\band\b|和|与|及)\s*")


def _shared_subjects(lead: str) -> list[str]:
    """The subjects that share one printed number ("A、B、C 均为 0"), or [] when there is one."""
    m = _SHARED.search(lead)
    if not m:
        return []
    parts = [p.strip() for p in _SUBJECT_SEP.split(m.group("subjects")) if p.strip()]
    return parts if len(parts) >= 2 else []


def _clause_bounds(text: str) -> list[int]:
    return [m.end() for m in _CLAUSE.finditer(text)] + [m.start() for m in _CLAUSE.finditer(text)]


def _place(seg: Segment, start: int, end: int) -> Place:
    line, a, b = seg.line, seg.offset + start, seg.offset + end
    if seg.breaks:
        pos = seg.offset + start
        ppos, line, col = max(br for br in seg.breaks if br[0] <= pos)
        a, b = col + pos - ppos, col + pos - ppos + (end - start)
    return Place(
        section=seg.section,
        heading=seg.heading,
        line=line,
        start=a,
        end=b,
        table=seg.table,
        row=seg.row,
        column=seg.column,
        footnote=seg.footnote,
    )


def numbers_in(text: str) -> list[tuple[str, ...]]:
    """The cores of the numbers a piece of text prints (for comparing a claim's text with a draft)."""
    out: list[tuple[str, ...]] = []
    for t in scan(normalize(text))[0]:
        if t.form == "na":
            out.append(("N/A",))
        else:
            out.append(t.core)
    return out
