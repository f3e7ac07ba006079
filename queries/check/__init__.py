"""`ledger check`: every value a tool reported, re-derived from the run's records by the tool's own
statistic definitions and tested by the identities of its summary. ``core`` holds the shared vocabulary
(records, reported values, tolerances), ``checker`` the check itself, ``registry`` the tools, and one
module per tool (``vllm``, ``sglang``, ``llmperf``, ``aiperf``, ...).
"""

__all__: list[str] = []
