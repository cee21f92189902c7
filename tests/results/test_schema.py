"""hisparse/results/schema.json against every committed run file (v1 files after the loader's upgrade),
the synthetic `layers` run, and hand-made breakages the validator must name."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from hisparse.results.model import upgrade
from hisparse.results.schema import schema, validate

ROOT = Path(__file__).resolve().parents[2]
RUNS = sorted((ROOT / "results" / "runs").glob("*.json")) + [ROOT / "tests" / "data" / "run_layers.json"]


@pytest.mark.parametrize("path", RUNS, ids=lambda p: p.name)
def test_every_committed_run_file_is_valid(path):
    assert validate(upgrade(json.loads(path.read_text()))) == []


def test_the_schema_is_2020_12_json_and_names_the_layers_parameter():
    s = schema()
    assert s["$schema"].endswith("2020-12/schema") and s["properties"]["schema_version"] == {"const": 2}
    wp = s["properties"]["cases"]["items"]["properties"]["params"]["properties"]["workload_params"]
    assert wp["properties"]["layers"]["minimum"] == 1


def test_breakages_are_named_with_their_path():
    data = upgrade(json.loads(RUNS[-1].read_text()))
    data["backend"] = "tpu"
    data["cases"][0]["status"] = "great"
    data["cases"][0]["runs"][0]["samples_us"] = []
    data["cases"][1]["params"]["workload_params"]["layers"] = 0
    del data["run_id"]
    assert validate(data) == [
        "$: missing 'run_id'",
        "$.backend: expected one of ['cuda', 'reference'], got 'tpu'",
        "$.cases[0].status: expected one of ['ok', 'failed', 'skipped'], got 'great'",
        "$.cases[0].runs[0].samples_us: fewer than 1 items",
        "$.cases[1].params.workload_params.layers: 0 < minimum 1",
    ]
