"""Sampling statistics: how far a statistic of a sample may be from the process's (docs/statistics.md).

Small modules: ``dependence`` (effective sample size of a serially dependent series), ``sampling``
(a run's percentile and mean intervals), ``change`` (the sampling verdict of a comparison of two
statistics), ``replicates`` (runs as replicates: a test over runs, false-discovery control),
``changepoints`` (change points of a series of sealed batches), ``planning`` (requests needed to
resolve a change), ``read`` (a run's per-request values in request order, from the ledger).
Not the rounding intervals of printed numbers (``queries.intervals``, R11).
"""

__all__: list[str] = []
