"""`hisparse-bench report`: result tables generated from run files, and the committed docs they generate.

Expected figures are read off the committed run file of 3239c10 (2026-12-03, H200) by hand:
lru_sequential/serving/b64/.../pdl0 685.6 us, multi_step .../pdl1 638.0 us, gather floor 614.6 us. The
README sample's rows are those `run` printed at the end of abfd03a's run (2026-12-04, H200), as the README
quoted them before the sample was generated."""
from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from hisparse.cli import main as cli_main
from hisparse.render.report import (BEGIN, END, EXAMPLE_BEGIN, EXAMPLE_END, Named, document, example_block,
                                    readme_block, replace_block)
from hisparse.results.model import load_run, run_from_dict

REPO = Path(__file__).resolve().parents[2]
DEFAULT = "results/runs/20261203-170254_3239c1072567_default.json"
BOTH_REGIMES = "results/runs/20261204-180430_abfd03ab0efe_default.json"


@pytest.fixture(scope="module")
def default_data() -> dict:
    return json.loads((REPO / DEFAULT).read_text())


def committed_document(path: str) -> str:
    """The document of one committed run file, as `hisparse-bench report PATH` makes it."""
    return document([Named(path, load_run(REPO / path))])


def test_each_run_heading_names_file_commit_date_and_machine(default_data):
    doc = document([Named(DEFAULT, run_from_dict(copy.deepcopy(default_data)))])
    heading = next(line for line in doc.splitlines() if line.startswith("## "))
    assert heading == f"## `default`: `{DEFAULT}`"
    facts = doc.split(heading, 1)[1].strip().splitlines()[0]
    for want in ("Commit 3239c10;", "2026-12-03 17:02:54-17:11:13 UTC", "machine h200-sxm (NVIDIA H200",
                 "driver 580.159.04", "160 of 160 cases ok"):
        assert want in facts, facts


def test_the_heading_names_the_host_where_the_run_file_records_it(default_data):
    assert "; host " not in document([Named(DEFAULT, run_from_dict(copy.deepcopy(default_data)))])
    data = copy.deepcopy(default_data)
    data["environment"].update(cpu="AMD EPYC 9654", iommu="on (iommu=pt)", hypervisor=False)
    doc = document([Named(DEFAULT, run_from_dict(data))])
    assert "torch 2.11.0+cu130; host AMD EPYC 9654, IOMMU on (iommu=pt), hypervisor no)" in doc


def test_the_heading_names_a_resume_and_the_cases_it_timed(default_data):
    assert "Resumed" not in document([Named(DEFAULT, run_from_dict(copy.deepcopy(default_data)))])
    data = copy.deepcopy(default_data)
    last = data["cases"][-1]["case_id"]
    data["resumes"] = [{"started": "2026-12-06T06:20:00Z", "environment": {}, "cases": [last]}]
    doc = document([Named(DEFAULT, run_from_dict(data))])
    assert "Resumed 2026-12-06T06:20:00Z: 1 case(s) timed then, environment as recorded." in doc


def test_a_vs_sglang_heading_counts_the_pairs_ours_wins_in_each_regime():
    # read off the committed file's JSON: 111 pairs with a stored ratio (the regime from the `/layers=`
    # suffix), 6 of them decode; 5 of sglang's multi-step cases failed invariant 7. Ours/sglang < 1 in all
    # 111, but a pair counts only where the samples differ: for 10 against 10 samples, Mann-Whitney's
    # two-sided critical value at alpha 0.01 is U <= 16 (published tables). One warm pair, LRU `distinct`
    # b8 s2 (ratio 0.883), has U = 30: its samples do not tell the two kernels apart.
    path = "results/runs/20261204-181539_abfd03ab0efe_vs-sglang.json"
    cases = {c["case_id"]: c for c in json.loads((REPO / path).read_text())["cases"]}
    counts = {"decode": [0, 0], "warm": [0, 0]}  # [faster, rated]
    for c in cases.values():
        link = c.get("counterpart_link")
        if not link or link.get("ratio") is None:
            continue
        ours = [x for r in c["runs"] for x in r["samples_us"]]
        theirs = [x for r in cases[link["case_id"]]["runs"] for x in r["samples_us"]]
        assert len(ours) == len(theirs) == 10
        u = sum((a > b) + 0.5 * (a == b) for a in ours for b in theirs)
        regime = "decode" if "/layers=" in c["case_id"] else "warm"
        counts[regime][1] += 1
        counts[regime][0] += link["ratio"] < 1 and min(u, 100 - u) <= 16
    assert counts == {"decode": [6, 6], "warm": [104, 105]}
    doc = committed_document(path)
    assert ("Against sglang's kernels, in the pairs where both were timed: ours faster in 110 of 111 "
            "(decode 6 of 6, warm 104 of 105), slower in 0, not distinguishable in 1 (Mann-Whitney p >= 0.01 "
            "on the two cases' samples); 5 pair(s) without sglang's time.") in doc


