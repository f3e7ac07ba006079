from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from bench_ledger.errors import ParseError
from bench_ledger.importers import detect
from bench_ledger.importers.base import ParseOptions, read_head
from bench_ledger.importers.ledger_requests import IMPORTER
from bench_ledger.records import ParsedRun

ALL_FIELDS = [
    "cached_tokens",
    "chunk_gaps",
    "end_time",
    "error",
    "first_token_time",
    "input_tokens",
    "latency_s",
    "output_tokens",
    "retries",
    "send_time",
    "status",
    "ttft_s",
]


def one_run(path: Path) -> ParsedRun:
    art = IMPORTER.parse(path, ParseOptions())
    assert (art.format, art.format_version) == ("ledger-requests", "1")
    (run,) = art.runs
    return run


def test_native_jsonl(fixtures: Path) -> None:
    path = fixtures / "ledger_requests/native.jsonl"
    assert detect(path).name == "ledger-requests"
    run = one_run(path)
    info = run.info
    assert (info.label, info.tool, info.tool_version, info.locator) == ("h20 c64 in=2048", "mybench", "0.3", "line 1")
    assert (info.concurrency, info.request_rate, info.input_target_tokens, info.output_cap_tokens) == (
        64,
        "inf",
        2048,
        512,
    )
    assert info.started_at == datetime(2026, 7, 7, 9, 39, 20, tzinfo=timezone(timedelta(hours=8)))
    assert info.metadata == {"gpu": "H20", "batch": "fx"}
    cap = run.capture
    assert cap.fields == ALL_FIELDS  # queue_s and itl_mean_s never occur: not captured
    assert (cap.record_count, cap.clock, cap.token_source) == (3, "epoch_s", "server_usage")
    assert cap.success_rule == "HTTP 200 and a final [DONE] chunk"
    req = run.requests
    assert req.idx == [0, 1, 2]
    assert req.line == [2, 3, 5]  # blank line 4 skipped
    assert req.status == ["ok", "failed", "unknown"]  # no status key -> unknown
    assert req.error == [None, "HTTP 503", None]
    # exact: these need 19 significant digits, more than a float holds
    assert req.send_ns == [1751880000123456789, 1751880001000000000, 1751880002000000001]
    assert req.first_token_ns == [1751880000223456789, None, None]  # 0.1 ns truncated
    assert req.end_ns == [1751880009500000000, 1751880001250000000, 1751880003500000000]
    assert req.cached_tokens == [1024, None, None]  # captured field, null = no value for that record
    assert req.output_tokens == [512, None, 100]
    assert req.retries == [0, 2, None]
    assert req.ttft_s == [0.1, None, None]
    assert req.latency_s == [9.376543211, 0.25, None]
    assert req.chunk_gaps_s == [[0.017, 0.018, 0.0165], None, []]
    assert req.queue_s == [None, None, None]


def test_native_csv_matches_jsonl(fixtures: Path) -> None:
    path = fixtures / "ledger_requests/native.csv"
    assert detect(path).name == "ledger-requests"
    run = one_run(path)
    assert run.info.label == "h20 c64 in=2048"
    assert run.info.concurrency == 64
    assert run.info.metadata == {"gpu": "H20"}
    assert run.capture.fields == ALL_FIELDS
    assert run.capture.clock == "epoch_s"
    assert run.capture.success_rule == "status as written by the producing tool; a record without status is unknown"
    req = run.requests
    assert req.line == [3, 4, 5]
    assert req.status == ["ok", "failed", "unknown"]
    assert req.error == [None, "HTTP 503, retry later", None]
    expected = one_run(fixtures / "ledger_requests/native.jsonl").requests
    for column in (
        "send_ns",
        "first_token_ns",
        "end_ns",
        "ttft_s",
        "latency_s",
        "chunk_gaps_s",
        "input_tokens",
        "output_tokens",
        "cached_tokens",
        "retries",
    ):
        assert getattr(req, column) == getattr(expected, column), column


def test_monotonic_and_epoch_ns(fixtures: Path) -> None:
    run = one_run(fixtures / "ledger_requests/monotonic.jsonl")
    assert run.capture.clock == "monotonic_s"
    assert run.capture.fields == ["first_token_time", "send_time", "ttft_s"]
    assert run.requests.send_ns == [52341123456789]
    assert run.requests.first_token_ns == [52341165556789]
    assert run.requests.status == ["unknown"]
    run = one_run(fixtures / "ledger_requests/epoch_ns.csv")
    assert run.capture.clock == "epoch_ns"
    assert run.requests.send_ns == [1751880000123456789]
    assert run.requests.end_ns == [1751880009500000000]


