"""scripts/h200_tables.py on committed run files of part of the default config (values read off the
run files' tables in results/probes/landed-h200-20261203/*.log by hand)."""
import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RUNS = REPO / "results" / "runs"
SERVING = RUNS / "20261203-092442_1c4ad1f6e9f5_default.json"  # default, --filter workload=serving
HEADLINE = RUNS / "20261203-093108_1c4ad1f6e9f5_default.json"  # upstream/distinct, b1/8/32/64, two kernels


def _module():
    spec = importlib.util.spec_from_file_location("h200_tables", REPO / "scripts" / "h200_tables.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_serving_only_run_gives_its_grid_and_no_other_table(capsys):
    _module().main(["default", str(SERVING), str(SERVING)])
    out = capsys.readouterr().out
    assert "#### `serving`" in out
    assert "#### `upstream`" not in out and "#### `distinct`" not in out and "steps x hot_buffer_size" not in out
    rows = [line for line in out.splitlines() if line.startswith("| 1 |") or line.startswith("| 64 |")]
    # b1: LRU 111.5, multi-step 20.19 (PDL on) / 30.25 (off); b64: 679.3, 625.4 / 628.3; re-run of itself 0
    assert rows[0].startswith("| 1 | 111.5 | 20.2 | 30.2 | 5.52x | 2.43 | 1.59 |")
    assert rows[1].startswith("| 64 | 679.3 | 625.4 | 628.3 | 1.09x | 1.18 | 1.03 |")
    assert rows[1].endswith("+0.0%, +0.0%, +0.0% |")


def test_a_headline_slice_skips_the_batches_it_lacks_and_a_missing_rerun_reads_dash(capsys):
    _module().main(["default", str(HEADLINE), str(SERVING)])
    out = capsys.readouterr().out
    distinct = out.split("#### `distinct`")[1]
    batches = [line.split("|")[1].strip() for line in distinct.splitlines() if line.startswith("| ") and "batch" not in line]
    assert batches[:4] == ["1", "8", "32", "64"]
    assert "| 64 | 636.4 | 594.5 | 605.9 | 1.07x | 1.12 | 1.05 |" in distinct
    assert distinct.split("| 64 | 636.4")[1].split("\n")[0].endswith("-, -, - |")  # B has no distinct cases
    assert "| 4 | 576 | 4096 | 636.4 | 594.5 | 1.07x | 1.05 | -, - |" in out


def test_usage_on_wrong_arguments():
    with pytest.raises(SystemExit, match="h200_tables.py default"):
        _module().main(["default", str(SERVING)])
