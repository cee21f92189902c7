"""scripts/ab_patch.sh and scripts/ab_table.py end to end on the CPU: a throwaway git tree of the package
carries a patch, the script rebuilds the head without it, alternates both trees on cpu-small with the
reference backend, and packs the logs; the table's figures are checked against the run files."""
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from hisparse.results.model import load_run

REPO = Path(__file__).resolve().parents[1]
MARK = "# ab_patch test: this line exists only in the patched tree\n"
needs_tools = pytest.mark.skipif(not (shutil.which("git") and shutil.which("patch")), reason="needs git and patch")


def _git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def patched_tree(tmp_path):
    """A git tree of the package, configs and scripts, with MARK appended to a module and left as the patch."""
    tree = tmp_path / "tree"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "hisparse", "configs", "scripts", "csrc"], cwd=REPO,
                           check=True, capture_output=True, text=True).stdout.split()
    for f in files:
        (tree / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / f, tree / f)
    _git(tree, "init", "-q")
    _git(tree, "add", "-A")
    _git(tree, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "base")
    target = tree / "hisparse" / "__init__.py"
    target.write_text(target.read_text() + MARK)
    patch = tmp_path / "p.patch"
    patch.write_text(subprocess.run(["git", "diff"], cwd=tree, check=True, capture_output=True, text=True).stdout)
    return tree, patch


