"""A seeded fuzz corpus derived from the real formats (issue 13).

Seeds are the small valid files of :mod:`tests.edges.inputs` and the fixtures of tests/fixtures (cut
from the tools' real output); each input is one seed with one to three mutations of the kinds that
broke the importers before: a cut anywhere, a lost last line end, a byte changed (NUL, 0xff, a
digit), a number replaced by a negative, NaN, 1e400, a 70-bit or a 5,000-digit integer or another
type, a key doubled, a string with a NUL, a lone surrogate or 100k characters, deep nesting, a line
doubled, dropped or swapped. ``corpus(seed, n)`` is deterministic: the same seed gives the same bytes.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from pathlib import Path

from tests.edges import inputs as I

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
_NUMBER = re.compile(rb"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])")
_KEY = re.compile(rb'"([A-Za-z_][\w.:]*)"\s*:\s*')
_STRING = re.compile(rb'"(?:[^"\\\n]|\\.)*"')
NUMBERS = [b"-1", b"-0.5", b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-1e400", str(2**70).encode(),
           b"9" * 5000, b'"x"', b"null", b"true", b"[]", b"{}", b"0", b"2147483648", b"-", b"1.5e-320"]  # fmt: skip
STRINGS = [b"\\u0000", b"\\ud800", b"\\udc00x", b"x" * 100_000, b"\\\\", b'\\"', "\u00e9\u4e2d".encode()]


def seeds() -> list[tuple[str, bytes]]:
    """(file name, bytes) of every seed: the built inputs and the repository's fixture files."""
    built = [I.vllm_file(), I.vllm_lines(I.vllm(), I.vllm(label="r2")), I.dmon_file(), I.dmon_file(I.DMON_T),
             I.log_file(), I.ledger_csv(), I.llmperf_individual(), I.llmperf_summary(),
             ("gpu.csv", I.NVIDIA_SMI_CSV.encode()), ("dcgmi.txt", I.DCGMI_DMON.encode())]  # fmt: skip
    files = sorted(
        p for p in FIXTURES.rglob("*") if p.is_file() and p.stat().st_size < 200_000 and "manifest" not in p.parts
    )
    return built + [(p.name, p.read_bytes()) for p in files]


def _cut(rng: random.Random, data: bytes) -> bytes:
    return data[: rng.randrange(1, max(2, len(data)))]


def _no_last_newline(rng: random.Random, data: bytes) -> bytes:
    return data.rstrip(b"\n")


def _byte(rng: random.Random, data: bytes) -> bytes:
    i = rng.randrange(len(data))
    return data[:i] + rng.choice([b"\x00", b"\xff", b"\xc3", b"9", b"-", b"\n", b'"', b"{"]) + data[i + 1 :]


def _number(rng: random.Random, data: bytes) -> bytes:
    found = list(_NUMBER.finditer(data))
    if not found:
        return _byte(rng, data)
    m = rng.choice(found)
    return data[: m.start()] + rng.choice(NUMBERS) + data[m.end() :]


def _double_key(rng: random.Random, data: bytes) -> bytes:
    found = list(_KEY.finditer(data))
    if not found:
        return _byte(rng, data)
    m = rng.choice(found)
    return data[: m.start()] + m.group() + b"0, " + data[m.start() :]


def _string(rng: random.Random, data: bytes) -> bytes:
    found = list(_STRING.finditer(data))
    if not found:
        i = rng.randrange(len(data))
        return data[:i] + rng.choice([b"\x00", b"\xed\xa0\x80", b"x" * 100_000]) + data[i:]
    m = rng.choice(found)
    return data[: m.end() - 1] + rng.choice(STRINGS) + data[m.end() - 1 :]


def _nest(rng: random.Random, data: bytes) -> bytes:
    found = list(_NUMBER.finditer(data))
    if not found:
        return _byte(rng, data)
    m = rng.choice(found)
    depth = rng.choice([50, 2000, 100_000])
    return data[: m.start()] + b"[" * depth + m.group() + b"]" * depth + data[m.end() :]


def _lines(rng: random.Random, data: bytes) -> bytes:
    lines = data.split(b"\n")
    if len(lines) < 3:
        return _byte(rng, data)
    i, j = rng.randrange(len(lines) - 1), rng.randrange(len(lines) - 1)
    what = rng.choice(["double", "drop", "swap", "garbage"])
    if what == "double":
        lines.insert(i, lines[i])
    elif what == "drop":
        del lines[i]
    elif what == "swap":
        lines[i], lines[j] = lines[j], lines[i]
    else:
        lines.insert(i, bytes(rng.randrange(32, 127) for _ in range(rng.randrange(1, 40))))
    return b"\n".join(lines)


MUTATIONS: list[Callable[[random.Random, bytes], bytes]] = [
    _cut, _no_last_newline, _byte, _number, _number, _number, _double_key, _string, _nest, _lines,
]  # fmt: skip


def corpus(seed: int = 13, n: int = 240) -> list[tuple[str, str, bytes]]:
    """``n`` inputs: (id, file name, bytes); the id says which seed and mutations made it."""
    rng = random.Random(seed)
    base = seeds()
    out = []
    for k in range(n):
        name, data = base[k % len(base)]
        steps = []
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            mutate = rng.choice(MUTATIONS)
            data = mutate(rng, data) or data[:1]
            steps.append(mutate.__name__.lstrip("_"))
        out.append((f"{k:03d} {name} {'+'.join(steps)}", name, data))
    return out
