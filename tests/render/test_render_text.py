"""hisparse.render.text: the run summary names bimodal cases; compare's footer counts re-run agreement."""
import random

from hisparse.track.compare import compare
from hisparse.render import text
from hisparse.results.model import CaseResult, RunRecord
from hisparse.stats import summary


def _case(case_id, samples):
    return CaseResult(case_id=case_id, params={"implementation": "multi_step"}, status="ok",
                      samples_us=tuple(samples), stats=summary(samples).to_dict())


def _run(run_id, cases):
    return RunRecord(run_id=run_id, created="2026-11-29T23:00:00Z", backend="cuda", config={"name": "t", "hash": "h"},
                     environment={"machine": "m", "gpu": "NVIDIA H200"}, floors={}, cases=tuple(cases))


def test_run_summary_lists_bimodal_cases_with_their_modes():
    rng = random.Random(0)
    steady = [100 + rng.uniform(-0.2, 0.2) for _ in range(30)]
    two = [53.2] * 12 + [55.2] * 18  # 40% / 60%
    run = _run("r", [_case("steady", steady), _case("two", two)])
    out = text.run_summary(run)
    assert "1 case(s) bimodal" in out
    assert "  two: 53.2 us x40% | 55.2 us x60%" in out
    assert "steady:" not in out
    assert text.bimodal_table(_run("r", [_case("steady", steady)])) == ""


def test_compare_table_footer_counts_medians_within_threshold():
    a = _run("A", [_case("x", [100.0] * 10), _case("y", [100.0] * 10)])
    b = _run("B", [_case("x", [101.0] * 10), _case("y", [104.0] * 10)])
    out = text.compare_table(compare(a, b, threshold=0.02), threshold=0.02, alpha=0.01)
    assert out.rstrip().endswith("medians within 2.0%: 1 of 2")


def test_bimodal_replays_are_listed_when_their_samples_average_them():
    from dataclasses import replace  # noqa: PLC0415

    replays = [53.2, 55.2, 55.2] * 10 + [55.2, 53.2, 53.2] * 10  # 50/50 over 60 replays
    samples = [sum(replays[i:i + 3]) / 3 for i in range(0, 60, 3)]  # 54.53 and 53.87 us
    case = replace(_case("two", samples), timing={"replays_per_sample": 3, "replay_us": replays})
    # the modes named are the replays' (53.2 / 55.2), not those of the averaged samples (53.9 / 54.5)
    assert "  two: 53.2 us x50% | 55.2 us x50%" in text.run_summary(_run("r", [case]))
    (v,) = compare(_run("A", [case]), _run("B", [case]))
    assert v.note == "bimodal in both, modes B/A 1.000, 1.000"


def _pair(impl, rest, ours, theirs, ratio):
    """Our case with the stored link the engine would write, and sglang's case (None: not timed)."""
    from dataclasses import replace  # noqa: PLC0415

    from hisparse.results.model import CounterpartLink  # noqa: PLC0415

    mine = _case(f"{impl}/{rest}", [ours] * 10)
    other_id = f"sglang_{impl}/{rest}"
    other = (CaseResult.failed(other_id, {"implementation": f"sglang_{impl}"}, "fault") if theirs is None
             else replace(_case(other_id, [theirs] * 10), params={"implementation": f"sglang_{impl}"}))
    return [replace(mine, params={"implementation": impl}, counterpart_link=CounterpartLink(other_id, ratio)), other]


def test_run_summary_puts_ours_next_to_sglang():
    run = _run("r", _pair("multi_step", "upstream/b1/s4/k2048/h4096/i576/pdl1", 20.0, 25.0, 0.8)
               + _pair("multi_step", "upstream/b64/s4/k2048/h4096/i576/pdl1", 600.0, 500.0, 1.2)
               + _pair("lru_sequential", "upstream/b1/s4/k2048/h4096/i576/pdl0", 100.0, None, None))
    out = text.run_summary(run)
    lines = out.splitlines()
    assert "ours vs sglang (median time per call; ours/sglang < 1: ours faster):" in lines
    assert "| multi_step     | upstream/b1/s4/k2048/h4096/i576/pdl1  |   20.00 |     25.00 |       0.800 |" in lines
    assert "| multi_step     | upstream/b64/s4/k2048/h4096/i576/pdl1 |   600.0 |     500.0 |       1.200 |" in lines
    assert "| lru_sequential | upstream/b1/s4/k2048/h4096/i576/pdl0  |   100.0 |         - |           - |" in lines
    assert ("ours faster in 1 of 2 pairs, slower in 1; 1 without a ratio (sglang's case not timed)" in lines)


