from __future__ import annotations

from pathlib import Path

import pytest

SAMPLES = Path(__file__).resolve().parents[3] / "shared" / "samples"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture
def samples() -> Path:
    if not SAMPLES.is_dir():
        pytest.skip(f"real samples folder {SAMPLES} is absent")
    return SAMPLES


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES
