"""Read side: listings, metric definitions, checks, comparisons and the audit (imports only bench_ledger core)."""

__all__: list[str] = []
