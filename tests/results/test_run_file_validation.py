"""The one reader refuses a run file no verdict can come from (issue 40): samples that are not finite
positive numbers, booleans or strings as samples, a case id twice, no environment, no or an unknown
schema; each refusal names the file and the case. Every bad file sits next to its planted control:
the same file, unmodified, that must load."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from hisparse.errors import ResultFormatError
from hisparse.results.model import RunWriter, load_run

GOLDEN_V2 = Path(__file__).resolve().parents[1] / "data" / "results_v2.json"
GOLDEN_V1 = Path(__file__).resolve().parents[1] / "data" / "results_v1.json"
SECOND = "multi_step/distinct/b64/s4/k2048/h4096/i576/pdl1"  # the golden v2 file's second case


def _golden() -> dict:
    return json.loads(GOLDEN_V2.read_text())


def _write(tmp_path: Path, name: str, data) -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def _sample(value):
    def edit(d):
        d["cases"][1]["runs"][0]["samples_us"][2] = value
    return edit


def _replay(value):
    def edit(d):
        d["cases"][1]["runs"][0]["replay_us"] = [value] * len(d["cases"][1]["runs"][0]["samples_us"])
    return edit


BAD_SAMPLES = {
    "negative": (_sample(-12.25), "-12.25"),
    "zero": (_sample(0), "0"),
    "boolean": (_sample(True), "True"),
    "string": (_sample("3.0"), "'3.0'"),
    "null": (_sample(None), "None"),
    "NaN": (_sample(float("nan")), "nan"),
    "infinity": (_sample(float("inf")), "inf"),
    "negative replay": (_replay(-1.0), "replay_us"),
}


@pytest.mark.parametrize("kind", BAD_SAMPLES)
def test_a_sample_that_is_no_time_is_refused_naming_file_case_and_value(tmp_path, kind):
    control = _write(tmp_path, "control.json", _golden())
    assert load_run(control).case(SECOND).median_us > 0  # planted control: the untouched file loads

    edit, shown = BAD_SAMPLES[kind]
    data = _golden()
    edit(data)
    bad = _write(tmp_path, "bad.json", json.dumps(data))  # json.dumps writes NaN/Infinity as Python reads them
    with pytest.raises(ResultFormatError) as e:
        load_run(bad)
    message = str(e.value)
    assert str(bad) in message and f"case {SECOND}" in message and shown in message
    assert "finite numbers > 0" in message


def test_a_v1_file_with_a_negative_sample_is_refused_too(tmp_path):
    data = json.loads(GOLDEN_V1.read_text())
    assert load_run(_write(tmp_path, "control.json", data)).cases  # control
    data["cases"][0]["samples_us"][0] = -1.0
    with pytest.raises(ResultFormatError, match=r"-1\.0 is not allowed"):
        load_run(_write(tmp_path, "bad.json", data))


def test_a_duplicate_case_id_is_refused_naming_both_entries(tmp_path):
    assert len(load_run(_write(tmp_path, "control.json", _golden())).cases) == 3  # control
    data = _golden()
    data["cases"].append(dict(data["cases"][1]))
    bad = _write(tmp_path, "dup.json", data)
    with pytest.raises(ResultFormatError) as e:
        load_run(bad)
    assert str(bad) in str(e.value) and SECOND in str(e.value) and "cases[1] and cases[3]" in str(e.value)


@pytest.mark.parametrize("environment", [None, [], "h200"])
def test_a_missing_environment_is_refused(tmp_path, environment):
    assert load_run(_write(tmp_path, "control.json", _golden())).environment["machine"] == "h200-sxm"  # control
    data = _golden()
    data["environment"] = environment
    with pytest.raises(ResultFormatError, match="environment must be an object"):
        load_run(_write(tmp_path, "bad.json", data))
    del data["environment"]
    with pytest.raises(ResultFormatError, match="missing field 'environment'"):
        load_run(_write(tmp_path, "bad.json", data))


@pytest.mark.parametrize("content", ['{"base": "a.json", "decisions": []}', "[1, 2]", '"text"'])
def test_json_without_a_schema_is_not_a_run_file(tmp_path, content):
    bad = _write(tmp_path, "gate.json", content)
    with pytest.raises(ResultFormatError) as e:
        load_run(bad)
    assert str(e.value).startswith(f"{bad}: not a run file")


def test_binary_and_directory_are_refused_naming_the_path(tmp_path):
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\x00\xff\xfe\x89PNG")
    with pytest.raises(ResultFormatError, match="not a readable JSON run file"):
        load_run(binary)
    folder = tmp_path / "dir.json"
    folder.mkdir()
    with pytest.raises(ResultFormatError, match=str(folder)):
        load_run(folder)


def test_resume_refuses_a_file_with_a_nan_case_and_leaves_it_as_it_was(tmp_path):
    """Resuming such a file once timed the next case, crashed and wrote the NaNs back as nulls."""
    data = _golden()
    data["finished"] = None
    data["cases"][1]["runs"][0]["samples_us"][0] = float("nan")
    path = _write(tmp_path, "cut.json", json.dumps(data))
    before = path.read_bytes()
    with pytest.raises(ResultFormatError, match="nan"):
        RunWriter.resume(path, config_hash=data["config"]["hash"], backend=data["backend"])
    assert path.read_bytes() == before


def test_resume_writes_back_the_cases_it_did_not_time_as_they_were_read(tmp_path):
    """An entry the reader does not know all of (a newer writer's key) survives a resumed run's rewrite."""
    from dataclasses import replace

    data = _golden()
    for case in data["cases"]:
        case["a_newer_key"] = {"kept": True}
    data["cases"][0]["runs"][0]["samples_us"][0] = 5  # an int stays an int
    path = _write(tmp_path, "cut.json", data)
    writer = RunWriter.resume(path, config_hash=data["config"]["hash"], backend=data["backend"])
    writer.add(replace(writer.record.cases[2], wall_s=9.0))  # the one case this process "timed"
    after = json.loads(path.read_text())
    assert after["cases"][0] == data["cases"][0] and after["cases"][1] == data["cases"][1]
    # control: the case it did time is written by the writer, in full and only with what it knows
    assert after["cases"][2]["wall_s"] == 9.0 and "a_newer_key" not in after["cases"][2]