def test_run_summary_counts_the_pairs_of_each_regime_when_there_are_both():
    from dataclasses import replace  # noqa: PLC0415

    decode = [replace(c, params={**c.params, "workload_params": {"layers": 61}}) for c in
              _pair("multi_step", "serving/b1/s4/k2048/h4096/i576/pdl1/layers=61", 20.0, 30.0, 0.667)]
    warm = (_pair("multi_step", "distinct/b64/s4/k2048/h4096/i576/pdl1", 600.0, 500.0, 1.2)
            + _pair("multi_step", "distinct/b1/s4/k2048/h4096/i576/pdl1", 20.0, 25.0, 0.8))
    lines = text.run_summary(_run("r", decode + warm)).splitlines()
    at = lines.index("ours faster in 2 of 3 pairs, slower in 1")
    assert lines[at + 1:at + 3] == ["  decode: ours faster in 1 of 1 pairs, slower in 0",
                                    "  warm: ours faster in 1 of 2 pairs, slower in 1"]
    one_regime = text.run_summary(_run("r", warm))
    assert "ours faster in 1 of 2 pairs, slower in 1" in one_regime and "  warm:" not in one_regime


def test_a_pair_whose_samples_overlap_is_neither_faster_nor_slower():
    from dataclasses import replace  # noqa: PLC0415

    from hisparse.results.model import CounterpartLink  # noqa: PLC0415

    # ours 1.003x sglang's by median, but the samples interleave: U = 55 of 100, far from the two-sided
    # critical value of 16 at alpha 0.01 for 10 against 10 samples (published Mann-Whitney tables)
    ours = [1020.0, 1022.0, 1024.0, 1025.0, 1026.0, 1027.0, 1028.0, 1029.0, 1030.0, 1031.0]
    theirs = [1019.0, 1021.0, 1023.0, 1024.5, 1025.5, 1026.5, 1027.5, 1028.5, 1029.5, 1030.5]
    assert sum(a > b for a in ours for b in theirs) == 55
    rest = "serving/b64/s4/k2048/h4096/i576/pdl0/layers=5"
    mine = replace(_case(f"lru_sequential/{rest}", ours), params={"implementation": "lru_sequential"},
                   counterpart_link=CounterpartLink(f"sglang_lru_sequential/{rest}", 1.003))
    other = replace(_case(f"sglang_lru_sequential/{rest}", theirs), params={"implementation": "sglang_lru_sequential"})
    clear = _pair("multi_step", "serving/b1/s4/k2048/h4096/i576/pdl1", 20.0, 25.0, 0.8)
    lines = text.run_summary(_run("r", [mine, other, *clear])).splitlines()
    assert any(line.endswith("|      1.003~ |") for line in lines)
    assert "ours faster in 1 of 2 pairs, slower in 0, not distinguishable in 1 (p >= 0.01)" in lines
    assert "~ not distinguishable within this run: Mann-Whitney p >= 0.01 on the two cases' samples." in lines
    assert next(line for line in lines if "| multi_step " in line).endswith("|      0.800  |")  # in line with 1.003~


def test_run_summary_without_sglang_has_no_vs_table():
    out = text.run_summary(_run("r", [_case("multi_step/x", [10.0] * 10)]))
    assert "ours vs sglang" not in out


