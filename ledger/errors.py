"""The ledger's exceptions. Everything the ledger raises on purpose derives from LedgerError.

    LedgerError
    ├── UsageError                 the request itself is wrong: unknown name, missing option (exit 2)
    │   └── BadURL                 the ledger URL names another database or a setting not allowed
    ├── StoreError                 the database could not do what was asked
    │   ├── LedgerLocked           a DuckDB file is held by another process
    │   ├── SchemaOutOfDate        the ledger needs `ledger init` (migrations pending)
    │   ├── WriteConflict          another process wrote the same keys at the same time (retry)
    │   └── NotFound               no such batch / run / deployment / ...
    ├── InputError                 a file or manifest is not what it claims to be
    │   ├── ClaimsInvalid          every error of a claims file at once (claim, line, field)
    │   ├── ParseError             names the file, the line or JSON path, and the field
    │   └── UnknownFormat          lists every format tried and why each did not match
    ├── AlreadyImported            the same bytes are in the ledger already (not a failure)
    ├── Refused                    a rule of the rulebook forbids the request (exit 3)
    └── IntegrityError             a seal does not match what is stored (exit 1)

The CLI maps LedgerError to exit 1, Refused to exit 3 and usage errors (UsageError, like click's own) to exit 2. Errors from
other libraries are translated where they enter (the store, the importers), never further up.
"""

from __future__ import annotations

from os import PathLike

__all__ = [
    "AlreadyImported",
    "Ambiguous",
    "BadURL",
    "ClaimsInvalid",
    "FormatRefused",
    "InputError",
    "IntegrityError",
    "LedgerError",
    "LedgerLocked",
    "NotFound",
    "ParseError",
    "Refused",
    "SchemaOutOfDate",
    "StoreError",
    "UnknownFormat",
    "UsageError",
    "WriteConflict",
    "close_names",
    "line_key",
    "near_names",
]


class LedgerError(Exception):
    """Base of every error the ledger raises on purpose."""


class UsageError(LedgerError):
    """The command was called wrongly: a name outside a closed vocabulary, a required option missing."""


class BadURL(UsageError):
    """The ledger URL (--db, $LEDGER_DB) names an unsupported database or a setting not allowed."""


class StoreError(LedgerError):
    """The database could not do what was asked."""


class LedgerLocked(StoreError):
    """A DuckDB ledger file is held open by another process."""


class SchemaOutOfDate(StoreError):
    """The ledger's schema is behind the code: run `ledger init`."""


class WriteConflict(StoreError):
    """Another process committed the same keys (a batch, an artefact, a run) at the same time."""


class NotFound(StoreError):
    """A named batch, run, deployment or row does not exist."""


def near_names(name: str, names: list[str]) -> list[str]:
    """The (at most three) known names closest to a mistyped one (difflib), closest first."""
    import difflib

    return difflib.get_close_matches(name, [n for n in names if n != name], n=3, cutoff=0.6)


def close_names(name: str, names: list[str]) -> str:
    """ " (did you mean a, b?)" naming the known names closest to a mistyped one, or ""."""
    near = near_names(name, names)
    return f" (did you mean {', '.join(near)}?)" if near else ""


class InputError(LedgerError):
    """A file or manifest is not what it claims to be."""


class ClaimsInvalid(InputError):
    """A claims file has errors: all of them, each naming the claim, YAML line and field."""

    def __init__(self, path: object, problems: list[str]) -> None:
        self.path, self.problems = path, list(problems)
        super().__init__(
            f"{path}: {len(self.problems)} error(s); no verdicts were given:\n"
            + "\n".join(f"  {p}" for p in self.problems)
        )


class ParseError(InputError):
    """A file could not be parsed; the message names the file, the place and the field."""

    def __init__(self, path: str | PathLike[str], where: str | None, field: str | None, problem: str) -> None:
        self.path, self.where, self.field, self.problem = str(path), where, field, problem
        place = f"{self.path}, {where}" if where else self.path
        what = f"field {field!r}: " if field else ""
        super().__init__(f"{place}: {what}{problem}")


def line_key(line: str) -> str | None:
    """The key a YAML (or ``key: value``) line opens, ``key:`` or ``- key:``: the field an error on that line names."""
    import re

    found = re.match(r"\s*(?:-\s+)?([^\s:#\[{][^:]*):", line)
    return found.group(1).strip() if found else None


class UnknownFormat(InputError):
    """No importer recognised a file."""

    def __init__(self, path: str | PathLike[str], reasons: dict[str, str]) -> None:
        self.path, self.reasons = str(path), reasons
        tried = "\n".join(f"  {name}: {why}" for name, why in reasons.items())
        super().__init__(f"{self.path}: format not recognised; tried:\n{tried}")


class FormatRefused(InputError):
    """``--format F`` named a format whose own check rejects the file (``importers.choose``)."""


class AlreadyImported(LedgerError):
    """The same bytes were imported before; importing them again changes nothing."""

    def __init__(self, message: str, artefact_id: int | None = None) -> None:
        self.artefact_id = artefact_id
        super().__init__(message)


class Ambiguous(InputError):
    """A file's run could belong to several runs of the batch (``ledger.pairing``): none is chosen."""


class Refused(LedgerError):
    """A rule of the rulebook forbids the request.

    ``rule`` is the rulebook id (``R1``..``R15``), ``asked`` what was requested, ``why`` the
    reason, ``instead`` what to do instead.
    """

    def __init__(self, rule: str, asked: str, why: str, instead: str) -> None:
        self.rule, self.asked, self.why, self.instead = rule, asked, why, instead
        super().__init__(f"refused by {rule}: {asked}: {why}. Instead: {instead}")


class IntegrityError(LedgerError):
    """Stored rows no longer match their seal."""
