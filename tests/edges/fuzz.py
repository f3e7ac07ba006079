"""Seeded fuzz corpora derived from the real formats (issues 13 and 39), and the check of one input.

``corpus(seed, n)`` (issue 13): seeds are the small valid files of :mod:`tests.edges.inputs` and the
fixtures of tests/fixtures (cut from the tools' real output); each input is one seed with one to three
mutations of the kinds that broke the importers before: a cut anywhere, a lost last line end, a byte
changed (NUL, 0xff, a digit), a number replaced by a negative, NaN, 1e400, a 70-bit or a 5,000-digit
integer or another type, a key doubled, a string with a NUL, a lone surrogate or 100k characters, deep
nesting, a line doubled, dropped or swapped.

``real_corpus(samples, ...)`` (issue 39): every file of ../shared/samples (every format with a real
sample: each importer's own), each mutated as above and also with numeric extremes (1e309, -1, -0.0,
2^64, ...), a value of another type, and another encoding (UTF-16, a byte-order mark, a Latin-1 byte,
CRLF line ends). :func:`try_input` imports one input and says what happened; :func:`garbage` finds
stored values outside their domains, per batch (each input has a batch of its own). The suite runs a
sample (tests/edges/test_fuzz.py), benchmarks/fuzz.py the whole corpus on both backends.

Both corpora are deterministic: the same seed gives the same bytes.
"""

from __future__ import annotations

import contextlib
import io
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path

from tests.edges import inputs as I

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
_NUMBER = re.compile(rb"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])")
_KEY = re.compile(rb'"([A-Za-z_][\w.:]*)"\s*:\s*')
_STRING = re.compile(rb'"(?:[^"\\\n]|\\.)*"')
NUMBERS = [
    b"-1",
    b"-0.5",
    b"NaN",
    b"Infinity",
    b"-Infinity",
    b"1e400",
    b"-1e400",
    str(2**70).encode(),
    b"9" * 5000,
    b'"x"',
    b"null",
    b"true",
    b"[]",
    b"{}",
    b"0",
    b"2147483648",
    b"-",
    b"1.5e-320",
]
STRINGS = [b"\\u0000", b"\\ud800", b"\\udc00x", b"x" * 100_000, b"\\\\", b'\\"', "\u00e9\u4e2d".encode()]


def seeds() -> list[tuple[str, bytes]]:
    """(file name, bytes) of every seed: the built inputs and the repository's fixture files."""
    built = [
        I.vllm_file(),
        I.vllm_lines(I.vllm(), I.vllm(label="r2")),
        I.dmon_file(),
        I.dmon_file(I.DMON_T),
        I.log_file(),
        I.ledger_csv(),
        I.llmperf_individual(),
        I.llmperf_summary(),
        ("gpu.csv", I.NVIDIA_SMI_CSV.encode()),
        ("dcgmi.txt", I.DCGMI_DMON.encode()),
    ]
    files = sorted(
        p for p in FIXTURES.rglob("*") if p.is_file() and p.stat().st_size < 200_000 and "manifest" not in p.parts
    )
    return built + [(p.name, p.read_bytes()) for p in files]


def _cut(rng: random.Random, data: bytes) -> bytes:
    return data[: rng.randrange(1, max(2, len(data)))]


def _no_last_newline(rng: random.Random, data: bytes) -> bytes:
    return data.rstrip(b"\n")


def _byte(rng: random.Random, data: bytes) -> bytes:
    i = rng.randrange(len(data))
    return data[:i] + rng.choice([b"\x00", b"\xff", b"\xc3", b"9", b"-", b"\n", b'"', b"{"]) + data[i + 1 :]


def _number(rng: random.Random, data: bytes) -> bytes:
    found = list(_NUMBER.finditer(data))
    if not found:
        return _byte(rng, data)
    m = rng.choice(found)
    return data[: m.start()] + rng.choice(NUMBERS) + data[m.end() :]


def _double_key(rng: random.Random, data: bytes) -> bytes:
    found = list(_KEY.finditer(data))
    if not found:
        return _byte(rng, data)
    m = rng.choice(found)
    return data[: m.start()] + m.group() + b"0, " + data[m.start() :]