def test_the_heading_says_how_many_calls_each_timed_graph_held(default_data):
    # read off the committed files' JSON (`settings.calls_per_graph` of the ok cases; the regime from the
    # `/layers=` suffix): 3239c10's run is warm only, 20 calls; a7c8a99's vs-sglang run 100 warm, and
    # 100, 122 or 126 (two rotations of 61 layers, three of 42) in the decode regime.
    doc = document([Named(DEFAULT, run_from_dict(copy.deepcopy(default_data)))])
    assert "Each timed CUDA graph: 20 calls." in doc
    path = "results/runs/20261206-234651_a7c8a99f7fff_vs-sglang.json"
    doc = committed_document(path)
    assert ("Each timed CUDA graph: 100 calls in the warm regime, 100-126 in the decode regime (whole "
            "rotations of the layers).") in doc


def test_the_heading_gives_the_range_of_cold_over_warm_gathers(default_data):
    # read off the committed files' JSON (gather_floor_us / gather_warm_us of the ok cases that have both):
    # a7c8a99's default run 1.001-1.387 over its 47 decode-regime cases; the H100 SXM run of 2026-12-07
    # 0.966-1.040; 3239c10's run has no warm gather (warm regime only), so no line.
    warm_only = document([Named(DEFAULT, run_from_dict(copy.deepcopy(default_data)))])
    assert "Decode regime: the cold gather" not in warm_only
    for path, span in (("results/runs/20261206-234008_a7c8a99f7fff_default.json", "1.00-1.39x"),
                       ("results/probes/lru-grid-copy-h100-20261207/rerun-11bdbfc/"
                        "20261207-054929_11bdbfc35daa_default.json", "0.97-1.04x")):
        doc = committed_document(path)
        assert (f"Decode regime: the cold gather of a case's rows took {span} its warm gather (what cold "
                "host-address translations cost on this node).") in doc


def test_a_run_without_sglang_pairs_has_no_count(default_data):
    assert "Against sglang" not in document([Named(DEFAULT, run_from_dict(copy.deepcopy(default_data)))])


def test_the_heading_says_when_the_sweep_did_not_reach_its_end(default_data):
    assert "Unfinished" not in document([Named(DEFAULT, run_from_dict(copy.deepcopy(default_data)))])
    data = copy.deepcopy(default_data)
    data["finished"] = None
    data["cases"] = data["cases"][:100]
    doc = document([Named(DEFAULT, run_from_dict(data))])
    facts = doc.split(f"## `default`: `{DEFAULT}`", 1)[1]
    assert "2026-12-03 17:02:54 UTC" in facts  # no end time
    assert "100 of 100 cases ok" in facts
    assert "Unfinished: the sweep stopped before its last case" in facts


def test_the_serving_grid_row_holds_the_run_files_medians_and_floor(default_data):
    doc = document([Named(DEFAULT, run_from_dict(copy.deepcopy(default_data)))])
    serving = doc.split("### `serving`", 1)[1].split("###", 1)[0]
    assert "warm regime (layers 1" in serving.splitlines()[0]
    row = next(line for line in serving.splitlines() if re.match(r"\| 64 +\|", line))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells == ["64", "685.6", "638.0", "638.0", "1.04", "614.6"]
    assert "gather warm us" not in serving  # today's files have no warm floor: no empty column


def test_decode_regime_cases_get_their_own_table_first_with_the_warm_floor(default_data):
    data = copy.deepcopy(default_data)
    decode = [c for c in data["cases"] if c["params"]["workload"] == "serving"
              and c["params"]["implementation"] == "multi_step" and c["params"]["pdl"]]
    for c in decode:
        c["params"]["workload_params"]["layers"] = 61
        c["floor"]["gather_warm_us"] = c["floor"]["gather_floor_us"] / 2
    doc = document([Named("decode.json", run_from_dict(data))])
    titles = [line for line in doc.splitlines() if line.startswith("### ")]
    assert titles[0].startswith("### `serving`, decode regime (each layer its own host pool")
    table = doc.split(titles[0], 1)[1].split("### ", 1)[0]
    assert "gather warm us" in table and "| layers |" in table
    b1 = next(line for line in table.splitlines() if re.match(r"\| 1 +\|", line))
    assert [c.strip() for c in b1.strip("|").split("|")][1] == "61"  # the row names its layer count
    b64 = next(c for c in decode if c["params"]["batch"] == 64 and c["params"]["item_size_bytes"] == 576
               and c["params"]["workload_params"]["context_max"] == 131072 and c["params"]["shared_layers"] == 0)
    assert f"{b64['floor']['gather_warm_us']:.1f}" in table
    assert any(t.startswith("### `serving`, warm regime") for t in titles)  # the rest of serving stays warm


