"""The claims-file format: its published JSON Schema is up to date, the case-study file validates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench_ledger.errors import InputError
from bench_ledger.queries.claims import VERDICTS, ClaimsFile, load_claims, schema_text

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = ROOT / "docs" / "claims.schema.json"
CASE_STUDY = ROOT / "ledger" / "casestudy" / "claims.yaml"


def test_schema_file_is_up_to_date():
    assert SCHEMA.read_text(encoding="utf-8") == schema_text(), (
        "docs/claims.schema.json is stale: run `python -m queries.claims --schema > docs/claims.schema.json`"
    )


def test_schema_documents_every_field():
    schema = json.loads(schema_text())

    def walk(node: dict, where: str) -> None:
        for name, prop in node.get("properties", {}).items():
            assert prop.get("description"), f"{where}.{name} has no description"

    walk(schema, "ClaimsFile")
    for name, node in schema["$defs"].items():
        walk(node, name)
    assert schema["properties"]["version"]["const"] == 1


def test_case_study_claims_validate():
    claims = load_claims(CASE_STUDY)
    assert isinstance(claims, ClaimsFile)
    assert claims.synthetic
    assert claims.source_report.slug == "h20-dsv41-flash"
    assert (CASE_STUDY.parent / claims.source_report.file).is_file()
    assert len(claims.claims) > 100
    assert all(c.expected_verdict in VERDICTS for c in claims.claims)
    assert all(c.expected_rule for c in claims.claims if c.expected_verdict == "refused")


def test_case_study_shows_every_verdict_kind_it_has():
    claims = load_claims(CASE_STUDY)
    kinds = {c.expected_verdict for c in claims.claims}
    for verdict in ("reproduced", "consistent", "quoted", "estimated", "n/a-kept", "refused", "not-derivable"):
        assert verdict in kinds


def test_case_study_refusals_cover_the_rules():
    claims = load_claims(CASE_STUDY)
    rules = {c.expected_rule for c in claims.claims if c.expected_verdict == "refused"}
    assert {"R1", "R2", "R4", "R5", "R6", "R7", "R8", "R12", "R13", "R14"} <= rules


def test_case_study_validates_against_json_schema_shape():
    # without a JSON Schema validator installed: the YAML's top-level keys are the schema's
    import yaml

    data = yaml.safe_load(CASE_STUDY.read_text(encoding="utf-8"))
    schema = json.loads(schema_text())
    assert set(data) <= set(schema["properties"])
    assert set(schema["required"]) <= set(data)


def test_bad_file_names_the_field(tmp_path):
    bad = tmp_path / "c.yaml"
    bad.write_text(
        "version: 1\nsource_report: {slug: x, title: t}\nclaims:\n  - {id: a, text: '1', kind: nope, "
        "quoted: {source: s}}\n",
        encoding="utf-8",
    )
    with pytest.raises(InputError, match="line 4: claim a, field kind: unknown quantity kind 'nope'; known: "):
        load_claims(bad)


def test_a_claims_file_nested_50000_deep_names_its_line_and_field(tmp_path, monkeypatch):
    """libyaml refused it and the pure-Python loader it fell back to ran out of stack: a RecursionError,
    exit 70 (issue 39). libyaml's refusal is the answer, with its line and column; without libyaml the
    pure-Python loader's position is."""
    import yaml
    from bench_ledger.errors import ParseError

    path = tmp_path / "claims.yaml"
    path.write_text("version: 1\nclaims: " + "[" * 50_000 + "]" * 50_000 + "\n")
    with pytest.raises(ParseError) as err:
        load_claims(path)
    assert str(err.value) == (
        f"{path}, line 2 column 1008: field 'claims': exceeded maximum nesting depth (while increasing flow level)"
    )
    monkeypatch.delattr(yaml, "CSafeLoader")
    with pytest.raises(ParseError) as err:
        load_claims(path)
    assert str(err.value).startswith(f"{path}, line 2 column ")
    assert str(err.value).endswith(": field 'claims': nested too deeply to read (beyond Python's recursion limit)")