def test_header_only(fixtures: Path) -> None:
    run = one_run(fixtures / "ledger_requests/no_records.jsonl")
    assert (run.capture.record_count, run.capture.fields, run.requests) == (0, [], None)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("bad_status.jsonl", "line 3: field 'status': input should be 'ok', 'failed' or 'unknown', got 'success'"),
        (
            "unknown_field.jsonl",
            "line 2: field 'ttft': unknown field; known: status, error, retries, input_tokens, "
            "output_tokens, send_time, first_token_time, end_time, ttft_s, latency_s, queue_s, "
            "itl_mean_s, chunk_gaps, cached_tokens",
        ),
        ("no_clock.jsonl", "line 1: field 'clock': the file has send_time but the header declares no clock"),
        ("bad_int.csv", "line 4: field 'input_tokens': expected an integer, got '12.5'"),
        ("short_row.csv", "line 4: row has 1 cells, the header has 2"),
        ("ns_fraction.jsonl", "line 3: field 'send_time': epoch_ns times must be integers, got 1751880000123456789.5"),
        ("float_tokens.jsonl", "line 2: field 'output_tokens': input should be a valid integer, got 12.0"),
    ],
)
def test_bad_rows(fixtures: Path, name: str, message: str) -> None:
    path = fixtures / "ledger_requests" / name
    with pytest.raises(ParseError) as exc:
        IMPORTER.parse(path, ParseOptions())
    assert str(exc.value) == f"{path}, {message}"


def test_bad_header(fixtures: Path, tmp_path: Path) -> None:
    path = fixtures / "ledger_requests/bad_header.jsonl"
    with pytest.raises(ParseError, match=r"line 1: field 'clok': unknown header key; known: run, tool, clock"):
        IMPORTER.parse(path, ParseOptions())
    cases = {
        '{"ledger_requests": 2, "run": "r", "tool": "t"}\n': "line 1: field 'ledger_requests': the first line must be the header {\"ledger_requests\": 1, ...}, got version 2",
        '{"ledger_requests": 1, "tool": "t"}\n': "line 1: field 'run': the header must name the run and the tool",
        '{"ledger_requests": 1, "run": "r", "tool": "t", "clock": "utc"}\n': "line 1: field 'clock': expected one of monotonic_s, epoch_s, epoch_ns, got 'utc'",
        '{"ledger_requests": 1, "run": "r", "tool": "t", "started_at": "2026-07-07T09:39:20"}\n': "line 1: field 'started_at': '2026-07-07T09:39:20' has no UTC offset; write e.g. 2026-07-07T09:39:20+08:00",
        "# ledger_requests v2 run=r tool=t\nstatus\n": "line 1: expected '# ledger_requests v1 run=... tool=...'",
        "# ledger_requests v1 run=r tool=t\nstatus,ttft\n": "line 2: field 'ttft': unknown column; known: status,",
    }
    for i, (text, message) in enumerate(cases.items()):
        bad = tmp_path / f"bad{i}.txt"
        bad.write_text(text)
        with pytest.raises(ParseError) as exc:
            IMPORTER.parse(bad, ParseOptions())
        assert str(exc.value).startswith(f"{bad}, {message}")


def test_sniff(samples: Path, fixtures: Path) -> None:
    for path in (p for p in samples.rglob("*") if p.is_file() and p.suffix != ".md"):
        assert IMPORTER.sniff(read_head(path)) is not None, path
    for path in (fixtures / "vllm_bench").glob("*.json*"):
        assert IMPORTER.sniff(read_head(path)) is not None, path
    assert IMPORTER.sniff(b'{"duration": 1}\n') == "no 'ledger_requests' header key"
    assert IMPORTER.sniff(b"gpu,pwr\n") == (
        "first line is neither a ledger_requests JSON header nor '# ledger_requests v1 ...'"
    )


def test_streams_a_large_file(tmp_path: Path) -> None:
    path = tmp_path / "big.csv"
    with open(path, "w") as fh:
        fh.write("# ledger_requests v1 run=big tool=t clock=monotonic_s\nstatus,send_time,output_tokens\n")
        fh.writelines(f"ok,{1000 + i / 1000},{i % 7}\n" for i in range(20000))
    run = one_run(path)
    assert run.capture.record_count == 20000
    assert run.requests.send_ns[1234] == 1001234000000
    assert run.requests.line[-1] == 20002


# ---------------------------------------------------------------- the DuckDB-parsed path (issue 17)

HEAD = {"ledger_requests": 1, "run": "r", "tool": "t", "clock": "epoch_s", "concurrency": 4, "metadata": {"gpu": "H20"}}


def jsonl(path: Path, lines: list[str], head: dict | None = None) -> Path:
    import json

    path.write_text("\n".join([json.dumps(head or HEAD), *lines]) + "\n")
    return path


