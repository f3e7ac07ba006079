"""The evidence chain of a claim as W3C PROV (the `prov` package), for `ledger explain --format prov-json`.

Why PROV: a reviewer should be able to load the chain into any PROV tool and check it without this
program. The graph is built from the very steps `ledger explain` prints (:func:`queries.audit.explain`),
so the two never disagree:

* entities: the source report (its text's sha256), each claim (the printed number, with its
  verdict), each computed value (metric value or formula result, with unit and provenance flag),
  the runs, the request records of each run in each artefact (count, fields, lines), and each
  artefact (file name, format, sha256);
* activities: the import of each artefact, each formula or metric evaluation, the audit of each
  claim;
* agents: the benchmark tool that wrote an artefact (when the run names it), the importer that
  read it, and bench-ledger, which evaluated and audited.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench_ledger.queries.audit._explain import EvidenceStep, explain
from bench_ledger.queries.claims import ClaimsFile

__all__ = ["prov_document"]

NAMESPACE = ("bl", "urn:bench-ledger:")


def _safe(x: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in x)


def prov_document(
    claims: ClaimsFile,
    ledger: Any,
    claim_id: str,
    *,
    claims_path: Path | None = None,
    steps: list[EvidenceStep] | None = None,
):
    """A ``prov.model.ProvDocument`` of the claim's evidence chain."""
    from bench_ledger.ingest import package_version
    from prov.model import PROV, ProvDocument

    steps = steps if steps is not None else explain(claims, ledger, claim_id, claims_path=claims_path)
    doc = ProvDocument()
    doc.add_namespace(*NAMESPACE)
    ledger_agent = doc.agent(
        "bl:agent/bench-ledger", {"prov:type": PROV["SoftwareAgent"], "bl:version": package_version()}
    )
    audit = doc.activity("bl:audit", other_attributes={"prov:label": f"audit of {claims.source_report.slug}"})
    doc.wasAssociatedWith(audit, ledger_agent)
    src = next(s for s in steps if s.level == "source report")
    report = doc.entity(
        f"bl:report/{_safe(src.detail['slug'])}",
        {"prov:label": claims.source_report.title, "bl:sha256": src.detail.get("sha256") or "n/a"},
    )
    made: set[str] = set()
    current: str | None = None  # the claim whose metric the run/request/artefact steps belong to

    def once(ident: str) -> bool:
        if ident in made:
            return False
        made.add(ident)
        return True

    def claim_entity(cid: str) -> str:
        return f"bl:claim/{_safe(cid)}"

    def value_entity(cid: str) -> str:
        return f"bl:value/{_safe(cid)}"

    for s in steps:
        d = s.detail
        if s.level == "claim" and "verdict" in d:
            cid = d["claim"]
            if once(claim_entity(cid)):
                c = claims.by_id()[cid]
                ent = doc.entity(
                    claim_entity(cid),
                    {
                        "prov:label": f"{c.text} {c.unit or ''}".strip(),
                        "bl:kind": c.kind,
                        "bl:verdict": d["verdict"],
                        "bl:rule": d.get("rule") or "none",
                    },
                )
                doc.wasDerivedFrom(ent, report)
                doc.used(audit, ent)
        elif s.level in ("formula", "metric") and "claim" in d and ("formula" in d or "metric" in d):
            cid = d["claim"]
            current = cid
            act_id = f"bl:evaluate/{_safe(cid)}"
            if not once(act_id):
                continue
            label = d.get("formula") or f"metric {d['metric']} over {d['scope']}"
            act = doc.activity(act_id, other_attributes={"prov:label": label})
            doc.wasAssociatedWith(act, ledger_agent)
            attrs = {"bl:flag": d.get("flag") or "derived"}
            if d.get("value") is not None:
                attrs["prov:value"] = d["value"]
            if d.get("unit"):
                attrs["bl:unit"] = d["unit"]
            if d.get("na_reason"):
                attrs["bl:na_reason"] = d["na_reason"]
            val = doc.entity(value_entity(cid), attrs)
            doc.wasGeneratedBy(val, act)
            doc.used(audit, val)
            for ref in d.get("operands", []):
                doc.used(act, claim_entity(ref))
                if value_entity(ref) in made:
                    doc.used(act, value_entity(ref))
        elif s.level == "runs" and current is not None:
            run = f"bl:run/{d['run_id']}"
            if once(run):
                doc.entity(
                    run,
                    {
                        "prov:type": PROV["Collection"],
                        "bl:batch": d["batch"],
                        "prov:label": f"run {d['run_id']} {d['label']} (batch {d['batch']})",
                    },
                )
        elif s.level == "requests" and current is not None:
            ident = f"bl:requests/run{d['run_id']}/artefact{d['artefact_id']}"
            if once(ident):
                doc.entity(
                    ident,
                    {
                        "prov:label": f"{d['count']} request records",
                        "bl:count": d["count"],
                        "bl:fields": ",".join(d["fields"]) or "none",
                        "bl:lines": "n/a" if not d["lines"] else f"{d['lines'][0]}-{d['lines'][1]}",
                    },
                )
                doc.wasDerivedFrom(ident, f"bl:artefact/{d['artefact_id']}")
                doc.wasGeneratedBy(ident, f"bl:import/{d['artefact_id']}")
                doc.hadMember(f"bl:run/{d['run_id']}", ident)
            doc.used(f"bl:evaluate/{_safe(current)}", ident)
        elif s.level == "artefacts" and current is not None and "artefact_id" in d:
            aid = d["artefact_id"]
            art = f"bl:artefact/{aid}"
            if once(art):
                doc.entity(art, {"prov:label": d["file_name"], "bl:format": d["format"], "bl:sha256": d["sha256"]})
                imp = doc.activity(f"bl:import/{aid}", other_attributes={"prov:label": f"import of {d['file_name']}"})
                doc.used(imp, art)
                agent = f"bl:agent/importer/{_safe(d['importer'])}"
                if once(agent):
                    doc.agent(agent, {"prov:type": PROV["SoftwareAgent"], "bl:version": d["importer_version"]})
                doc.wasAssociatedWith(imp, agent)
                tool = _tool_of(steps, d.get("run_id"))
                if tool:
                    tagent = f"bl:agent/tool/{_safe(tool[0])}"
                    if once(tagent):
                        doc.agent(tagent, {"prov:type": PROV["SoftwareAgent"], "bl:version": tool[1] or "n/a"})
                    doc.wasAttributedTo(art, tagent)
            if d.get("run_id") is None:  # a log or dmon artefact read directly by the metric
                doc.used(f"bl:evaluate/{_safe(current)}", art)
    return doc


def _tool_of(steps: list[EvidenceStep], run_id: int | None) -> tuple[str, str | None] | None:
    for s in steps:
        if s.level == "runs" and s.detail.get("run_id") == run_id and s.detail.get("tool"):
            return s.detail["tool"], s.detail.get("tool_version")
    return None
