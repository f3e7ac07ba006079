"""docs/rules.md is the rulebook the CLI cites: every rule id the code can refuse with has its section."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_every_cited_rule_is_explained_for_users() -> None:
    code = "\n".join(p.read_text() for d in ("ledger", "queries", "importers") for p in (REPO / d).rglob("*.py"))
    cited = set(re.findall(r'"(R\d+)"', code))
    doc = (REPO / "docs" / "rules.md").read_text()
    sections = re.findall(r"^\*\*(R\d+) ", doc, flags=re.M)
    assert sections == [f"R{i}" for i in range(1, 16)]
    assert cited and cited <= set(sections)
