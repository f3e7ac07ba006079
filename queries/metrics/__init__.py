"""Metrics: every metric defined once (``definitions``; ``requests``, ``hardware``, ``power``, ``server_log``
hold the metrics of each family), executed by one executor (``execute``) on one scope or, grouped, on every
run of a selection at once (``grouped``, ``arrays``), resolved and listed by the registry (``registry``:
``evaluate`` and the rows of `ledger metrics`), with the tool's reported equivalents where the records
cannot give a value (``reported``) and exact per-request columns (``exact_column``).
"""

__all__: list[str] = []
