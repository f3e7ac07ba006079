"""AIPerf's CSV export importer (importers/aiperf_csv.py): what its sniff refuses, and the rows it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench_ledger.errors import ParseError


def test_aiperf_csv_sniff_and_bad_rows(tmp_path: Path) -> None:
    from bench_ledger.importers import aiperf_csv
    from bench_ledger.importers.base import ParseOptions

    genai_perf = (
        b"Metric,avg,min,max,p99,p90,p75,p50,p25\nTime To First Token (ms),1.00,1.00,1.00,1.00,1.00,1.00,1.00,1.00\n"
    )
    assert aiperf_csv.IMPORTER.sniff(genai_perf) == (
        "statistics header without p1, p5 and std: not AIPerf's CSV exporter (GenAI-Perf writes no p1/p5)"
    )
    assert aiperf_csv.IMPORTER.sniff(b"# Samples\n") is not None
    f = tmp_path / "profile_export_aiperf.csv"
    f.write_text("Metric,avg,min,max,p1,p5,p50,p99,std\nRequest Latency (ms),1.00,n/a,1.00,1.00,1.00,1.00,1.00,0.00\n")
    with pytest.raises(ParseError) as err:
        aiperf_csv.IMPORTER.parse(f, ParseOptions())
    assert str(err.value) == f"{f}, line 2: field 'min': expected a number, got 'n/a'"
    f.write_text("Metric,avg,min,max,p1,p5,p50,p99,std\nRequest Latency (ms),1.00,1.00\n")
    with pytest.raises(ParseError) as err:
        aiperf_csv.IMPORTER.parse(f, ParseOptions())
    assert str(err.value) == f"{f}, line 2: field 'Request Latency (ms)': 3 cells, the table header has 9"
