"""ledger.gcpause: the collector is paused for the block and restored after it, errors included."""

from __future__ import annotations

import gc

import pytest
from bench_ledger.gcpause import gc_paused


def test_gc_paused_restores_the_collector() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():  # nested: the inner block leaves it off
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ValueError), gc_paused():
        raise ValueError("inside")
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # off before: stays off
    finally:
        gc.enable()
