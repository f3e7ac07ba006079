"""The number finder of `ledger claims draft` on a corpus of printed forms, both languages."""

from __future__ import annotations

import pytest
from bench_ledger.queries import intervals as iv
from bench_ledger.queries.draft import find_numbers, numbers_in, scan

# (printed text, [(text, core, canonical unit, form)]) for one sentence
FOUND = [
    # thousands separators, decimals, glued and spaced units
    ("总 TPM 为 1,840,234。", [("1,840,234", ("1,840,234",), None, "number")]),
    ("持续单流 133.39 token/s。", [("133.39 token/s", ("133.39",), "tokens/s", "number")]),
    ("READY，390s", [("390s", ("390",), "s", "number")]),
    ("port speed 400Gb/s", [("400Gb/s", ("400",), "Gb/s", "number")]),
    ("约 21.13 GiB/卡", [("约 21.13 GiB/卡", ("21.13",), "GiB", "number")]),
    ("the run sent 75,654-token prompts", [("75,654-token", ("75,654",), "tokens", "number")]),
    # approximately / 约 / ~ / ≈ (the word does not change the number)
    ("约 86.9 倍", [("约 86.9 倍", ("86.9",), "x", "number")]),
    ("about 2.5x faster", [("about 2.5x", ("2.5",), "x", "number")]),
    ("≈63.3", [("≈63.3", ("63.3",), None, "number")]),
    ("~7.0s later", [("~7.0s", ("7.0",), "s", "number")]),
    # percentages, signs (Unicode minus), percentage points
    ("约 −16.2%", [("约 −16.2%", ("−16.2",), "%", "number")]),
    ("up +18.5% over the old weights", [("+18.5%", ("+18.5",), "%", "number")]),
    ("a gain of 3.2 pp", [("3.2 pp", ("3.2",), "pp", "number")]),
    ("利用率增加 2 个百分点", [("2 个百分点", ("2",), "pp", "number")]),
    # ratios: × / x / 倍, a multiplication is not a ratio
    ("1.77× on 50K", [("1.77×", ("1.77",), "x", "number"), ("50K", ("50K",), None, "number")]),
    ("2 台 ×8×H20", [("2 台", ("2",), "nodes", "number"), ("8", ("8",), None, "number")]),
    ("总 TPM＝60×实际输入", [("60", ("60",), None, "number")]),
    # M / K / 万 scales
    (
        "KV 池由约 18.61M 降至 16.59M",
        [("约 18.61M", ("18.61M",), None, "number"), ("16.59M", ("16.59M",), None, "number")],
    ),
    ("共 3.5万 次请求", [("3.5万", ("3.5万",), None, "number")]),
    # ranges: en dash, hyphen between ratios, "..", with units on one or both ends
    ("输出 TPM 为 419–165,230，", [("419–165,230", ("419", "165,230"), None, "range")]),
    ("其余约 45%–59%", [("约 45%–59%", ("45", "59"), "%", "range")]),
    ("6000D/H20 = 1.77x-2.78x", [("1.77x-2.78x", ("1.77", "2.78"), "x", "range")]),
    ("TPOT 22.0–25.8ms", [("22.0–25.8ms", ("22.0", "25.8"), "ms", "range")]),
    ("spans 21,170 .. 1,840,234", [("21,170 .. 1,840,234", ("21,170", "1,840,234"), None, "range")]),
    # "from a to b" is two numbers (a change), not a range
    (
        "rises from 120.42 to 365.80 tok/s",
        [("120.42", ("120.42",), None, "number"), ("365.80 tok/s", ("365.80",), "tokens/s", "number")],
    ),
    # a/b pairs share the unit printed after the last member; a、b、c lists too
    ("冷/暖 TTFT 为 11.019/0.336 秒", [("11.019", ("11.019",), "s", "pair"), ("0.336 秒", ("0.336",), "s", "pair")]),
    ("p50 / max 0.49 / 9.83s", [("0.49", ("0.49",), "s", "pair"), ("9.83s", ("9.83",), "s", "pair")]),
    (
        "390、270、450 秒",
        [("390", ("390",), "s", "list"), ("270", ("270",), "s", "list"), ("450 秒", ("450",), "s", "list")],
    ),
    # layout settings whose digits are a number; number words with a classifier or a noun
    (
        "TP8×DP2＋EP16",
        [
            ("TP8", ("8",), "GPUs", "setting"),
            ("DP2", ("2",), "groups", "setting"),
            ("EP16", ("16",), "GPUs", "setting"),
        ],
    ),
    ("全卡互见 NV18，top-6", [("NV18", ("18",), "links", "setting"), ("top-6", ("6",), "experts", "setting")]),
    ("九次启动：五次失败", [("九次", ("9",), None, "word"), ("五次", ("5",), None, "word")]),
    ("二十四个专家", [("二十四个", ("24",), "experts", "word")]),
    ("three vLLM runs and seven SGLang runs", [("three", ("3",), None, "word"), ("seven", ("7",), None, "word")]),
    # full-width digits and signs
    ("输出 ２,７９１ 与 ＋１８．５％", [("2,791", ("2,791",), None, "number"), ("+18.5%", ("+18.5",), "%", "number")]),
    # N/A, with a footnote mark
    ("| N/A¹ |", [("N/A¹", (), None, "na")]),
]


@pytest.mark.parametrize("text,expected", FOUND, ids=[t for t, _ in FOUND])
def test_finder_finds_each_printed_form(text: str, expected: list) -> None:
    found, _ = scan(
        text.translate(str.maketrans({chr(0xFF10 + i): str(i) for i in range(10)} | {"．": ".", "％": "%", "＋": "+"}))
    )
    assert [(t.text.strip(), t.core, t.unit, t.form) for t in found] == expected


