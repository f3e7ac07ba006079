"""The canonical rows and Merkle tree of seal schemes 1 and 2 (ledger.encoding.rows)."""

from __future__ import annotations

import hashlib

import pytest
import rfc8785
from bench_ledger.encoding import rows as encoding


def leaf_hash(row: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + row).digest()


def merkle_root(leaves: list[bytes]) -> bytes:
    """The recursive definition of RFC 9162, to test :class:`MerkleStream` against."""
    n = len(leaves)
    if n == 0:
        return hashlib.sha256(b"").digest()
    if n == 1:
        return leaves[0]
    k = 1
    while k * 2 < n:
        k *= 2
    return encoding.node_hash(merkle_root(leaves[:k]), merkle_root(leaves[k:]))


def test_merkle_stream_is_rfc9162_mth() -> None:
    for n in range(0, 40):
        leaves = [leaf_hash(str(i).encode()) for i in range(n)]
        stream = encoding.MerkleStream()
        for leaf in leaves:
            stream.add(leaf)
        assert stream.root() == merkle_root(leaves), n
    # RFC 9162 shape for 3 leaves: node(node(l0, l1), l2)
    l0, l1, l2 = (leaf_hash(b) for b in (b"a", b"b", b"c"))
    assert merkle_root([l0, l1, l2]) == encoding.node_hash(encoding.node_hash(l0, l1), l2)
    assert leaf_hash(b"a") == hashlib.sha256(b"\x00a").digest()


@pytest.mark.parametrize("text", ["plain", "é中文🙂", 'tab\tnl\nquote"back\\', "\x00\x01\x1f\x7f", "\u2028\u2029"])
def test_fast_canonical_form_is_rfc8785(text: str) -> None:
    row = {"b": text, "a": 1, "z": None, "t": True, "f": repr(0.1), "big": str(2**60), "neg": -(2**53 - 1)}
    assert encoding.canonical("request", row) == rfc8785.dumps(["request", row])
