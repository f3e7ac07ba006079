"""Where in a claims file's YAML a problem is: the line of a location, its field in plain dotted form."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

__all__ = ["TAGS", "Problem", "field_path", "line_of", "problem_at"]


def line_of(node: Any, loc: tuple) -> int | None:
    """The 1-based line of the YAML node at ``loc``, or of the deepest node on the way there."""
    if node is None:
        return None
    line = node.start_mark.line + 1
    for key in loc:
        child = None
        if isinstance(node, yaml.MappingNode):
            child = next((v for k, v in node.value if getattr(k, "value", None) == key), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and 0 <= key < len(node.value):
            child = node.value[key]
        if child is None:
            if isinstance(key, str) and key in TAGS:
                continue  # a discriminator tag, not a key of the file
            break
        node, line = child, child.start_mark.line + 1
    return line


TAGS = ("claim", "literal", "metric", "formula")


def field_path(loc: tuple) -> str:
    """('derived', 'operands', 1, 'literal', 'kind') -> 'derived.operands[1].kind'."""
    out = ""
    for key in loc:
        if isinstance(key, int):
            out += f"[{key}]"
        elif key in TAGS and out.endswith("]"):
            continue
        else:
            out += ("." if out else "") + str(key)
    return out


@dataclass(frozen=True)
class Problem:
    """One error of a claims file: where (claim, YAML line, field) and what, in plain words."""

    line: int | None
    claim: str | None
    field: str | None
    message: str

    def text(self) -> str:
        where = f"line {self.line}" if self.line else "?"
        who = f"claim {self.claim}" if self.claim else "file"
        return f"{where}: {who}" + (f", field {self.field}" if self.field else "") + f": {self.message}"


def problem_at(node: Any, raw: Any, loc: tuple, message: str) -> Problem:
    """A problem at a location of the file's data ('claims', i, ...)."""
    claim = None
    rest = loc
    if len(loc) >= 2 and loc[0] == "claims" and isinstance(loc[1], int):
        items = raw.get("claims") if isinstance(raw, dict) else None
        if isinstance(items, list) and loc[1] < len(items) and isinstance(items[loc[1]], dict):
            claim = str(items[loc[1]].get("id") or f"#{loc[1] + 1}")
        else:
            claim = f"#{loc[1] + 1}"
        rest = loc[2:]
    return Problem(line_of(node, loc), claim, field_path(rest) or None, message)
