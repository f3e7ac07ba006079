"""`ledger report`: the figures as typed data (``model``), computed once (``build``, ``plots``) and rendered
as one HTML page or Markdown (``render``, template ``report.html.j2``)."""

__all__: list[str] = []
