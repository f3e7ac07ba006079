"""The `ledger` command group, its shared options and helpers; commands live beside it.

Each command parses its options, opens the ledger, calls one function of ``ledger``,
``importers`` or ``queries`` and renders the result. This module is the only part of the
``ledger`` package that imports ``importers`` and ``queries`` (it is the shell, not the core).

Exit codes: 0 ok, 1 failure, 2 usage error, 3 refused by a rule of the rulebook, 70 internal error (a
bug in bench-ledger: one line names the exception; LEDGER_DEBUG=1 lets it propagate with its traceback),
130 interrupted (Ctrl-C). A reader of stdout that leaves (``ledger runs | head -1``) ends the command
quietly with exit 1, as click's main does for a broken pipe.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import click
from bench_ledger.errors import LedgerError, Refused, UsageError

EXIT_FAILURE, EXIT_USAGE, EXIT_REFUSED = 1, 2, 3
EXIT_INTERNAL = 70  # EX_SOFTWARE of sysexits.h: the exception was none of the ledger's own
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a command stopped by Ctrl-C
INTERRUPTED = "interrupted (Ctrl-C): nothing of the unfinished command was written"
MAX_CELL = 80  # characters of one table cell; longer ones end in '…' (--json prints them whole)


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, with what the command had kept by then (``ledger import`` commits file by file, group by group)."""


def interrupt_of(exc: BaseException) -> bool:
    """Ctrl-C: KeyboardInterrupt, DuckDB's InterruptException, or a ledger error it caused."""
    return isinstance(exc, KeyboardInterrupt) or _interrupt(exc) or (exc.__cause__ is not None and _interrupt(exc.__cause__))


class LedgerGroup(click.Group):
    """Turns the ledger's exceptions into one message and the documented exit code."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            click.echo(str(exc) if isinstance(exc, Interrupted) else INTERRUPTED, err=True)
            ctx.exit(EXIT_INTERRUPTED)
        except Refused as exc:
            click.echo(f"refused ({exc.rule}): {exc.asked}\n  why: {exc.why}\n  instead: {exc.instead}", err=True)
            ctx.exit(EXIT_REFUSED)
        except UsageError as exc:
            click.echo(f"error: {exc}", err=True)
            ctx.exit(EXIT_USAGE)
        except LedgerError as exc:
            if exc.__cause__ is not None and _interrupt(exc.__cause__):
                click.echo(INTERRUPTED, err=True)
                ctx.exit(EXIT_INTERRUPTED)
            click.echo(f"error: {exc}", err=True)
            ctx.exit(EXIT_FAILURE)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise  # click's own: exit codes and usage errors it prints itself
        except BrokenPipeError:
            raise  # the reader of stdout left (`ledger runs | head -1`): click's main stops quietly, exit 1
        except Exception as exc:
            if _interrupt(exc):
                click.echo(INTERRUPTED, err=True)
                ctx.exit(EXIT_INTERRUPTED)
            if os.environ.get("LEDGER_DEBUG") == "1":
                raise
            first = (str(exc).splitlines() or ["(no message)"])[0]
            click.echo(
                f"internal error: {type(exc).__name__}: {first}\n"
                "  this is a bug in bench-ledger, not a verdict on your input; run the command again with\n"
                "  LEDGER_DEBUG=1 to print the traceback, and report it",
                err=True,
            )
            ctx.exit(EXIT_INTERNAL)


def _interrupt(exc: BaseException) -> bool:
    """DuckDB turns Ctrl-C during a query into its own InterruptException ("Query interrupted"),
    which SQLAlchemy may wrap; it means the same as KeyboardInterrupt."""
    for e in (exc, getattr(exc, "orig", None)):
        if e is not None and type(e).__name__ == "InterruptException":
            return True
    return False


db_option = click.option(
    "--db", "db", metavar="URL", envvar="LEDGER_DB", default=None,
    help="Ledger database URL [default: duckdb:///ledger.duckdb; env LEDGER_DB].",
)  # fmt: skip

if TYPE_CHECKING:  # the store (SQLAlchemy, DuckDB, Alembic) loads when a command runs, not for --help
    from bench_ledger.store import Ledger
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")


def open_ledger(db: str | None, *, migrated: bool = True, create: bool = False) -> Ledger:
    """Open the ledger; only ``create=True`` (``ledger init``, the demo) may create a DuckDB file."""
    from bench_ledger.gcpause import gc_paused

    with gc_paused():  # start-up: the collector's passes over the modules loading here (kept for the process)
        from bench_ledger.store import Ledger

        ledger = Ledger(db, create=create)
    if migrated:
        try:
            ledger.require_schema()
        except LedgerError:
            ledger.close()
            raise
    return ledger


def with_ledger(fn: Callable) -> Callable:
    """Open the ledger named by --db for the command and close it afterwards."""

    @db_option
    @functools.wraps(fn)
    def wrapper(db: str | None, **kwargs):
        with open_ledger(db) as ledger:
            return fn(ledger, **kwargs)

    return wrapper


def parse_fail_on(text: str, known: tuple[str, ...]) -> list[str]:
    """The outcomes named by ``--fail-on a,b``; an unknown one is a usage error (exit 2)."""
    wanted = [v.strip() for v in text.split(",") if v.strip()]
    unknown = [v for v in wanted if v not in known]
    if unknown:
        raise click.BadParameter(f"unknown {', '.join(unknown)}; choose from {', '.join(known)}", param_hint="--fail-on")
    return wanted


def exit_on(wanted: list[str], found: dict[str, list[str]], what: str) -> None:
    """Exit 1 when an outcome named by --fail-on occurred, saying on stderr which, how many, where.

    ``found`` maps each outcome to the items (claim ids, run/key pairs) that have it."""
    hits = [(v, found.get(v, [])) for v in wanted if found.get(v)]
    if not hits:
        return
    for verdict, items in hits:
        shown = ", ".join(items[:10]) + (f" and {len(items) - 10} more" if len(items) > 10 else "")
        click.echo(f"failing (--fail-on {verdict}): {len(items)} {what} {verdict}: {shown}", err=True)
    sys.exit(EXIT_FAILURE)


def _cell(value: object, whole: bool) -> str:
    text = "" if value is None else str(value)
    if not whole and len(text) > MAX_CELL:
        return text[: MAX_CELL - 1] + "…"
    return text


def table(rows: list[dict], columns: list[str], title: str | None = None, whole: tuple[str, ...] = ("reason", "why")) -> None:
    """Render rows as a plain aligned table (stable for tests and for piping). Cells are cut at
    MAX_CELL characters except in the ``whole`` columns (sentences), so one long label cannot pad
    every row of a listing to its width (issue 13: a 1 MiB label made `ledger runs` print 25 MB)."""
    if title:
        click.echo(title)
    if not rows:
        click.echo("(none)")
        return
    cells = [[_cell(r.get(c), c in whole) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    click.echo("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for row in cells:
        click.echo("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())


@click.group(cls=LedgerGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="bench-ledger")
def main() -> None:
    """bench-ledger: where does this benchmark number come from?

    \b
    Example:
      ledger init && ledger status
    """
