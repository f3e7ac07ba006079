"""How stored rows are encoded for hashing, below the seal and the declared rows' digests that use it.

* :mod:`~ledger.encoding.rows`: canonical row bytes (RFC 8785) and the RFC 9162 Merkle tree (seal schemes
  1 and 2, and :mod:`ledger.declared`);
* :mod:`~ledger.encoding.chunks`: the column-wise chunk encoding and digests of seal scheme 3, and reading
  rows as Arrow columns (also used by the gap statistics and ``check``).
"""

__all__: list[str] = []  # its modules are imported by name: rows alone loads no Arrow