def _run(tree, tmp_path, *args, **env):
    e = dict(os.environ, OUT=str(tmp_path / "out"), AB_LOG=str(tmp_path / "log"), AB_HEAD=str(tmp_path / "head"),
             PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"], HISPARSE_WHEELHOUSE=str(tmp_path / "none"))
    e.update(env)
    return subprocess.run(["bash", "scripts/ab_patch.sh", *args], cwd=tree, env=e, capture_output=True, text=True, timeout=300)


@needs_tools
def test_alternates_the_head_and_the_patched_tree(patched_tree, tmp_path):
    tree, patch = patched_tree
    r = _run(tree, tmp_path, str(patch), "configs/cpu-small.yaml", TREE="tX", REPS="a b", TESTS="", SANITIZE="0",
             BUILD="0", RUN_ARGS="--ci --backend reference --no-plots")
    assert r.returncode == 0, r.stderr + r.stdout
    head_init = (tmp_path / "head" / "hisparse" / "__init__.py").read_text()
    assert MARK not in head_init and MARK in (tree / "hisparse" / "__init__.py").read_text()
    log = tmp_path / "log"
    progress = (log / "progress.txt").read_text()
    for label in ("run head a rc=0", "run tX a rc=0", "run head b rc=0", "run tX b rc=0"):
        assert label in progress
    # the table: one row per case, a median per run file, and tX's best over head's best
    runs = {lab: load_run(log / f"{lab}.json") for lab in ("head-a", "tX-a", "head-b", "tX-b")}
    case = runs["head-a"].cases[0]
    med = {lab: next(c for c in run.cases if c.case_id == case.case_id).stats["median_us"] for lab, run in runs.items()}
    row = next(line for line in r.stdout.splitlines() if line.startswith(case.case_id + " "))
    cells = row.split()[1:]
    assert [float(x) for x in cells[:4]] == pytest.approx([round(med[lab], 1) for lab in runs], abs=0.051)
    assert float(cells[4]) == pytest.approx(min(med["tX-a"], med["tX-b"]) / min(med["head-a"], med["head-b"]), abs=6e-4)
    header = next(line for line in r.stdout.splitlines() if line.startswith("case "))
    assert header.split()[1:] == ["head-a", "tX-a", "head-b", "tX-b", "tX/h"]
    with tarfile.open(tmp_path / "out" / "ab.tgz") as tar:
        names = tar.getnames()
    assert "./table.txt" in names and "./tX-b.json" in names and "./progress.txt" in names


@needs_tools
def test_more_trees_in_one_call(patched_tree, tmp_path):
    """MORE="NAME=PATCH": another candidate built from the head with its own patch, alternated with the
    head and the first tree, and given its own ratio column."""
    tree, patch = patched_tree
    other = tmp_path / "other.patch"
    mark2 = "# ab_patch test: the second candidate\n"
    target = tree / "hisparse" / "errors.py"
    original = target.read_text()
    target.write_text(original + mark2)
    other.write_text(subprocess.run(["git", "diff", "--", "hisparse/errors.py"], cwd=tree, check=True,
                                    capture_output=True, text=True).stdout)
    target.write_text(original)  # the working tree carries the first patch only
    r = _run(tree, tmp_path, str(patch), "configs/cpu-small.yaml", TREE="tX", REPS="a", TESTS="", SANITIZE="0",
             BUILD="0", RUN_ARGS="--ci --backend reference --no-plots", MORE=f"tY={other}")
    assert r.returncode == 0, r.stderr + r.stdout
    second = tmp_path / "head-tY" / "hisparse"
    assert mark2 in (second / "errors.py").read_text() and MARK not in (second / "__init__.py").read_text()
    assert MARK not in (tmp_path / "head" / "hisparse" / "__init__.py").read_text()
    progress = (tmp_path / "log" / "progress.txt").read_text()
    assert all(f"run {t} a rc=0" in progress for t in ("head", "tX", "tY"))
    header = next(line for line in r.stdout.splitlines() if line.startswith("case "))
    assert header.split()[1:] == ["head-a", "tX-a", "tY-a", "tX/h", "tY/h"]
    bad = _run(tree, tmp_path, str(patch), "configs/cpu-small.yaml", TESTS="", SANITIZE="0", BUILD="0",
               MORE=f"head={other}")
    assert bad.returncode == 2 and "MORE wants NAME=PATCH" in bad.stderr


@needs_tools
def test_a_tree_without_the_patch_is_refused(patched_tree, tmp_path):
    tree, patch = patched_tree
    _git(tree, "checkout", "-q", "--", ".")  # the working tree no longer carries the patch
    r = _run(tree, tmp_path, str(patch), "configs/cpu-small.yaml", TESTS="", SANITIZE="0", BUILD="0")
    assert r.returncode == 2
    assert "reversing the patch failed (does the working tree carry it?)" in r.stdout


def test_missing_arguments_and_files_are_named(tmp_path):
    r = subprocess.run(["bash", str(REPO / "scripts/ab_patch.sh")], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 2 and "usage: git apply PATCH" in r.stderr
    r = _run(REPO, tmp_path, str(tmp_path / "nope.patch"), "configs/cpu-small.yaml")
    assert r.returncode == 2 and "no patch file" in r.stderr and "nope.patch" in r.stderr


def test_ab_table_rejects_labels_that_do_not_match_the_files(capsys):
    import importlib.util

    spec = importlib.util.spec_from_file_location("ab_table", REPO / "scripts" / "ab_table.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--labels", "head-a,t-a", "only-one.json"]) == 2
    assert "2 labels for 1 run files" in capsys.readouterr().err
    assert mod.main([]) == 2


def test_ab_table_gives_each_runs_floors_against_the_first(capsys):
    # The committed A/B of 2026-12-07 (results/probes/lru-flat64-h100-20261207/): the node's pinned copy got
    # ~10% faster during it. The drift rows must say so, computed here from the raw files.
    import importlib.util
    import json
    import math

    spec = importlib.util.spec_from_file_location("ab_table", REPO / "scripts" / "ab_table.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    probe = REPO / "results" / "probes" / "lru-flat64-h100-20261207"
    labels = ["head-a", "flat64-a", "head-b", "flat64-b"]
    assert mod.main(["--labels", ",".join(labels), *(str(probe / f"{lab}.json") for lab in labels)]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split()[1:] for line in out.split("node drift against head-a")[1].splitlines()[2:]}
    assert list(rows) == labels[1:]

    raw = {lab: json.loads((probe / f"{lab}.json").read_text()) for lab in labels}
    ok = {lab: {c["case_id"]: c["floor"] for c in raw[lab]["cases"] if c["status"] == "ok"} for lab in labels}
    for lab in labels[1:]:
        pinned = raw["head-a"]["floors"]["pinned_h2d_gbps"] / raw[lab]["floors"]["pinned_h2d_gbps"]
        logs = [math.log(ok[lab][cid]["gather_floor_us"] / ok["head-a"][cid]["gather_floor_us"])
                for cid in ok["head-a"] if cid in ok[lab]]
        assert float(rows[lab][0]) == pytest.approx(pinned, abs=6e-4)
        assert float(rows[lab][1]) == pytest.approx(math.exp(sum(logs) / len(logs)), abs=6e-4)
    assert float(rows["flat64-b"][0]) < 0.92  # the drift this A/B had
