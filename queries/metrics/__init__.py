"""Metrics: every metric defined once (``definitions``, ``requests``, ``hardware``), evaluated on a scope
(``registry``), for every run of a selection at once (``grouped``), as the rows of `ledger metrics`
(``table``), with the tool's reported equivalents where the records cannot give one (``reported``).
"""

__all__: list[str] = []
