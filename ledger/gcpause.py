"""Pause Python's cyclic garbage collector around a block that allocates many short-lived objects.

Why: the collector runs a pass every 700 net allocations of container objects, and every so often a
full pass over *all* live objects. A block that builds hundreds of thousands of small lists, dicts
or Fractions and keeps many of them (the dmon line splitter; every run's metric values) spends a
large share of its time in passes that find nothing to free: those objects form no reference cycles.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused"]


@contextmanager
def gc_paused() -> Iterator[None]:
    """The collector off for the block, back on after it if it was on (nested blocks leave it off).
    Never held across a yield of a generator: the pause ends with the block."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if gc.get_freeze_count() == 0:
                # the objects tracked meanwhile straight into the oldest generation (two list splices):
                # re-enabled with them young, the next allocation made the collector walk them all at once
                # (after every run's metrics), and again as they aged. A freeze the
                # program made itself (gc.freeze before forking) is left alone: unfreeze would undo it.
                gc.freeze()
                gc.unfreeze()
            gc.enable()