def python_parse(path: Path, monkeypatch: pytest.MonkeyPatch):
    from bench_ledger.importers import ledger_requests

    with monkeypatch.context() as m:
        m.setattr(ledger_requests, "FAST_PATH", False)
        return IMPORTER.parse(path, ParseOptions())


def same_rows(fast, slow) -> None:
    """Both parses give the same run, capture and database rows (ingest.request_tables)."""
    from bench_ledger.ingest import request_tables

    (a,), (b,) = fast.runs, slow.runs
    assert (a.info, a.capture) == (b.info, b.capture)
    if b.requests is None:
        assert a.requests is None
        return
    (ra, ga), (rb, gb) = (request_tables(1, 1, r.capture.clock, r.requests) for r in (a, b))
    assert ra.equals(rb)
    assert (ga is None and gb is None) or ga.equals(gb)


REGULAR = {
    "epoch_s": [
        '{"status": "ok", "input_tokens": 2048, "output_tokens": 512, "cached_tokens": 1024, "send_time": 1751880000.12345, '
        '"first_token_time": 1751880000.22345, "end_time": 1.7518800095e9, "ttft_s": 0.1, "latency_s": 9.376543211, '
        '"chunk_gaps": [0.017, 0.018, 1.65E-2], "retries": 0}',
        '{"status": "failed", "error": "HTTP 503: {busy}", "input_tokens": 2048, "output_tokens": null, "cached_tokens": null, '
        '"send_time": 1751880001, "end_time": 1751880001.25, "latency_s": 0.25, "retries": 2, "chunk_gaps": null}',
        '{"input_tokens": 7, "chunk_gaps": [], "send_time": 0, "queue_s": 3}',
        '{"status": null, "send_time": 0.0000001}',
    ],
    "only nulls": ['{"status": "ok", "cached_tokens": null, "ttft_s": 0.5}', '{"status": "ok", "cached_tokens": null}'],
    "epoch_ns": [
        '{"send_time": 1751880000123456789, "end_time": 1751880000223456789, "input_tokens": 1}',
        '{"send_time": 1751880000123456790, "output_tokens": 3}',
    ],
}