def _string(rng: random.Random, data: bytes) -> bytes:
    found = list(_STRING.finditer(data))
    if not found:
        i = rng.randrange(len(data))
        return data[:i] + rng.choice([b"\x00", b"\xed\xa0\x80", b"x" * 100_000]) + data[i:]
    m = rng.choice(found)
    return data[: m.end() - 1] + rng.choice(STRINGS) + data[m.end() - 1 :]


def _nest(rng: random.Random, data: bytes) -> bytes:
    found = list(_NUMBER.finditer(data))
    if not found:
        return _byte(rng, data)
    m = rng.choice(found)
    depth = rng.choice([50, 2000, 100_000])
    return data[: m.start()] + b"[" * depth + m.group() + b"]" * depth + data[m.end() :]


def _lines(rng: random.Random, data: bytes) -> bytes:
    lines = data.split(b"\n")
    if len(lines) < 3:
        return _byte(rng, data)
    i, j = rng.randrange(len(lines) - 1), rng.randrange(len(lines) - 1)
    what = rng.choice(["double", "drop", "swap", "garbage"])
    if what == "double":
        lines.insert(i, lines[i])
    elif what == "drop":
        del lines[i]
    elif what == "swap":
        lines[i], lines[j] = lines[j], lines[i]
    else:
        lines.insert(i, bytes(rng.randrange(32, 127) for _ in range(rng.randrange(1, 40))))
    return b"\n".join(lines)


MUTATIONS: list[Callable[[random.Random, bytes], bytes]] = [
    _cut,
    _no_last_newline,
    _byte,
    _number,
    _number,
    _number,
    _double_key,
    _string,
    _nest,
    _lines,
]


def corpus(seed: int = 13, n: int = 240) -> list[tuple[str, str, bytes]]:
    """``n`` inputs: (id, file name, bytes); the id says which seed and mutations made it."""
    rng = random.Random(seed)
    base = seeds()
    out = []
    for k in range(n):
        name, data = base[k % len(base)]
        steps = []
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            mutate = rng.choice(MUTATIONS)
            data = mutate(rng, data) or data[:1]
            steps.append(mutate.__name__.lstrip("_"))
        out.append((f"{k:03d} {name} {'+'.join(steps)}", name, data))
    return out


# --------------------------------------------------------------------------- issue 39: the real samples

EXTREMES = [
    b"1e309",
    b"-1e309",
    b"1E+309",
    b"-1",
    b"-0.0",
    b"-0",
    b"1e-400",
    str(2**64).encode(),
    str(-(2**63) - 1).encode(),
    b"9" * 400,
    b"0.1e1000",
    b"+1",
    b"0x10",
    b"1_000",
    b"NaN",
    b"-Infinity",
]
OTHER_TYPES = [b"null", b"true", b"[]", b"{}", b'"1"', b'"NaN"', b'"-1"', b'"abc"', b"[1, 2]", b'{"a": 1}']


def _extreme(rng: random.Random, data: bytes) -> bytes:
    found = list(_NUMBER.finditer(data))
    if not found:
        return _byte(rng, data)
    m = rng.choice(found)
    return data[: m.start()] + rng.choice(EXTREMES) + data[m.end() :]


def _other_type(rng: random.Random, data: bytes) -> bytes:
    found = list(_NUMBER.finditer(data)) + list(_STRING.finditer(data))
    if not found:
        return _byte(rng, data)
    m = rng.choice(found)
    return data[: m.start()] + rng.choice(OTHER_TYPES) + data[m.end() :]


def _encoding(rng: random.Random, data: bytes) -> bytes:
    what = rng.choice(["utf-16", "bom", "latin-1", "crlf"])
    if what == "utf-16":
        return data.decode("utf-8", "replace").encode("utf-16")
    if what == "bom":
        return b"\xef\xbb\xbf" + data
    if what == "crlf":
        return data.replace(b"\n", b"\r\n")
    found = list(_STRING.finditer(data))  # a Latin-1 byte (e-acute) inside a string, or anywhere
    i = rng.choice(found).start() + 1 if found else rng.randrange(len(data))
    return data[:i] + b"\xe9" + data[i:]