def test_a_parameter_left_at_its_default_is_labelled_default_not_none(default_data):
    # Run files keep only the host_alloc a case sets: rows at the default (pinned) must not read "None".
    data = copy.deepcopy(default_data)
    at_default = [c for c in data["cases"] if c["params"]["workload"] == "serving"
                  and c["params"]["implementation"] == "multi_step" and c["params"]["pdl"]][:4]
    for c in data["cases"]:
        if c not in at_default:
            c["params"]["host_alloc"] = "registered"
            c["case_id"] += "/host_alloc=registered"
    doc = document([Named("alloc.json", run_from_dict(data))])
    assert "None" not in doc
    assert "Main grid, fixed: " in doc and "host_alloc registered" in doc
    assert "Off the main grid: host_alloc default." in doc


def test_a_tie_for_the_main_grid_goes_to_the_default(default_data):
    # Half the serving cases on another allocation, half at the default: the main grid is the default's,
    # whichever comes first in the file.
    data = copy.deepcopy(default_data)
    serving = [c for c in data["cases"] if c["params"]["workload"] == "serving"]
    others = [c for c in data["cases"] if c["params"]["workload"] != "serving"]
    for c in copy.deepcopy(serving):
        c["params"]["host_alloc"] = "hugetlb-2m"
        c["case_id"] += "/host_alloc=hugetlb-2m"
        others.insert(0, c)  # the other allocation first
    data["cases"] = others + serving
    doc = document([Named("tie.json", run_from_dict(data))])
    section = doc.split("### `serving`", 1)[1].split("\n### ", 1)[0]
    fixed = next(line for line in section.splitlines() if line.startswith("Main grid, fixed: "))
    assert "host_alloc default," in fixed
    assert "Off the main grid: host_alloc hugetlb-2m." in section


def test_cases_not_timed_are_listed_once_per_reason(default_data):
    data = copy.deepcopy(default_data)
    a, b, c = data["cases"][:3]
    for case, reason in ((a, "host_numa=local: one memory node"), (b, "host_numa=local: one memory node"),
                         (c, "check call 0: invariant 7 failed for request 2")):
        case.update(status="skipped" if case is not c else "failed", reason=reason)
    doc = document([Named("skips.json", run_from_dict(data))])
    assert "Not timed (3):" in doc
    bullets = [line for line in doc.splitlines() if line.startswith("- ")]
    assert bullets == [f"- host_numa=local: one memory node: `{a['case_id']}`, `{b['case_id']}`",
                       f"- check call 0: invariant 7 failed for request 2: `{c['case_id']}`"]


def test_replace_block_keeps_what_surrounds_the_markers():
    text = f"intro\n{BEGIN}\nold table\n{END}\noutro\n"
    assert replace_block(text, f"{BEGIN}\nnew\n{END}") == f"intro\n{BEGIN}\nnew\n{END}\noutro\n"
    with pytest.raises(ValueError, match="report:begin"):
        replace_block("no markers here\n", "x")


def test_readme_block_is_the_main_grid_only_and_links_the_full_tables(default_data):
    block = readme_block([Named(DEFAULT, run_from_dict(copy.deepcopy(default_data)))])
    assert block.startswith(BEGIN) and block.endswith(END)
    assert "docs/benchmarks-h200.md" in block and f"### `default`: `{DEFAULT}`" in block
    assert "Off the main grid" not in block