@pytest.mark.parametrize("case", sorted(REGULAR))
def test_the_duckdb_path_gives_the_rows_of_the_python_path(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    head = dict(HEAD, clock="epoch_ns") if case == "epoch_ns" else HEAD
    path = jsonl(tmp_path / "r.jsonl", REGULAR[case], head)
    (fast,) = IMPORTER.parse_many([path], ParseOptions())
    assert fast is not None, "the fast path refused a regular file"
    same_rows(fast, python_parse(path, monkeypatch))
    if case == "only nulls":  # a key that occurs only with null is captured (R9), a key that never occurs is not
        assert fast.runs[0].capture.fields == ["cached_tokens", "status", "ttft_s"]


def test_the_duckdb_path_on_the_fixtures(fixtures: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = fixtures / "ledger_requests"
    paths = [d / "monotonic.jsonl", d / "no_records.jsonl", d / "native.jsonl", d / "float_tokens.jsonl"]
    got = IMPORTER.parse_many(paths, ParseOptions())
    # native.jsonl has a blank line, and times with 19 significant digits; float_tokens.jsonl an integer written 12.0
    assert [a is not None for a in got] == [True, True, False, False]
    for path, fast in zip(paths[:2], got, strict=False):
        same_rows(fast, python_parse(path, monkeypatch))


def test_a_group_is_read_on_one_thread_a_file_alone_on_duckdbs_default(
    fixtures: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group (parse_many) is read while the import writes the group before it: on one DuckDB thread,
    whose read cost ~0.7 s less CPU per 1,000 files than a parallel one (issue 17); a file imported
    alone (parse) has nothing beside it and keeps DuckDB's default."""
    import duckdb

    settings: list[int] = []
    real = duckdb.connect

    class Spy:  # the connection, with the threads DuckDB runs each read_json on noted
        def __init__(self, con) -> None:
            self.con = con

        def execute(self, sql: str, *args):
            if "read_json(" in sql:
                settings.append(self.con.execute("SELECT current_setting('threads')").fetchone()[0])
            return self.con.execute(sql, *args)

        def __getattr__(self, name: str):
            return getattr(self.con, name)

    monkeypatch.setattr(duckdb, "connect", lambda *a, **k: Spy(real(*a, **k)))
    path = fixtures / "ledger_requests" / "monotonic.jsonl"
    monkeypatch.setattr("bench_ledger.importers.ledger_requests.FAST_MIN_BYTES", 0)
    assert IMPORTER.parse_many([path], ParseOptions())[0] is not None
    assert IMPORTER.parse(path, ParseOptions()).runs
    assert settings == [1, real().execute("SELECT current_setting('threads')").fetchone()[0]]


IRREGULAR = {
    "a string integer": '{"input_tokens": "7"}',
    "a float integer": '{"input_tokens": 7.0}',
    "an exponent integer": '{"retries": 1e2}',
    "a boolean": '{"output_tokens": true}',
    "a number as error": '{"status": "failed", "error": 503}',
    "a number as status": '{"status": 1}',
    "an empty status": '{"status": ""}',
    "NaN": '{"ttft_s": NaN}',
    "-Infinity": '{"latency_s": -Infinity}',
    "a string duration": '{"ttft_s": "0.5"}',
    "16 significant digits": '{"send_time": 1751880000.123456}',
    "a time outside the exact range": '{"send_time": 12345678901234}',
    "a negative token count": '{"input_tokens": -3}',
    "an unknown key": '{"status": "ok", "ttft": 0.5}',
    "an unknown key, null": '{"status": "ok", "run": null}',
    "a prefix of a key": '{"status": "ok", "ttft": null}',
    "a key twice": '{"status": "ok", "status": "failed"}',
    "an escape": '{"status": "failed", "error": "say \\"no\\""}',
    "a surrogate": '{"status": "failed", "error": "\\ud800"}',
    "a null gap": '{"chunk_gaps": [0.1, null]}',
    "a nested gap": '{"chunk_gaps": [[0.1]]}',
    "a string gap": '{"chunk_gaps": ["0.1"]}',
    "gaps not a list": '{"chunk_gaps": 0.1}',
    "a negative gap": '{"chunk_gaps": [-0.1]}',
    "a space before the colon": '{"status" : "ok"}',
    "two objects on a line": '{"status": "ok"} {"status": "ok"}',
    "an array": "[1, 2]",
}


@pytest.mark.parametrize("case", sorted(IRREGULAR))
def test_an_irregular_file_takes_the_python_path(case: str, tmp_path: Path) -> None:
    bad = jsonl(tmp_path / "bad.jsonl", ['{"status": "ok", "send_time": 1751880000.5}', IRREGULAR[case]])
    good = jsonl(tmp_path / "good.jsonl", ['{"status": "ok", "send_time": 1751880000.5}'])
    got = IMPORTER.parse_many([good, bad, good], ParseOptions())
    assert got[1] is None
    assert got[0] is not None and got[2] is not None  # a bad file spoils nothing else


@pytest.mark.parametrize("text", ["\n", "  \n", "\r\n"])
def test_blank_lines_and_carriage_returns_take_the_python_path(text: str, tmp_path: Path) -> None:
    path = tmp_path / "b.jsonl"
    path.write_text('{"ledger_requests": 1, "run": "r", "tool": "t"}\n' + text + '{"status": "ok"}' + text)
    assert IMPORTER.parse_many([path], ParseOptions()) == [None]
    assert one_run(path).requests.line == [3]  # the Python path skips the blank line


def test_an_integer_too_long_to_print_is_refused_by_its_length(tmp_path: Path) -> None:
    """A 5000-digit number (the fuzz corpus's longest) in a time or token field: the message names
    the line and field and describes the value by its digits; before, printing it raised Python's
    own ValueError (more than 4300 digits) as a traceback."""
    huge = "9" * 5000
    header = "# ledger_requests v1 run=r tool=t clock=epoch_s\n"
    cases = {
        "time.csv": (
            f"{header}status,send_time\nok,{huge}\n",
            f"line 3: field 'send_time': a number of seconds beyond the range of int64 nanoseconds, got '{'9' * 39}",
        ),
        "time.jsonl": (
            '{"ledger_requests": 1, "run": "r", "tool": "t", "clock": "epoch_s"}\n'
            f'{{"status": "ok", "send_time": {huge}.5}}\n',
            "line 2: field 'send_time': a number of seconds beyond the range of int64 nanoseconds, "
            f"got {'9' * 40}... (5002 characters)",
        ),
    }
    for name, (text, message) in cases.items():
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(ParseError) as exc:
            IMPORTER.parse(path, ParseOptions())
        assert str(exc.value) == f"{path}, {message}"


def test_seconds_with_more_digits_than_decimals_context_convert_exactly(tmp_path: Path) -> None:
    """39 significant digits: x 10**9 in Decimal's default 28-digit context rounded up to the next
    second (1751880001000000000 ns); truncated exactly it is ...999999999 ns."""
    path = tmp_path / "digits.jsonl"
    path.write_text(
        '{"ledger_requests": 1, "run": "r", "tool": "t", "clock": "epoch_s"}\n'
        '{"status": "ok", "send_time": 1751880000.99999999999999999999999999999}\n'
    )
    (run,) = IMPORTER.parse(path, ParseOptions()).runs
    assert run.requests.send_ns == [1751880000999999999]
