"""References between the claims of a file: duplicate ids, unknown or self references, cycles.

Checked over the claims as plain data (before the models validate), so a file with other errors is checked too.
"""

from __future__ import annotations

from typing import Any

from bench_ledger.errors import close_names

__all__ = ["reference_problems"]


def _walk_refs(f: Any, out: list[str]) -> None:
    for o in (f or {}).get("operands") or []:
        if isinstance(o, str):
            out.append(o)
        elif isinstance(o, dict) and "op" in o:
            _walk_refs(o, out)


def reference_problems(raw: list[Any]) -> list[tuple[int, str, str]]:
    """Duplicate ids, references to unknown claims or to the claim itself, cycles: every one, as
    (claim index, field, message), over claims as plain data (so a file with other errors is
    checked too)."""
    out: list[tuple[int, str, str]] = []
    ids = [c.get("id") if isinstance(c, dict) else None for c in raw]
    first: dict[str, int] = {}
    for i, cid in enumerate(ids):
        if cid is None:
            continue
        if cid in first:
            out.append((i, "id", f"duplicate claim id {cid!r} (claim {first[cid] + 1} has it too)"))
        else:
            first[cid] = i
    refs: dict[str, list[str]] = {}
    for i, c in enumerate(raw):
        if not isinstance(c, dict):
            continue
        for key, f in (("derived", c.get("derived")), ("na.would_fill", (c.get("na") or {}).get("would_fill"))):
            if not isinstance(f, dict):
                continue
            got: list[str] = []
            _walk_refs(f, got)
            for ref in got:
                if ref not in first:
                    out.append(
                        (i, f"{key}.operands", f"refers to unknown claim {ref!r}{close_names(ref, list(first))}")
                    )
                elif ref == c.get("id"):
                    out.append((i, f"{key}.operands", "refers to itself"))
            if key == "derived" and c.get("id") is not None:
                refs[c["id"]] = [r for r in got if r in first and r != c["id"]]
    seen: set[str] = set()

    def visit(cid: str, path: tuple[str, ...]) -> None:
        if cid in path:
            cycle = path[path.index(cid) :] + (cid,)
            if cycle[0] not in seen:
                seen.update(cycle)
                out.append(
                    (
                        first[cycle[0]],
                        "derived.operands",
                        f"claims refer to each other in a cycle: {' -> '.join(cycle)}",
                    )
                )
            return
        for ref in refs.get(cid, []):
            visit(ref, path + (cid,))

    for cid in refs:
        visit(cid, ())
    return out
