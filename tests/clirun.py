"""The one way tests run the `ledger` command: in-process (:func:`run`: exit code checked, output on
failure), or in a process of its own when a test needs several at once (:func:`spawn`)."""

from __future__ import annotations

import multiprocessing
import os
import tempfile
from pathlib import Path

from bench_ledger.cli import main
from click.testing import CliRunner, Result


def run(*args: object, code: int = 0) -> Result:
    """`ledger ARGS...` (each argument as text); fails the test unless it exits with ``code``."""
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == code, result.output
    return result


# What a `ledger` command loads when it runs (the CLI defers it past --help), imported once by the
# fork server so a spawned command starts without paying for the imports again.
_PRELOAD = [
    "bench_ledger.cli",
    "bench_ledger.store",
    "bench_ledger.ingest",
    "bench_ledger.seal",
    "bench_ledger.importers",
    "tests.clirun",
]


def _ledger_process(args: list[str], out: str) -> None:
    """Runs in the spawned process: `ledger ARGS`, stdout and stderr into ``out``; its exit status is
    the command's (click's SystemExit; an uncaught exception prints its traceback and exits 1)."""
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    main(args)


class Spawned:
    """A `ledger` command running in its own process (:func:`spawn`)."""

    def __init__(self, args: list[str]) -> None:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(_PRELOAD)
        fd, self._out = tempfile.mkstemp(prefix="ledger-spawn-", suffix=".out")
        os.close(fd)
        self.process = ctx.Process(target=_ledger_process, args=(args, self._out), daemon=True)
        self.process.start()

    def communicate(self, timeout: float) -> tuple[int, str]:
        """Wait for the command (killed after ``timeout`` seconds); (exit code, stdout and stderr)."""
        self.process.join(timeout)
        if self.process.exitcode is None:
            self.process.kill()
            self.process.join()
            raise TimeoutError(f"ledger command still running after {timeout} s: killed")
        path = Path(self._out)
        text = path.read_text(errors="replace")
        path.unlink()
        return self.process.exitcode, text


def spawn(*args: object) -> Spawned:
    """`ledger ARGS...` in a process of its own (its own connections, locks and DuckDB instance), as a
    second user's command would be. The process is forked from a server that imported the CLI once
    per test process: no interpreter start-up and imports per command (~1 s of CPU each)."""
    return Spawned([str(a) for a in args])
