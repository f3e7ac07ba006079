"""The ``config.yaml`` inference-perf writes (or was run with) beside its reports: the settings of a launch.

Kept as text values keyed by their YAML path (``load.sweep.num_stages``), flag ``reported``: they
are what the tool was told to do (stage rates, durations, the API and data shapes), not
measurements. Keys that hold credentials (``token``, ``api_key``, ``password``, ``secret``...) are
not kept.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from bench_ledger.errors import ParseError
from bench_ledger.importers._toolfiles import head_text
from bench_ledger.importers.base import json_problem, read_utf8
from bench_ledger.records import ParsedArtefact, Published

__all__ = ["IMPORTER"]

_SECRET = re.compile(r"(token|api_key|apikey|password|secret|credential)", re.I)


class InferencePerfConfigImporter:
    name = "inference-perf-config"
    description = "kubernetes-sigs/inference-perf config.yaml (launch settings: load stages, api, data, server)"

    def sniff(self, head: bytes) -> str | None:
        text = head_text(head)
        tops = set(re.findall(r"^([a-z_]+):", text, re.M))
        if not {"load", "server"} <= tops or not tops & {"api", "data", "report"}:
            return "not an inference-perf config (top-level load:, server: and api:/data:/report:)"
        return None

    def parse(self, path: Path, options) -> ParsedArtefact:
        try:
            data = yaml.safe_load(read_utf8(path))
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"line {mark.line + 1}" if mark is not None else None
            raise ParseError(path, where, None, f"invalid YAML: {getattr(exc, 'problem', exc)}") from None
        except (
            RecursionError,
            ValueError,
        ) as exc:  # nesting beyond the recursion limit; an integer beyond CPython's digits
            raise ParseError(path, None, None, json_problem(exc)) from None
        if not isinstance(data, dict):
            raise ParseError(path, "line 1", None, "expected a YAML mapping")
        out: list[Published] = []
        _flatten(data, [], out)
        return ParsedArtefact(
            format=self.name,
            format_version=None,
            published=out,
            note="inference-perf settings of one launch; credential keys not kept",
        )


def _flatten(obj: object, parts: list[str], out: list[Published]) -> None:
    if isinstance(obj, dict):
        for key, value in obj.items():
            if _SECRET.search(str(key)):
                continue
            _flatten(value, [*parts, str(key)], out)
        return
    if isinstance(obj, list):
        if all(not isinstance(v, (dict, list)) for v in obj):
            out.append(Published(key=".".join(parts), text=", ".join(str(v) for v in obj), note="setting"))
        else:
            for i, v in enumerate(obj):
                _flatten(v, [*parts, str(i)], out)
        return
    text = "null" if obj is None else ("true" if obj is True else "false" if obj is False else str(obj))
    out.append(Published(key=".".join(parts), text=text, note="setting"))


IMPORTER = InferencePerfConfigImporter()
