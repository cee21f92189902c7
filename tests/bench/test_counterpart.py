"""The engine's link of our case to sglang's doing the same work (``counterpart_link``): the table's
pairing, the ratio ours/sglang, what the run file stores and what an older file (no link) reads as."""
import json

import pytest

from hisparse.bench import implementations, measure
from hisparse.bench.case import Case
from hisparse.bench.floors import NOT_APPLICABLE
from hisparse.errors import ResultFormatError
from hisparse.results.model import CaseResult, CounterpartLink, Run, RunRecord, RunWriter, load_run, run_from_dict


def _params(impl, **kw):
    return measure.case_params(Case(impl, "upstream", batch=1, **kw))


def _case(case_id, params, median, status="ok"):
    if status != "ok":
        return CaseResult.failed(case_id, params, "sglang fault")
    return CaseResult(case_id, params, "ok", settings={"rounds": 1},
                      runs=(Run(process=0, round=0, samples_us=(median,) * 5),))


def _record(cases):
    return RunRecord(run_id="r", created="2026-12-01T10:00:00Z", backend="cuda", config={"name": "t", "hash": "h"},
                     environment={"machine": "m"}, floors={}, cases=tuple(cases))


def test_every_sglang_row_names_our_implementation_doing_its_work():
    pairs = {i.name: i.counterpart for i in implementations.TABLE if i.counterpart is not None}
    assert pairs == {"sglang_lru_sequential": "lru_sequential", "sglang_multi_step": "multi_step",
                     "sglang_multi_step_planned": "multi_step_planned"}
    assert all(i.source == "sglang" for i in implementations.TABLE if i.counterpart is not None)


def test_counterpart_id_keeps_every_parameter_but_the_implementation():
    assert measure.counterpart_id_of(_params("multi_step")) == "sglang_multi_step/upstream/b1/s4/k2048/h4096/i576/pdl1"
    assert measure.counterpart_id_of(_params("lru_sequential", item_size_bytes=656)) == \
        "sglang_lru_sequential/upstream/b1/s4/k2048/h4096/i656/pdl0"
    assert measure.counterpart_id_of(_params("multi_step_planned", shared_layers=5)) == \
        "sglang_multi_step_planned/upstream/b1/s4/k2048/h4096/i576/pdl1/shared_layers=5"
    assert measure.counterpart_id_of(_params("multi_step", pdl=False)) == \
        "sglang_multi_step/upstream/b1/s4/k2048/h4096/i576/pdl0"


def test_sglang_cases_and_unpaired_implementations_have_no_counterpart():
    assert measure.counterpart_id_of(_params("sglang_multi_step")) is None
    assert measure.counterpart_id_of(_params("lru_sequential_planned")) is None
    assert measure.counterpart_id_of({"implementation": "multi_step"}) is None  # unreadable params: no pair


OURS = "multi_step/upstream/b1/s4/k2048/h4096/i576/pdl1"
THEIRS = "sglang_multi_step/upstream/b1/s4/k2048/h4096/i576/pdl1"


def test_link_holds_ours_over_sglang_and_only_on_our_case():
    rec = measure.link_counterparts(_record([_case(OURS, _params("multi_step"), 20.0),
                                             _case(THEIRS, _params("sglang_multi_step"), 25.0)]))
    assert rec.case(OURS).counterpart_link == CounterpartLink(THEIRS, pytest.approx(0.8))
    assert rec.case(THEIRS).counterpart_link is None


def test_link_ratio_is_none_while_sglang_did_not_time_the_case():
    rec = measure.link_counterparts(_record([_case(OURS, _params("multi_step"), 20.0),
                                             _case(THEIRS, _params("sglang_multi_step"), 0, status="failed")]))
    assert rec.case(OURS).counterpart_link == CounterpartLink(THEIRS, None)


def test_no_link_without_sglang_in_the_run_and_a_stale_link_is_dropped():
    alone = _record([_case(OURS, _params("multi_step"), 20.0)])
    assert measure.link_counterparts(alone).case(OURS).counterpart_link is None
    from dataclasses import replace  # noqa: PLC0415

    stale = _record([replace(alone.cases[0], counterpart_link=CounterpartLink(THEIRS, 0.5))])
    assert measure.link_counterparts(stale).case(OURS).counterpart_link is None


def test_run_sweep_writes_the_link_into_the_file(tmp_path):
    cases = [Case("multi_step", "upstream", batch=1), Case("sglang_multi_step", "upstream", batch=1)]
    medians = {OURS: 30.0, THEIRS: 24.0}

    def run(case, backend, *, floors):
        return _case(case.case_id, measure.case_params(case), medians[case.case_id])

    path = tmp_path / "run.json"
    writer = RunWriter.create(path, _record([]))
    list(measure.run_sweep(cases, None, writer, floors=NOT_APPLICABLE, run=run))
    stored = json.loads(path.read_text())["cases"]
    assert stored[0]["counterpart_link"] == {"case_id": THEIRS, "ratio": 1.25}
    assert "counterpart_link" not in stored[1]  # absent = none: sglang's own case
    assert load_run(path).case(OURS).counterpart_link == CounterpartLink(THEIRS, 1.25)


def test_a_file_written_before_the_link_reads_as_no_link_and_a_bad_link_is_refused():
    data = _record([_case(OURS, _params("multi_step"), 20.0)]).to_dict()
    assert "counterpart_link" not in data["cases"][0]
    assert run_from_dict(json.loads(json.dumps(data))).case(OURS).counterpart_link is None
    data["cases"][0]["counterpart_link"] = {"ratio": 0.9}
    with pytest.raises(ResultFormatError, match="counterpart_link must be"):
        run_from_dict(data)
    data["cases"][0]["counterpart_link"] = {"case_id": THEIRS, "ratio": "fast"}
    with pytest.raises(ResultFormatError, match="counterpart_link must be"):
        run_from_dict(data)