REAL_MUTATIONS: list[Callable[[random.Random, bytes], bytes]] = [
    *MUTATIONS,
    _extreme,
    _extreme,
    _extreme,
    _other_type,
    _other_type,
    _encoding,
]


def real_seeds(samples: Path, max_bytes: int | None = None) -> list[tuple[str, bytes]]:
    """(path relative to ``samples``, bytes) of every real sample file (MANIFEST.md aside), sorted; with
    ``max_bytes``, only the files at most that large."""
    files = sorted(p for p in samples.rglob("*") if p.is_file() and p.name != "MANIFEST.md")
    return [
        (str(p.relative_to(samples)), p.read_bytes())
        for p in files
        if max_bytes is None or p.stat().st_size <= max_bytes
    ]


def real_corpus(
    samples: Path, per_seed: int, seed: int = 39, max_bytes: int | None = None
) -> list[tuple[str, str, bytes]]:
    """``per_seed`` mutated inputs of every real sample: (id, relative path, bytes). The inputs of a file
    depend only on the seed and its path, so a sample added later does not change the others'."""
    out = []
    for rel, original in real_seeds(samples, max_bytes):
        rng = random.Random(f"{seed} {rel}")
        for k in range(per_seed):
            data, steps = original, []
            for _ in range(rng.choice([1, 1, 1, 2, 3])):
                mutate = rng.choice(REAL_MUTATIONS)
                data = mutate(rng, data) or data[:1]
                steps.append(mutate.__name__.lstrip("_"))
            out.append((f"{rel} #{k} {'+'.join(steps)}", rel, data))
    return out


TABLES = (
    "batch",
    "artefact",
    "run",
    "published_value",
    "capture",
    "request",
    "request_gaps",
    "request_value",
    "hardware_sample",
    "log_fact",
    "launch",
)


def _counts(ledger) -> dict[str, int]:
    import sqlalchemy as sa

    sql = " UNION ALL ".join(f"SELECT '{t}', count(*) FROM {t}" for t in TABLES)
    with ledger.connection() as conn:
        return {name: n for name, n in conn.execute(sa.text(sql))}


@dataclass
class Outcome:
    """What importing one input did: ``code`` as the CLI's exit code (0, 1, 2 usage, 3 refused, 70 a
    traceback), and ``problem``: why the outcome is wrong (a traceback, rows written by a failed import,
    a message that does not name the file), else None."""

    code: int
    problem: str | None = None


def try_input(ledger, path: Path, batch: str) -> Outcome:
    """Import ``path`` into ``batch`` as `ledger import` does (format detected), and judge the outcome."""
    from bench_ledger.cli.setup import import_one
    from bench_ledger.errors import Refused, UsageError
    from bench_ledger.ingest import ImportTarget

    before = _counts(ledger)
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = 0 if import_one(ledger, path, None, ImportTarget(batch=batch), quiet=True) else 1
    except Refused:
        code = 3
    except UsageError:
        code = 2
    except Exception as exc:  # noqa: BLE001 - the point: any other exception is a defect
        return Outcome(70, f"traceback: {type(exc).__name__}: {str(exc)[:300]}")
    if code == 0:
        return Outcome(0)
    written = {t: n - before[t] for t, n in _counts(ledger).items() if n != before[t]}
    if written:
        return Outcome(code, f"failed (exit {code}) but wrote rows: {written}")
    if code == 1 and not err.getvalue().startswith(f"error: {path}"):
        return Outcome(code, f"message does not name the file: {err.getvalue()[:300]!r}")
    return Outcome(code)


