"""`ledger report`: the figures as data (``data``, ``plots``) and their rendering as one HTML page or
Markdown (``render``, template ``report.html.j2``)."""

__all__: list[str] = []
