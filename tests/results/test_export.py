"""`hisparse-bench export`: a run as CSV with one column per axis, read back with the csv module."""
from __future__ import annotations

import csv
from pathlib import Path

import pytest
from click.testing import CliRunner

from hisparse.cli import main

LAYERS = Path(__file__).resolve().parents[1] / "data" / "run_layers.json"


def test_csv_has_a_column_per_axis_and_the_regime():
    r = CliRunner().invoke(main, ["export", str(LAYERS)])
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(r.output.splitlines()))
    assert len(rows) == 5
    decode = rows[1]
    assert (decode["implementation"], decode["workload"], decode["batch"], decode["pdl"]) == \
        ("multi_step", "serving", "1", "")  # pdl is not in this synthetic file's params: empty cell
    assert decode["regime"] == "decode L=8" and decode["layers"] == "8" and rows[0]["layers"] == "1"
    assert decode["wp.context_max"] == "131072"
    assert float(decode["median_us"]) == pytest.approx(31.0) and float(decode["gather_warm_us"]) == 12.0
    assert rows[4]["status"] == "failed" and rows[4]["median_us"] == ""