def test_cli_writes_the_document_and_rewrites_the_readme_block(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    out, readme = tmp_path / "bench.md", tmp_path / "README.md"
    readme.write_text(f"# x\n{BEGIN}\nstale\n{END}\nrest\n")
    r = CliRunner().invoke(cli_main, ["report", DEFAULT, "--out", str(out), "--readme", str(readme)])
    assert r.exit_code == 0, r.output
    assert f"`{DEFAULT}`" in out.read_text()
    text = readme.read_text()
    assert "stale" not in text and text.startswith("# x\n") and text.endswith(f"{END}\nrest\n")


def test_the_readme_sample_is_runs_table_for_the_serving_grids_smallest_and_largest_batch():
    block = example_block(Named(BOTH_REGIMES, load_run(REPO / BOTH_REGIMES)))
    assert block.startswith(EXAMPLE_BEGIN) and block.endswith(EXAMPLE_END)
    assert f"6 cases of `{BOTH_REGIMES}` (H200, commit abfd03a)" in block
    assert "run 20261204-180430_abfd03ab0efe_default  backend=cuda  config=default (hash 4899100e6e2b)" in block
    rows = [line.split("|") for line in block.splitlines() if line.startswith("| ") and "/serving/" in line]
    # what `run` printed for these cases on the node: id, regime, time/call
    assert [(r[1].strip(), r[2].strip(), r[3].strip()) for r in rows] == [
        ("lru_sequential/serving/b1/s4/k2048/h4096/i576/pdl0/layers=61", "decode L=61", "117.8"),
        ("lru_sequential/serving/b64/s4/k2048/h4096/i576/pdl0/layers=10", "decode L=10", "1,074"),
        ("multi_step/serving/b1/s4/k2048/h4096/i576/pdl1/layers=61", "decode L=61", "25.08"),
        ("multi_step/serving/b64/s4/k2048/h4096/i576/pdl1/layers=10", "decode L=10", "744.9"),
        ("multi_step/serving/b1/s4/k2048/h4096/i576/pdl1", "warm", "19.33"),
        ("multi_step/serving/b64/s4/k2048/h4096/i576/pdl1", "warm", "695.8"),
    ]


def test_a_run_without_serving_has_no_sample_to_show(default_data):
    data = copy.deepcopy(default_data)
    data["cases"] = [c for c in data["cases"] if "/serving/" not in c["case_id"]]
    with pytest.raises(ValueError, match="no `serving` main-grid case"):
        example_block(Named("x.json", run_from_dict(data)))


def test_cli_rewrites_the_readme_sample_where_the_readme_has_its_markers(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n{EXAMPLE_BEGIN}\nold sample\n{EXAMPLE_END}\nmid\n{BEGIN}\nstale\n{END}\n")
    r = CliRunner().invoke(cli_main, ["report", BOTH_REGIMES, "--readme", str(readme)])
    assert r.exit_code == 0 and "report and example blocks" in r.output, r.output
    text = readme.read_text()
    assert "old sample" not in text and "stale" not in text
    assert "| multi_step/serving/b64/s4/k2048/h4096/i576/pdl1/layers=10     | decode L=10 |        744.9 |" in text
    assert text.index(EXAMPLE_END) < text.index("\nmid\n") < text.index(BEGIN)


def test_cli_refuses_a_readme_without_the_markers(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("no block\n")
    r = CliRunner().invoke(cli_main, ["report", str(REPO / DEFAULT), "--readme", str(readme)])
    assert r.exit_code == 1 and "report:begin" in r.output
    assert readme.read_text() == "no block\n"


def _named_runs(markdown: str, level: str) -> list[str]:
    return re.findall(rf"^{level} `[^`]+`: `(results/runs/[^`]+\.json)`$", markdown, flags=re.M)


@pytest.mark.parametrize("page", sorted(p.name for p in (REPO / "docs").glob("benchmarks-*.md")))
def test_committed_benchmarks_doc_is_what_the_generator_makes_of_its_run_files(page):
    """docs/benchmarks-<gpu>.md cannot drift from the run files it names: regenerate it with
    `hisparse-bench report <the files its headings name> --out docs/benchmarks-<gpu>.md`."""
    committed = (REPO / "docs" / page).read_text()
    paths = _named_runs(committed, "##")
    assert paths, f"docs/{page} names no run file"
    assert committed == document([Named(p, load_run(REPO / p)) for p in paths])


def test_a_page_is_titled_by_the_gpus_its_runs_recorded(default_data):
    h200 = run_from_dict(copy.deepcopy(default_data))
    h100 = copy.deepcopy(default_data)
    h100["environment"]["gpu"] = "NVIDIA H100 80GB HBM3"
    named = [Named("a.json", h200), Named("b.json", run_from_dict(h100))]
    assert document(named[:1]).splitlines()[0] == "# Results on an H200"
    assert document(named[1:]).splitlines()[0] == "# Results on an H100 80GB HBM3"
    assert document(named).splitlines()[0] == "# Results on an H200 and H100 80GB HBM3"
    assert document(named, title="Mine").splitlines()[0] == "# Mine"


def test_committed_readme_block_is_what_the_generator_makes_of_its_run_files():
    readme = (REPO / "README.md").read_text()
    block = readme[readme.index(BEGIN):readme.index(END) + len(END)]
    paths = _named_runs(block, "###")
    assert paths, "the README's report block names no run file"
    assert block == readme_block([Named(p, load_run(REPO / p)) for p in paths])


def test_committed_readme_sample_is_what_the_generator_makes_of_its_run_file():
    """The README's sample of `run`'s table comes from the first run its report block names."""
    readme = (REPO / "README.md").read_text()
    sample = readme[readme.index(EXAMPLE_BEGIN):readme.index(EXAMPLE_END) + len(EXAMPLE_END)]
    first = _named_runs(readme[readme.index(BEGIN):readme.index(END)], "###")[0]
    assert f"`{first}`" in sample
    assert sample == example_block(Named(first, load_run(REPO / first)))
