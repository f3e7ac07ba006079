"""Issue 13, done when: every input of the seeded fuzz corpus (tests/edges/fuzz.py) is either
imported, with every stored value inside its field's domain, or refused with a message naming the
file and nothing written; never a traceback. Both backends, one ledger each."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import sqlalchemy as sa
from bench_ledger.cli.setup import import_one
from bench_ledger.errors import Refused
from bench_ledger.ingest import ImportTarget
from bench_ledger.records import NON_NEGATIVE_KINDS, REQUEST_DOMAINS, SAMPLE_DOMAINS
from bench_ledger.store import Ledger

from tests.clirun import run
from tests.edges import fuzz


def _outside_domains(led: Ledger) -> dict[str, int]:
    """Stored values outside their domains, counted per check (all zero when the import held)."""
    nan = "'NaN'::float8" if led.backend == "postgresql" else "'NaN'::DOUBLE"
    checks = {}
    for col in ("ttft_s", "latency_s", "queue_s", "itl_mean_s"):
        checks[col] = f"SELECT count(*) FROM request WHERE {col} < 0 OR {col} = {nan} OR abs({col}) = 'Infinity'"
    for col in ("input_tokens", "output_tokens", "cached_tokens", "retries"):
        checks[col] = f"SELECT count(*) FROM request WHERE {col} < 0"
    checks["gap_s"] = f"SELECT count(*) FROM chunk_gap WHERE gap_s < 0 OR gap_s = {nan} OR abs(gap_s) = 'Infinity'"
    for counter, d in SAMPLE_DOMAINS.items():
        hi = f" OR value > {d.hi}" if d.hi is not None else ""
        checks[counter] = (
            f"SELECT count(*) FROM hardware_sample WHERE counter = '{counter}' AND "
            f"(value < {d.lo} OR value = {nan}{hi})"
        )
    checks["any sample"] = f"SELECT count(*) FROM hardware_sample WHERE value = {nan} OR abs(value) = 'Infinity'"
    kinds = ", ".join(f"'{k}'" for k in sorted(NON_NEGATIVE_KINDS))
    checks["published"] = f"SELECT count(*) FROM published_value WHERE quantity_kind IN ({kinds}) AND value LIKE '-%'"
    if led.backend == "duckdb":  # PostgreSQL cannot hold a NUL in text at all
        checks["text"] = "SELECT count(*) FROM request WHERE strpos(error, chr(0)) > 0"
    with led.session() as s:
        out = {name: s.execute(sa.text(sql)).scalar_one() for name, sql in checks.items()}
    assert set(REQUEST_DOMAINS) >= {"ttft_s", "latency_s", "queue_s", "itl_mean_s", "input_tokens"}
    return {k: v for k, v in out.items() if v}


def test_every_fuzz_input_is_imported_in_domain_or_refused_cleanly(ledger: Ledger, tmp_path: Path) -> None:
    imported = refused = 0
    wrong: dict[str, str] = {}
    for k, (cid, name, data) in enumerate(fuzz.corpus()):
        path = tmp_path / f"{k:03d}-{name}"
        path.write_bytes(data)
        with ledger.session() as s:
            before = s.execute(sa.text("SELECT count(*) FROM artefact")).scalar_one()
        out, err = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                ok = import_one(ledger, path, None, ImportTarget(batch=f"f{k}"), quiet=True)
        except Refused:
            ok = False
        except Exception as exc:  # noqa: BLE001 - the point: any other exception is a defect
            wrong[cid] = f"traceback: {type(exc).__name__}: {str(exc)[:200]}"
            continue
        with ledger.session() as s:
            after = s.execute(sa.text("SELECT count(*) FROM artefact")).scalar_one()
        if ok:
            imported += after - before
            if out.getvalue() and not out.getvalue().startswith(str(path)):
                wrong[cid] = f"unexpected output {out.getvalue()[:200]!r}"
        else:
            refused += 1
            if after != before:
                wrong[cid] = "refused but wrote an artefact"
            elif not err.getvalue().startswith(f"error: {path}"):
                wrong[cid] = f"message does not name the file: {err.getvalue()[:200]!r}"
    assert wrong == {}
    assert _outside_domains(ledger) == {}
    assert imported >= 20 and refused >= 100, (imported, refused)  # the corpus exercises both outcomes


def test_the_real_samples_mutated_import_in_domain_or_fail_cleanly(
    ledger: Ledger, samples: Path, tmp_path: Path
) -> None:
    """Issue 39: the CI sample of benchmarks/fuzz.py's corpus (the first mutated input of every real sample
    file up to 250 kB: every sample folder): exit 0 with every stored value in its domain, or exit 1 with a message
    naming the file and nothing written; never a traceback."""
    inputs = fuzz.real_corpus(samples, per_seed=1, max_bytes=250_000)
    assert {rel.split("/")[0] for _, rel, _ in inputs} == {p.name for p in samples.iterdir() if p.is_dir()}
    codes, wrong, ids = [], {}, {}
    for k, (cid, rel, data) in enumerate(inputs):
        path = tmp_path / f"{k:03d}" / rel
        path.parent.mkdir(parents=True)
        path.write_bytes(data)
        ids[f"f{k}"] = cid
        outcome = fuzz.try_input(ledger, path, f"f{k}")
        codes.append(outcome.code)
        if outcome.problem:
            wrong[cid] = outcome.problem
    assert wrong == {}
    assert {check: sorted(ids[b] for b in batches) for check, batches in fuzz.garbage(ledger).items()} == {}
    assert set(codes) == {0, 1} and codes.count(0) >= 5  # both outcomes exercised


GENAI_BENCH = "genai-bench/baseten_training_benchmark__N2000_200_200_20_text-to-text_num_concurrency_2_time_63s.json"
AIPERF_CSV = "aiperf/aiperf-repo-examples-run1__profile_export_aiperf.csv"
DCGMI = "dcgmi-dmon/agi-hpc_dcgm_dmon_rtx2080ti.txt"
MLPERF = "mlperf-loadgen/NVIDIA_B200-SXM-180GBx8_TRT_llama2-70b-99_Server_mlperf_log_detail.txt"
IP_CONFIG = "inference-perf/kubecon-na-2025_config.yaml"


def test_what_the_fuzz_corpus_found_is_refused_naming_the_file(ledger_url: str, samples: Path, tmp_path: Path) -> None:
    """Inputs of benchmarks/fuzz.py's corpus that gave a traceback (a 400-digit TTFT in genai-bench: OverflowError;
    a Latin-1 byte in AIPerf's CSV: UnicodeDecodeError; a CSV field over the csv module's 128 KiB: csv.Error; a
    5,000-digit integer in an MLPerf detail log or in inference-perf's config.yaml: ValueError) or, on PostgreSQL, a message without the file (a NUL
    in dcgmi's header, quoted by the artefact's note): each is refused naming the file and line, exit 1, nothing
    written."""
    genai = (samples / GENAI_BENCH).read_text()
    at = genai.index('"ttft": 0.20842880569398403')
    cases = {
        "genai.json": genai[:at] + '"ttft": ' + "9" * 400 + genai[at + len('"ttft": 0.20842880569398403') :],
        "aiperf.csv": (samples / AIPERF_CSV).read_bytes().replace(b"Request Latency", b"Request Lat\xe9ncy", 1),
        "dcgmi.txt": (samples / DCGMI).read_bytes().replace(b"POWER ", b"POWER\x00", 1),
        "aiperf-field.csv": (samples / AIPERF_CSV).read_bytes().replace(b"27.76", b"2" * 140_000, 1),
        "mlperf.txt": (samples / MLPERF).read_bytes().replace(b'"line_no": 53', b'"line_no": ' + b"9" * 5000, 1),
        "config.yaml": (samples / IP_CONFIG)
        .read_bytes()
        .replace(b"question_len: 64", b"question_len: " + b"9" * 5000, 1),
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data if isinstance(data, bytes) else data.encode())
    bits, latin1 = int("9" * 400).bit_length(), cases["aiperf.csv"].index(b"\xe9")
    expected = {
        "genai.json": f"$.individual_request_metrics[0]: field 'ttft': a {bits}-bit integer: beyond the range of a double",
        "aiperf.csv": f"byte {latin1}: not UTF-8 text",
        "dcgmi.txt": "field 'note': the artefact's note contains a NUL character (U+0000), which the ledger does not store",
        "aiperf-field.csv": "line 3: not a CSV row: field larger than field limit (131072)",
        "mlperf.txt": "line 1: an integer with more than 4,300 digits",
        "config.yaml": "an integer with more than 4,300 digits",  # the YAML loader gives no line for it
    }
    for name, tail in expected.items():
        path = tmp_path / name
        sep = "," if tail.startswith(("line", "byte", "$")) else ":"
        assert (
            run("import", "--db", ledger_url, "--batch", "b", "-q", path, code=1).output
            == f"error: {path}{sep} {tail}\n"
        )
    assert run("batches", "--db", ledger_url).output == "(none)\n"