@pytest.mark.parametrize(
    "text", ["约 86.9 倍", "+18.5%", "约 −16.2%", "16.59M", "2.16×", "约 21.13 GiB", "133.39 tok/s"]
)
def test_found_values_parse_with_the_shared_parser(text: str) -> None:
    """The finder only locates: the value it hands on is read by queries.intervals, as the audit reads it."""
    (t,), _ = scan(text)
    assert iv.parse(t.value).interval == iv.parse(text.replace("/卡", "")).interval


SKIPPED = [
    ("vLLM v0.31.0 and FlashInfer 0.6.18", ["v0.31.0", "0.6.18"], "a version string"),
    ("recorded 2026-07-07 at 09:39:20", ["2026-07-07", "09:39:20"], "a date or time"),
    ("2026 年 7 月 7 日发布", ["2026 年 7 月 7 日"], "a date or time"),
    ("系列 · 第 11 篇", ["第 11"], "an ordinal (第…)"),
    ("见《报告》§3.1", ["§3.1"], "a section reference"),
    (
        "DeepSeek-V4.1-Flash on H20, SM120, Qwen2.5-Coder-7B-Instruct, 6000D",
        ["DeepSeek-V4.1-Flash", "H20", "SM120", "Qwen2.5-Coder-7B-Instruct", "6000D"],
        "a name with digits in it (model, hardware, file or option)",
    ),
    ("50K/C4N8 and C64", ["C4N8", "C64"], "a scope label (C = concurrency, N = requests): read as context"),
]


@pytest.mark.parametrize("text,tokens,why", SKIPPED, ids=[w for _, _, w in SKIPPED])
def test_non_claims_are_skipped_with_why(text: str, tokens: list[str], why: str) -> None:
    found, skipped = scan(text)
    assert [(s[2], s[3]) for s in skipped] == [(t, why) for t in tokens]
    assert not any(t.text in tokens for t in found)


ZH = """测试报告标题：双机 16 卡
1. 背景
本批共 322 次请求，失败为 0。
2.1 表格
| 档位 | C / N | 总 TPM |
|---|---|---|
| 50K / 200 | 4 / 8 | 1,840,234 |
¹ 脚注说明。
"""

EN = """# A title with 8 GPUs

## 3.2 Results

1. First item with 5 runs
2. Second item

The output throughput rose from 120.42 to
365.80 tok/s, about 3.04x.
"""


def test_locators_in_plain_text_sections_tables_and_titles() -> None:
    f = find_numbers(ZH)
    got = [(x.text, x.place.section, x.place.row, x.place.column, x.place.line) for x in f.found]
    assert got == [
        ("16 卡", "title", None, None, 1),
        ("322", "1", None, None, 3),
        ("0", "1", None, None, 3),
        ("4", "2.1", "50K / 200", "C / N", 7),
        ("8", "2.1", "50K / 200", "C / N", 7),
        ("1,840,234", "2.1", "50K / 200", "总 TPM", 7),
    ]
    assert f.found[-1].place.locator == "§2.1 row 50K / 200, col 总 TPM (line 7:23-31)"
    why = {(s.text, s.why) for s in f.skipped}
    assert ("1", "a section number") in why and ("2.1", "a section number") in why
    assert ("50K", "a table row label (read as context)") in why
    assert ("C", "a table header") not in why  # a header without digits is no number
    assert f.report.footnotes == {"¹": "脚注说明。"}


def test_markdown_headings_list_ordinals_and_wrapped_paragraphs() -> None:
    f = find_numbers(EN)
    got = [(x.text, x.place.section, x.place.line, x.place.start) for x in f.found]
    assert got == [
        ("8 GPUs", "title", 1, 15),
        ("5 runs", "3.2", 5, 19),
        ("120.42", "3.2", 8, 32),
        ("365.80 tok/s", "3.2", 9, 0),
        ("about 3.04x", "3.2", 9, 14),
    ]
    # the paragraph is one context even though it wraps: the ratio's sentence holds both operands
    ratio = f.found[-1]
    assert "120.42" in ratio.sentence and "365.80" in ratio.sentence
    assert [(s.text, s.why) for s in f.skipped if s.why == "a list ordinal"] == [
        ("1", "a list ordinal"),
        ("2", "a list ordinal"),
    ]


def test_numbers_shared_by_several_subjects_become_one_claim_each() -> None:
    f = find_numbers("x\n1 测试\nfx 批次有 16 组记录，失败、unknown、重试均为 0。\n")
    zeros = [x for x in f.found if x.text == "0"]
    assert [x.subject for x in zeros] == ["失败", "unknown", "重试"]
    f = find_numbers("# t\n\nFailed, unknown and retried requests were all 0.\n")
    assert [x.subject for x in f.found if x.text == "0"] == ["Failed", "unknown", "retried requests"]


def test_numbers_in_reads_a_claim_text_the_same_way() -> None:
    assert numbers_in("21,170 与 1,840,234") == [("21,170",), ("1,840,234",)]
    assert numbers_in("16,593,113÷262,144≈63.3") == [("16,593,113",), ("262,144",), ("63.3",)]
    assert numbers_in("九次启动") == [("9",)]
    assert numbers_in("N/A¹") == [("N/A",)]
    assert numbers_in("复载快一个量级") == []  # "一" is left out on purpose (mostly a determiner)