def garbage(ledger) -> dict[str, set[str]]:
    """Stored values outside their domains: check -> the batches holding such a value. Times and durations
    finite and >= 0, counts and token counts >= 0, samples within their counter's domain, printed values of
    non-negative kinds >= 0 and finite, a run's request rate a positive number or 'inf', no NUL in text."""
    import sqlalchemy as sa
    from bench_ledger.records import NON_NEGATIVE_KINDS, SAMPLE_DOMAINS

    nan = "'NaN'::float8" if ledger.backend == "postgresql" else "'NaN'::DOUBLE"

    def bad_float(col: str) -> str:
        return f"({col} < 0 OR {col} = {nan} OR abs({col}) = 'Infinity')"

    by_run = "FROM request r JOIN run u ON u.id = r.run_id JOIN batch b ON b.id = u.batch_id WHERE "
    by_artefact = "JOIN artefact a ON a.id = x.artefact_id JOIN batch b ON b.id = a.batch_id WHERE "
    checks = {f"request.{c}": by_run + bad_float(f"r.{c}") for c in ("ttft_s", "latency_s", "queue_s", "itl_mean_s")}
    checks |= {
        f"request.{c}": f"{by_run}r.{c} < 0"
        for c in ("input_tokens", "output_tokens", "cached_tokens", "retries", "chunk_count")
    }
    checks["chunk_gap.gap_s"] = f"FROM chunk_gap x {by_artefact}{bad_float('x.gap_s')}"
    checks["request_value"] = f"FROM request_value x {by_artefact}(x.value = {nan} OR abs(x.value) = 'Infinity')"
    for counter, d in SAMPLE_DOMAINS.items():
        hi = f" OR x.value > {d.hi}" if d.hi is not None else ""
        checks[f"sample.{counter}"] = (
            f"FROM hardware_sample x {by_artefact}x.counter = '{counter}' AND (x.value < {d.lo} OR x.value = {nan}{hi})"
        )
    checks["sample"] = f"FROM hardware_sample x {by_artefact}(x.value = {nan} OR abs(x.value) = 'Infinity')"
    checks["log_fact"] = f"FROM log_fact x {by_artefact}(lower(CAST(x.value AS VARCHAR)) LIKE '%n%')"
    kinds = ", ".join(f"'{k}'" for k in sorted(NON_NEGATIVE_KINDS))
    pv = "FROM published_value x JOIN batch b ON b.id = x.batch_id WHERE "
    checks["published.not finite"] = f"{pv}lower(CAST(x.value AS VARCHAR)) LIKE '%n%'"  # nan, inf(inity)
    run = "FROM run x JOIN batch b ON b.id = x.batch_id WHERE "
    checks["run.duration_s"] = run + bad_float("x.duration_s")
    checks |= {
        f"run.{c}": f"{run}x.{c} < 0"
        for c in ("input_target_tokens", "output_cap_tokens", "concurrency", "request_count")
    }
    if ledger.backend == "duckdb":  # PostgreSQL cannot hold a NUL in text at all
        checks["request.error NUL"] = f"{by_run}strpos(r.error, chr(0)) > 0"
        checks["run.label NUL"] = f"{run}strpos(x.label, chr(0)) > 0"
    out: dict[str, set[str]] = {}
    with ledger.connection() as conn:
        for name, tail in checks.items():
            found = {b for (b,) in conn.execute(sa.text(f"SELECT DISTINCT b.name {tail}"))}
            if found:
                out[name] = found
        for b, rate in conn.execute(sa.text(f"SELECT DISTINCT b.name, x.request_rate {run}x.request_rate IS NOT NULL")):
            if not _rate_ok(rate):
                out.setdefault("run.request_rate", set()).add(b)
        negative = f"SELECT b.name, CAST(x.value AS VARCHAR) {pv}x.quantity_kind IN ({kinds}) AND CAST(x.value AS VARCHAR) LIKE '-%'"
        for b, text in conn.execute(sa.text(negative)):
            if Decimal(text) < 0:  # "-0.0" is a zero as printed, not a negative value
                out.setdefault("published.negative", set()).add(b)
    return out


def _rate_ok(text: str) -> bool:
    if text == "inf":
        return True
    try:
        value = Decimal(text)
    except InvalidOperation:
        return False
    return value.is_finite() and value > 0
