"""The seal of a batch (R10): close a batch, verify seals, and the artefact digests imports store.

A closed batch must stay exactly as it was closed, and anyone must be able to check that, including
where the database cannot refuse a change (docs/seals.md). The modules, by what they hold:

* :mod:`~ledger.seal.close`: ``ledger close`` (lock, compare with the import digests, seal, chain);
* :mod:`~ledger.seal.verification`: ``ledger verify`` (recompute every seal, name the rows that differ);
* :mod:`~ledger.seal.sealfile`: the seal file written beside the database;
* :mod:`~ledger.seal.import_digests`: each artefact's digest, stored at import, compared at close and verify;
* :mod:`~ledger.seal.scheme3`: the parts and roots of scheme 3 (new seals);
  :mod:`~ledger.seal.streams`: its large tables hashed a slice at a time;
  :mod:`~ledger.seal.part_rows`: its ``seal_part`` rows (keys and fingerprints that name changed rows);
* :mod:`~ledger.encoding.chunks`: the column-wise chunk encoding and digests, and reading rows as Arrow;
* :mod:`~ledger.seal.scheme2`: schemes 1 and 2 (verified, no longer made) and the seal digest every
  scheme shares; :mod:`~ledger.encoding.rows`: their canonical row bytes and Merkle tree.
"""

from bench_ledger.seal.close import SealResult, close_batch
from bench_ledger.seal.import_digests import PooledRows, artefact_digest_rows
from bench_ledger.seal.scheme3 import spans_of
from bench_ledger.seal.sealfile import read_seal_file
from bench_ledger.seal.verification import BatchCheck, TableDiff, VerifyResult, verify

__all__ = [
    "BatchCheck",
    "PooledRows",
    "SealResult",
    "TableDiff",
    "VerifyResult",
    "artefact_digest_rows",
    "close_batch",
    "read_seal_file",
    "spans_of",
    "verify",
]
