"""Recompute a batch's seal from a `ledger export` folder alone: pyarrow and the standard library,
no bench-ledger code. The construction is docs/seals.md's (README.json names the scheme).

Usage: python docs/recompute_seal.py EXPORT_DIR   (prints the root, the count and the digest;
exit 1 when they differ from README.json's seal)
"""

import hashlib
import json
import struct
import sys
from datetime import date, datetime, timedelta
from pathlib import Path

import pyarrow.parquet as pq


def value(v):
    """Step 2: the JSON value of one stored value."""
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, int):
        return v if -(2**53) < v < 2**53 else str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, datetime):
        return v.isoformat(timespec="microseconds")
    if isinstance(v, date):
        return v.isoformat()
    raise TypeError(f"unexpected value {v!r}")


def jcs(x) -> bytes:
    """RFC 8785 for these values (strings, safe integers, booleans, null; ASCII keys)."""
    return json.dumps(x, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def mth(leaves: list[bytes]) -> bytes:
    """Step 3: RFC 9162 Merkle Tree Hash of the leaf hashes."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return leaves[0]
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return hashlib.sha256(b"\x01" + mth(leaves[:k]) + mth(leaves[k:])).digest()


DECLARED = ("batch", "deployment", "run", "published_value")
ARTEFACT_PARTS = (
    "artefact",
    "capture",
    "capture_field",
    "request",
    "chunk_gap",
    "hardware_sample",
    "log_fact",
    "request_value",
)
OPTIONAL = ("request_value",)  # a part only when the artefact has rows in it (exports before it: no table)
EPOCH = datetime(1970, 1, 1)
TAGS = {"int64": "i", "bool": "b", "timestamp[us]": "t", "date32[day]": "d", "double": "f", "string": "s"}


def chunk_digest(table: str, cols: list[tuple[str, str, list]], n: int) -> bytes:
    """Scheme 3, step 2: one chunk of n rows hashed column by column."""
    out = [b"bench-ledger-chunk/3\0", table.encode(), b"\0", struct.pack("<I", n)]
    for name, tag, values in cols:
        out += [name.encode(), b"\0", tag.encode(), bytes(0 if v is None else 1 for v in values)]
        if tag == "s":
            data = [b"" if v is None else v.encode() for v in values]
            out += [struct.pack(f"<{n}I", *map(len, data)), *data]
        elif tag == "f":
            out.append(struct.pack(f"<{n}d", *(0.0 if v is None else v for v in values)))
        else:
            conv = {
                "i": int,
                "b": int,
                "t": lambda v: (v - EPOCH) // timedelta(microseconds=1),
                "d": lambda v: (v - date(1970, 1, 1)).days,
            }[tag]
            out.append(struct.pack(f"<{n}q", *(0 if v is None else conv(v) for v in values)))
    return hashlib.sha256(b"".join(out)).digest()


def part_root(table: str, rows: list[dict], columns: list[tuple[str, str]]) -> str:
    digests = b""
    for lo in range(0, len(rows), 4096):
        chunk = rows[lo : lo + 4096]
        digests += chunk_digest(table, [(c, t, [r[c] for r in chunk]) for c, t in columns], len(chunk))
    return hashlib.sha256(digests).hexdigest()


def scheme3(folder: Path, readme: dict) -> tuple[str, int]:
    """Scheme 3 (docs/seals.md): parts, chunk digests, artefact digests, the batch root."""
    tables, columns = {}, {}
    for name in (*DECLARED, *ARTEFACT_PARTS):
        if name in OPTIONAL and name not in readme["tables"]:
            tables[name], columns[name] = [], []
            continue
        entry = readme["tables"][name]
        tables[name] = pq.read_table(folder / entry["parquet"]).to_pylist()
        cols = [(c["name"], TAGS[c["type"]]) for c in entry["columns"]]
        columns[name] = [c for c in cols if c[0] in entry["seal_columns"]]

    def key(table):
        order = readme["tables"][table]["seal_order"]
        return lambda r: tuple(r[k] for k in order)

    items, count = [], 0
    for name in DECLARED:
        rows = sorted(tables[name], key=key(name))
        items.append([name, len(rows), part_root(name, rows, columns[name])])
        count += len(rows)
    capture_of = {c["id"]: c["artefact_id"] for c in tables["capture"]}
    for art in sorted(a["id"] for a in tables["artefact"]):
        parts = []
        for name in ARTEFACT_PARTS:
            if name == "artefact":
                rows = [r for r in tables[name] if r["id"] == art]
            elif name == "capture_field":
                rows = [r for r in tables[name] if capture_of[r["capture_id"]] == art]
            else:
                rows = [r for r in tables[name] if r["artefact_id"] == art]
            if name in OPTIONAL and not rows:
                continue
            rows.sort(key=key(name))
            parts.append([name, len(rows), part_root(name, rows, columns[name])])
            count += len(rows)
        items.append(["artefact", art, hashlib.sha256(jcs(parts)).hexdigest()])
    return hashlib.sha256(jcs(items)).hexdigest(), count


def scheme1or2(folder: Path, readme: dict) -> tuple[str, int]:
    """Schemes 1 and 2: one RFC 8785 text per row, one RFC 9162 Merkle tree."""
    leaves: list[bytes] = []
    for table in readme["seal_tables"]:  # step 1: the fixed table order
        entry = readme["tables"][table]
        rows = pq.read_table(folder / entry["parquet"]).to_pylist()
        rows.sort(key=lambda r: tuple(r[k] for k in entry["seal_order"]))  # primary key; str order = byte order
        for r in rows:
            canonical = jcs([table, {c: value(r[c]) for c in entry["seal_columns"]}])
            leaves.append(hashlib.sha256(b"\x00" + canonical).digest())
    return mth(leaves).hex(), len(leaves)


def main(folder: Path) -> int:
    readme = json.loads((folder / "README.json").read_text(encoding="utf-8"))
    scheme = readme["seal_scheme"]
    root, count = scheme3(folder, readme) if scheme == "bench-ledger-seal/3" else scheme1or2(folder, readme)
    print(f"merkle_root {root}\nrow_count   {count}")
    seal = readme["seal"]
    if seal is None:
        print("open batch: no seal; README.json content root " + readme["content"]["merkle_root"])
        return 0 if root == readme["content"]["merkle_root"] else 1
    digest = hashlib.sha256(
        jcs([scheme, seal["previous_digest"], readme["batch"], root, count, seal["closed_at"]])
    ).hexdigest()  # the seal digest
    print(f"digest      {digest}")
    return 0 if (digest, root, count) == (seal["digest"], seal["merkle_root"], seal["row_count"]) else 1


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
