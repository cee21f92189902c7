"""Fixtures of the command tests."""
from __future__ import annotations

import pytest

from _tiny_config import tiny_config

TWO = tiny_config("two")


@pytest.fixture
def two(tmp_path):
    """The tiny sweep config written to ``two.yaml``: two implementations at batch 1 (tests/_tiny_config.py)."""
    cfg = tmp_path / "two.yaml"
    cfg.write_text(TWO)
    return cfg
