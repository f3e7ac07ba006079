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
import re
import sys
import textwrap
import unicodedata
from collections.abc import Callable
from typing import TYPE_CHECKING

import click
from bench_ledger.errors import LedgerError, Refused, UsageError

__all__ = [
    "EXIT_FAILURE",
    "EXIT_USAGE",
    "Interrupted",
    "confidence_option",
    "db_option",
    "display_width",
    "each_batch",
    "elide",
    "exit_on",
    "interrupt_of",
    "json_option",
    "main",
    "open_ledger",
    "parse_fail_on",
    "prose",
    "table",
    "terminal_width",
    "wide_option",
    "with_ledger",
]

EXIT_FAILURE, EXIT_USAGE, _EXIT_REFUSED = 1, 2, 3
_EXIT_INTERNAL = 70  # EX_SOFTWARE of sysexits.h: the exception was none of the ledger's own
_EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a command stopped by Ctrl-C
_INTERRUPTED = "interrupted (Ctrl-C): nothing of the unfinished command was written"
_MAX_CELL = 80  # display columns of one table cell; longer ones lose their middle to '…' (--json, --wide: whole)


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, with what the command had kept by then (``ledger import`` commits file by file, group by group)."""


def interrupt_of(exc: BaseException) -> bool:
    """Ctrl-C: KeyboardInterrupt, DuckDB's InterruptException, or a ledger error it caused."""
    return (
        isinstance(exc, KeyboardInterrupt)
        or _interrupt(exc)
        or (exc.__cause__ is not None and _interrupt(exc.__cause__))
    )


class _LedgerGroup(click.Group):
    """Turns the ledger's exceptions into one message and the documented exit code."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            click.echo(str(exc) if isinstance(exc, Interrupted) else _INTERRUPTED, err=True)
            ctx.exit(_EXIT_INTERRUPTED)
        except Refused as exc:
            click.echo(f"refused ({exc.rule}): {exc.asked}\n  why: {exc.why}\n  instead: {exc.instead}", err=True)
            ctx.exit(_EXIT_REFUSED)
        except UsageError as exc:
            click.echo(f"error: {exc}", err=True)
            ctx.exit(EXIT_USAGE)
        except LedgerError as exc:
            if exc.__cause__ is not None and _interrupt(exc.__cause__):
                click.echo(_INTERRUPTED, err=True)
                ctx.exit(_EXIT_INTERRUPTED)
            click.echo(f"error: {exc}", err=True)
            ctx.exit(EXIT_FAILURE)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise  # click's own: exit codes and usage errors it prints itself
        except BrokenPipeError:
            raise  # the reader of stdout left (`ledger runs | head -1`): click's main stops quietly, exit 1
        except Exception as exc:
            if _interrupt(exc):
                click.echo(_INTERRUPTED, err=True)
                ctx.exit(_EXIT_INTERRUPTED)
            if os.environ.get("LEDGER_DEBUG") == "1":
                raise
            first = (str(exc).splitlines() or ["(no message)"])[0]
            click.echo(
                f"internal error: {type(exc).__name__}: {first}\n"
                "  this is a bug in bench-ledger, not a verdict on your input; run the command again with\n"
                "  LEDGER_DEBUG=1 to print the traceback, and report it",
                err=True,
            )
            ctx.exit(_EXIT_INTERNAL)


def _interrupt(exc: BaseException) -> bool:
    """DuckDB turns Ctrl-C during a query into its own InterruptException ("Query interrupted"),
    which SQLAlchemy may wrap; it means the same as KeyboardInterrupt."""
    for e in (exc, getattr(exc, "orig", None)):
        if e is not None and type(e).__name__ == "InterruptException":
            return True
    return False


db_option = click.option(
    "--db",
    "db",
    metavar="URL",
    envvar="LEDGER_DB",
    default=None,
    help="Ledger database URL [default: duckdb:///ledger.duckdb; env LEDGER_DB].",
)

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
        raise click.BadParameter(
            f"unknown {', '.join(unknown)}; choose from {', '.join(known)}", param_hint="--fail-on"
        )
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


_WIDE = "ledger.wide"  # ctx.meta key set by --wide
wide_option = click.option(
    "--wide",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=lambda ctx, _param, value: ctx.meta.__setitem__(_WIDE, True) if value else None,
    help="Show every column and every cell whole, whatever the terminal's width.",
)


def _confidence(ctx: click.Context, param: click.Parameter, value: float) -> float:
    if not 0 < value < 1:
        raise click.BadParameter(f"{value} is not between 0 and 1 (e.g. 0.95)")
    return value


confidence_option = click.option(
    "--confidence",
    type=float,
    default=0.95,
    show_default=True,
    callback=_confidence,
    help="Confidence level of the sampling intervals.",
)


def each_batch(batches: tuple[str, ...]) -> list[str | None]:
    """The batches named by a repeatable --batch, each once, in the order given; none: all (None)."""
    return list(dict.fromkeys(batches)) or [None]


_MIN_CUT = 24  # display columns a cut cell keeps at least (a label's head and its distinguishing tail)
_MIN_WRAP = 20  # display columns a wrapped sentence column keeps at least
_GAP = 2  # spaces between columns
_INDENT = "    "  # folded columns' line under a row
_NUMBER = re.compile(r"[-+]?[\d.,]+(?:[eE][-+]?\d+)?(?: [a-z%/]+)?")  # never cut: a cut number reads as another
_HEADER_PIECE = re.compile(r"[^_ ]*[_ ]|[^_ ]+")  # a header wraps after '_' and ' '


def terminal_width() -> int | None:
    """The columns tables fit into: $COLUMNS, else the terminal's when stdout is one; None when stdout is
    a pipe or a file (rows stay whole there, cells cut at _MAX_CELL)."""
    env = os.environ.get("COLUMNS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        if sys.stdout.isatty():
            return os.get_terminal_size(sys.stdout.fileno()).columns
    except (OSError, ValueError):
        pass
    return None


def display_width(text: str) -> int:
    """Terminal columns of ``text``: East Asian wide and fullwidth characters take two, combining marks none."""
    if text.isascii():
        return len(text)
    return sum(0 if unicodedata.combining(ch) else 2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _take(text: str, width: int, *, from_end: bool = False) -> str:
    """The longest head (or tail) of ``text`` within ``width`` display columns."""
    out, used = [], 0
    for ch in reversed(text) if from_end else text:
        used += display_width(ch)
        if used > width:
            break
        out.append(ch)
    return "".join(reversed(out) if from_end else out)


def elide(text: str, width: int) -> str:
    """``text`` within ``width`` display columns, its middle replaced by '…': the head and the tail, where
    labels differ (two sweep runs' labels share a long prefix), both stay visible."""
    if display_width(text) <= width:
        return text
    tail = _take(text, width // 2, from_end=True)
    return _take(text, width - 1 - display_width(tail)) + "…" + tail


def _pad(text: str, width: int) -> str:
    return text + " " * (width - display_width(text))


def _header_lines(header: str, width: int) -> list[str]:
    """The header within ``width`` columns, wrapped after '_' or ' ' (``input_target_tokens`` over three lines)."""
    lines = [""]
    for piece in _HEADER_PIECE.findall(header):
        if lines[-1] and display_width(lines[-1] + piece.rstrip()) > width:
            lines.append("")
        lines[-1] += piece
    return [line.rstrip() for line in lines]


def _fit(columns: list[str], cells: list[list[str]], wrap: list[bool], width: int, fold: tuple[str, ...]) -> list[int]:
    """Column widths fitting ``width`` (0: the column is folded under each row). Columns are folded,
    empty ones first, then those named in ``fold``, then from the right (the listings put the identifying
    ones first), until the rest fits at its minimum (the header's longest piece, the numbers, which are
    never cut, _MIN_CUT / _MIN_WRAP); then the widest columns are narrowed, headers before cells, until the
    table fits."""
    natural = [max(display_width(c), *(display_width(row[i]) for row in cells)) for i, c in enumerate(columns)]
    least = []
    for i, c in enumerate(columns):
        numbers = [display_width(row[i]) for row in cells if _NUMBER.fullmatch(row[i])]
        words = [display_width(row[i]) for row in cells if not _NUMBER.fullmatch(row[i])]
        head = max(display_width(p) for p in _HEADER_PIECE.findall(c))
        least.append(max(head, *numbers, min(_MIN_WRAP if wrap[i] else _MIN_CUT, max(words, default=0))))
    order = [i for i in range(1, len(columns)) if not any(row[i] for row in cells)]  # empty: nothing to fold
    order += [columns.index(c) for c in fold if c in columns and columns.index(c) not in order]
    order += [i for i in reversed(range(1, len(columns))) if i not in order]
    shown = list(range(len(columns)))
    while len(shown) > 1 and sum(least[i] for i in shown) + _GAP * (len(shown) - 1) > width:
        shown.remove(order.pop(0))
    widths = [natural[i] if i in shown else 0 for i in range(len(columns))]
    excess = sum(widths) + _GAP * (len(shown) - 1) - width
    content = [max(least[i], *(display_width(row[i]) for row in cells)) for i in range(len(columns))]
    for floor in (content, least):  # wrap headers first, then cut or wrap cells
        while excess > 0:
            k = max(shown, key=lambda i: widths[i] - floor[i])
            if widths[k] <= floor[k]:
                break
            widths[k] -= 1
            excess -= 1
    return widths


def table(
    rows: list[dict],
    columns: list[str],
    title: str | None = None,
    whole: tuple[str, ...] = ("reason", "why"),
    fold: tuple[str, ...] = (),
) -> None:
    """Render rows as a plain aligned table (display widths: CJK text aligns). In a terminal (or with
    $COLUMNS) the table fits its width: headers wrap after '_', long cells lose their middle ('…', so
    distinguishing suffixes stay visible), the ``whole`` columns (sentences) wrap, and columns that still
    do not fit (``fold`` first, then from the right) are printed under each row as ``name: value``, with
    a note; --wide shows everything on one line per row. Piped, rows stay whole but cells are cut at
    _MAX_CELL, except in the ``whole`` columns, so one long label cannot pad every row of a listing to its
    width (issue 13; docs/decisions/0034-tables-fit-the-terminal.md)."""
    ctx = click.get_current_context(silent=True)
    wide = bool(ctx is not None and ctx.meta.get(_WIDE))
    if title:
        click.echo(title)
    if not rows:
        click.echo("(none)")
        return
    text = [["" if r.get(c) is None else str(r.get(c)) for c in columns] for r in rows]
    wrap = [c in whole for c in columns]
    width = None if wide else terminal_width()
    cells = text if wide else [[v if wrap[i] else elide(v, _MAX_CELL) for i, v in enumerate(row)] for row in text]
    if width is None:
        widths = [max(display_width(c), *(display_width(row[i]) for row in cells)) for i, c in enumerate(columns)]
    else:
        widths = _fit(columns, cells, wrap, width, fold)
    shown = [i for i, w in enumerate(widths) if w]
    folded = [i for i, w in enumerate(widths) if not w]

    def emit(parts: list[list[str]]) -> None:
        for k in range(max(len(p) for p in parts)):
            line = "  ".join(_pad(p[k] if k < len(p) else "", widths[i]) for p, i in zip(parts, shown, strict=True))
            click.echo(line.rstrip())

    emit([_header_lines(columns[i], widths[i]) if width is not None else [columns[i]] for i in shown])
    cut = 0
    for row, whole_row in zip(cells, text, strict=True):
        parts = []
        for i in shown:
            if wrap[i] and width is not None:
                parts.append(textwrap.wrap(row[i], widths[i], break_on_hyphens=False) or [""])
            else:
                parts.append([elide(row[i], widths[i])])
                cut += parts[-1][0] != whole_row[i]
        emit(parts)
        folded_text = "; ".join(f"{columns[i]}: {row[i]}" for i in folded if row[i])
        if folded_text:
            for line in textwrap.wrap(
                folded_text,
                max(width or 0, len(_INDENT) + _MIN_WRAP),
                initial_indent=_INDENT,
                subsequent_indent=_INDENT,
            ):
                click.echo(line)
            cut += sum(row[i] != whole_row[i] for i in folded)
    if folded or cut:
        said = [f"{cut} cell(s) cut in the middle ('…')"] if cut else []
        under = [columns[i] for i in folded if any(row[i] for row in cells)]
        empty = [columns[i] for i in folded if not any(row[i] for row in cells)]
        said += [f"under each row: {', '.join(under)}"] if under else []
        said += [f"left out, empty: {', '.join(empty)}"] if empty else []
        fitted = f"fitted to {width} columns: " if width is not None else ""
        prose(f"({fitted}{'; '.join(said)}; --wide shows everything)")


def prose(text: str) -> None:
    """A sentence, wrapped to the terminal's width when there is one (as tables fit it), else one line."""
    width = terminal_width()
    click.echo("\n".join(textwrap.wrap(text, max(width, _MIN_WRAP), break_on_hyphens=False)) if width else text)


@click.group(cls=_LedgerGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="bench-ledger")
def main() -> None:
    """bench-ledger: where does this benchmark number come from?

    \b
    Example:
      ledger init && ledger status
    """
