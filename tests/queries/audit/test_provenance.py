"""`ledger explain … --format prov-json`: the evidence chain as W3C PROV, validated with the `prov` library."""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path

from bench_ledger.cli import main
from click.testing import CliRunner
from prov.model import PROV, ProvActivity, ProvAgent, ProvDocument, ProvEntity

CLAIMS = Path(str(resources.files("bench_ledger.casestudy") / "claims.yaml"))


def _prov(demo_built: Path, claim: str) -> tuple[str, ProvDocument]:
    db = f"duckdb:///{demo_built / 'ledger.duckdb'}"
    result = CliRunner().invoke(main, ["explain", str(CLAIMS), claim, "--format", "prov-json", "--db", db])
    assert result.exit_code == 0, result.output
    return result.output, ProvDocument.deserialize(content=result.output, format="json")


def test_prov_json_of_a_metric_claim_validates_and_names_every_link(demo_built: Path) -> None:
    text, doc = _prov(demo_built, "tier-50k-total-tpm")
    # validation: the library reads it back, and its PROV-N form parses back to the same document
    again = ProvDocument.deserialize(content=doc.serialize(format="provn"), format="provn")
    assert again == doc
    assert json.loads(text)["prefix"]["bl"] == "urn:bench-ledger:"
    records = {str(r.identifier): r for r in doc.get_records() if r.identifier is not None}
    sha = hashlib.sha256((demo_built / "data" / "fx" / "SYNTHETIC-fx-50k-200-c4n8.json").read_bytes()).hexdigest()
    art = dict((str(k), v) for k, v in records["bl:artefact/16"].attributes)
    assert art["bl:sha256"] == sha and art["prov:label"] == "SYNTHETIC-fx-50k-200-c4n8.json"
    assert isinstance(records["bl:import/16"], ProvActivity)
    assert isinstance(records["bl:agent/importer/vllm-bench"], ProvAgent)
    assert isinstance(records["bl:agent/bench-ledger"], ProvAgent)
    assert isinstance(records["bl:evaluate/tier-50k-total-tpm"], ProvActivity)
    assert isinstance(records["bl:audit"], ProvActivity)
    assert isinstance(records["bl:claim/tier-50k-total-tpm"], ProvEntity)
    assert isinstance(records["bl:value/tier-50k-total-tpm"], ProvEntity)
    assert isinstance(records["bl:requests/run7/artefact16"], ProvEntity)
    assert isinstance(records["bl:run/7"], ProvEntity)
    report = dict((str(k), v) for k, v in records["bl:report/h20-dsv41-flash"].attributes)
    assert (
        report["bl:sha256"]
        == hashlib.sha256((demo_built / "data" / "h20-dsv41-flash-report.zh.txt").read_bytes()).hexdigest()
    )
    rels = {
        (type(r).__name__, *[str(v) for _, v in r.formal_attributes[:2]]) for r in doc.get_records() if r.is_relation()
    }
    assert ("ProvGeneration", "bl:value/tier-50k-total-tpm", "bl:evaluate/tier-50k-total-tpm") in rels
    assert ("ProvUsage", "bl:evaluate/tier-50k-total-tpm", "bl:requests/run7/artefact16") in rels
    assert ("ProvDerivation", "bl:requests/run7/artefact16", "bl:artefact/16") in rels
    assert ("ProvUsage", "bl:import/16", "bl:artefact/16") in rels
    assert ("ProvAssociation", "bl:import/16", "bl:agent/importer/vllm-bench") in rels
    assert ("ProvDerivation", "bl:claim/tier-50k-total-tpm", "bl:report/h20-dsv41-flash") in rels
    assert ("ProvAttribution", "bl:artefact/16", "bl:agent/tool/vllm-bench") in rels  # the run's tool wrote the file
    agents = [r for r in records.values() if isinstance(r, ProvAgent)]
    assert all(PROV["SoftwareAgent"] in r.get_asserted_types() for r in agents)


def test_prov_json_of_a_derived_claim_links_its_operands(demo_built: Path) -> None:
    _, doc = _prov(demo_built, "sys-gpus")
    rels = {
        (type(r).__name__, *[str(v) for _, v in r.formal_attributes[:2]]) for r in doc.get_records() if r.is_relation()
    }
    assert ("ProvUsage", "bl:evaluate/sys-gpus", "bl:claim/sys-nodes") in rels
    assert ("ProvUsage", "bl:evaluate/sys-gpus", "bl:claim/sys-gpus-per-node") in rels
    verdicts = {
        str(r.identifier): dict((str(k), v) for k, v in r.attributes).get("bl:verdict")
        for r in doc.get_records(ProvEntity)
        if str(r.identifier).startswith("bl:claim/")
    }
    assert verdicts == {
        "bl:claim/sys-gpus": "consistent",
        "bl:claim/sys-nodes": "quoted",
        "bl:claim/sys-gpus-per-node": "quoted",
    }
