"""scripts/ncu_table.py on the committed ncu CSVs of 2026-12-01 (values read off the CSV by hand)."""
import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PROBES = REPO / "results" / "probes" / "ncu-h200-20261201"


def _module():
    spec = importlib.util.spec_from_file_location("ncu_table", REPO / "scripts" / "ncu_table.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_kernels_of_the_batch_64_profile():
    gather, commit = _module().kernels((PROBES / "serving-b64.csv").read_text())
    assert "spec_gather_kernel" in gather["name"] and "spec_commit_kernel" in commit["name"]
    assert (gather["grid"], gather["block"]) == ("(256, 1, 1)", "(256, 1, 1)")
    assert gather["duration_ns"] == 1_080_352 and commit["duration_ns"] == 30_272
    assert (gather["theoretical"], gather["achieved"]) == (25.0, 23.81)
    assert gather["eligible"] == 1.41 and gather["cpi"] == 272.92 and gather["l1tex"] == 221.5
    assert commit["l1tex"] == 39.3


def test_table_rows_and_a_file_without_a_table(tmp_path, capsys):
    mod = _module()
    assert mod.main([str(PROBES / "serving-b1.csv")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[2] == "| spec_gather_kernel, serving-b1 | 32 x 256 | 22.8 us | 25.0% / 11.4% | 5.4% | 36 | 29 |"
    assert out[3].startswith("| spec_commit_kernel, serving-b1 | 1 x 1024 | 14.8 us |")
    bad = tmp_path / "x.csv"
    bad.write_text("==PROF== nothing profiled\n")
    assert mod.main([str(bad)]) == 2
    with pytest.raises(ValueError, match="no ncu CSV table"):
        mod.kernels("")