def test_compare_table_shows_the_ratio_in_a_and_b_per_pair():
    from hisparse.track.compare import PairRatio  # noqa: PLC0415

    a = _run("A", [_case("x", [100.0] * 10)])
    pairs = [PairRatio("multi_step/b1", "sglang_multi_step/b1", 0.9, 1.1, 1e-4, 1e-4),
             PairRatio("multi_step/b64", "sglang_multi_step/b64", 0.95, 0.97, 1e-4, 0.2),  # B: samples overlap
             PairRatio("lru_sequential/b1", "sglang_lru_sequential/b1", None, None)]
    out = text.compare_table(compare(a, a), threshold=0.02, alpha=0.01, pairs=pairs)
    tail = out.split("ours vs sglang (ours/sglang median, < 1: ours faster):\n")[1].splitlines()
    assert tail == ["| ours           |      A |      B |",  # decimals in line: unmarked cells padded
                    "|----------------|-------:|-------:|",
                    "| multi_step/b1  | 0.900  | 1.100  |",
                    "| multi_step/b64 | 0.950  | 0.970~ |",
                    "ours faster in A: 2 of 2 pairs, in B: 0 of 2; 1 pair(s) sglang timed in neither run",
                    "~ not distinguishable within this run: Mann-Whitney p >= 0.01 on the two cases' samples."]
    assert "ours vs sglang" not in text.compare_table(compare(a, a), threshold=0.02, alpha=0.01)


def test_run_table_marks_a_pcie_floor_whose_rows_are_read_more_than_once():
    # work.host_bytes_per_call: the distinct host rows' bytes (hisparse/bench/calls.py distinct_host_rows).
    def timed(case_id, host_bytes):
        c = _case(case_id, [100.0] * 10)
        work = {"unique_misses_per_call": 100, "hits_per_call": 0, "bytes_per_call": 1000}
        if host_bytes is not None:
            work["host_bytes_per_call"] = host_bytes
        return replace(c, work=work, floor={"pcie_floor_us": 120.0, "gather_floor_us": 90.0})

    from dataclasses import replace  # noqa: PLC0415
    run = _run("r", [timed("shared", 250), timed("own", 1000), timed("old-file", None)])
    out = text.run_table(run)
    lines = {ln.split("|")[1].strip(): ln for ln in out.splitlines() if ln.startswith("| ")}
    assert "0.83x*" in lines["shared"]
    assert "*" not in lines["own"] and "0.83x" in lines["own"]
    assert "*" not in lines["old-file"]
    assert out.splitlines()[-1].startswith("* rows read more than once") and "read only 25% of them" in out


def test_run_summary_shows_the_layer_regime_noise_and_the_warm_gather():
    # tests/data/run_layers.json: a synthetic run with `layers` cases (workload_params.layers; the
    # case id's /layers=N suffix) and floors.gather_warm_us, as the engine writes them.
    from pathlib import Path  # noqa: PLC0415

    from hisparse.results.model import load_run  # noqa: PLC0415

    run = load_run(Path(__file__).resolve().parents[1] / "data" / "run_layers.json")
    out = text.run_summary(run)
    rows = {ln.split("|")[1].strip(): [c.strip() for c in ln.split("|")[2:-1]] for ln in out.splitlines()
            if ln.startswith("| ") and "/" in ln}
    header = [c.strip() for c in out.splitlines()[4].split("|")[2:-1]]
    warm_row = dict(zip(header, rows["multi_step/serving/b1/s4/k2048/h4096/i576/pdl1"]))
    decode_row = dict(zip(header, rows["multi_step/serving/b1/s4/k2048/h4096/i576/pdl1/layers=8"]))
    assert warm_row["regime"] == "warm" and decode_row["regime"] == "decode L=8"
    assert decode_row["/gather floor"] == "1.29x" and decode_row["/gather warm"] == "2.58x"  # 31/24, 31/12
    # samples 30.85..31.15 in 10 even steps: IQR 0.15 us over a 31 us median = 0.5%
    assert decode_row["noise"] == "0.5%"
    # b8: a 12 us spread on 80 us is 7.5% IQR / median, beyond the gate's 5%
    assert "warning: 1 case(s) noisier than the gate's 5.0% threshold (IQR / median): " \
           "multi_step/serving/b8/s4/k2048/h4096/i576/pdl1/layers=8 (7.5%)" in out


def test_run_header_names_the_host_where_the_run_recorded_it():
    from dataclasses import replace  # noqa: PLC0415

    old = _run("r", [])
    assert "host:" not in text.run_header(old)  # files before 2026-12-06 do not describe their host
    new = replace(old, environment={**old.environment, "cpu": "AMD EPYC 9654", "iommu": "off", "hypervisor": True})
    assert text.run_header(new).splitlines()[-1] == "host: AMD EPYC 9654, IOMMU off, hypervisor yes"
