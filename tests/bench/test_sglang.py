"""sglang's HiSparse kernels as implementations (hisparse/bench/sglang.py), on the CPU.

- the loader against the pinned wheel unpacked (HISPARSE_SGLANG_SRC, else /tmp/sglang-src; fetched by
  scripts/fetch_sglang.sh): its entry points import without the serving stack, in a fresh process;
- the argument and state mapping against a FAKE sglang tree that records its calls;
- pruning by upstream's contract; a clean skip without sglang; clear errors for a broken one;
- the worker that isolates a case whose process dies.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import NamedTuple

import pytest
import torch

from hisparse import env
from hisparse.bench import calls, isolate, sglang
from hisparse.bench.backends import Backend
from hisparse.bench.case import Case, TimingSettings
from hisparse.bench.config import load_config
from hisparse.bench.floors import PinnedBandwidth
from hisparse.bench.measure import run_case
from hisparse.bench.workload import make_workload
from hisparse.results.model import CaseResult

REPO = Path(__file__).resolve().parents[2]


def _pinned_tree() -> Path | None:
    for cand in (os.environ.get("HISPARSE_SGLANG_SRC"), "/tmp/sglang-src"):
        if cand and (Path(cand) / "sglang" / "kernels" / "ops" / "kvcache" / "hisparse.py").is_file():
            return Path(cand)
    return None


PINNED = _pinned_tree()
needs_pinned = pytest.mark.skipif(PINNED is None, reason="sglang's wheel is not unpacked here: run "
                                  "scripts/fetch_sglang.sh (or set HISPARSE_SGLANG_SRC)")


def _python(code: str, **extra_env: str) -> subprocess.CompletedProcess:
    environ = {**os.environ, "PYTHONPATH": str(REPO), **extra_env}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=environ, timeout=300)


# ---------------------------------------------------------------------------------------------
# The pinned wheel, in a fresh process (registering `sglang` must not leak into this one)


@needs_pinned
def test_loader_imports_the_pinned_entry_points_without_the_serving_stack():
    proc = _python("""
        import json, sys
        from hisparse.bench import sglang
        k = sglang.load()
        heavy = [m for m in ("transformers", "flashinfer", "sgl_kernel", "fastapi", "uvicorn") if m in sys.modules]
        print(json.dumps({"source": k.source.to_dict(), "heavy": heavy,
                          "fields": list(k.spec_state._fields),
                          "spec": k.spec_swap.__module__, "lru": k.lru_swap.__name__,
                          "copy": k.copy_planned.__name__,
                          "sglang_init_run": hasattr(sys.modules["sglang"], "__version__")}))
    """, HISPARSE_SGLANG_SRC=str(PINNED))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["source"]["kind"] == "tree" and out["source"]["version"] == sglang.PINNED_VERSION
    assert out["source"]["git_commit"] is None  # an unpacked wheel has no commit
    assert out["heavy"] == []
    assert out["sglang_init_run"] is False
    assert out["fields"] == ["cache_index", "cache_policy", "scratch_locs", "scratch_state"]
    assert out["spec"] == sglang.ENTRY_MODULE
    assert (out["lru"], out["copy"]) == ("load_cache_to_device_buffer_mla", "copy_cache_planned_mla")


@needs_pinned
def test_pinned_entry_points_take_the_keywords_the_binders_pass():
    """The binders' keyword names are parameters of the pinned entry points (read by inspect)."""
    proc = _python("""
        import inspect, json
        from hisparse.bench import sglang
        k = sglang.load()
        print(json.dumps({n: list(inspect.signature(f).parameters) for n, f in
                          (("spec", k.spec_swap), ("lru", k.lru_swap), ("copy", k.copy_planned))}))
    """, HISPARSE_SGLANG_SRC=str(PINNED))
    assert proc.returncode == 0, proc.stderr[-3000:]
    params = json.loads(proc.stdout.strip().splitlines()[-1])
    wl = make_workload(Case(implementation="multi_step_planned", workload="upstream", batch=1, steps=2,
                            timing=TimingSettings(calls_per_graph=2, warmup_calls=0, replays=10)), "cpu")
    b = wl.buffers
    assert set(sglang.spec_kwargs(b, None, record_plan=True)) <= set(params["spec"])
    assert set(sglang.lru_kwargs(b, 0, record_plan=True)) <= set(params["lru"])
    assert set(sglang.copy_kwargs(b, 1)) <= set(params["copy"])


@needs_pinned
@pytest.mark.slow
def test_pinned_spec_kernel_builds_compile_only():
    """sglang's JIT builds (and loads) the speculative swap for sm_90 with our nvcc, no GPU needed: ~80 s
    on a cold cache (sglang's own, SGLANG_JIT_CACHE_DIR), instant when warm. The loader hands it our
    CUDA_HOME (a wrapper nvcc on PATH would otherwise make it link against a toolkit without lib64)."""
    from hisparse import env as hisparse_env

    if hisparse_env.NVCC is None:
        pytest.skip("no nvcc here")
    proc = _python("""
        from hisparse.bench import sglang
        k = sglang.load()
        from sglang.kernels.jit.utils import override_jit_cuda_arch
        with override_jit_cuda_arch(9, 0):
            m = k.module._jit_spec_module(576, 64, 2048, 4096, 4, False)
        print("BUILT", type(m).__name__)
    """, HISPARSE_SGLANG_SRC=str(PINNED))
    assert "BUILT" in proc.stdout, (proc.stdout + proc.stderr)[-4000:]


CUT_SCRIPT = REPO / "scripts" / "sglang_kernels_tree.sh"


def _cut(src: Path, dest: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(CUT_SCRIPT), str(src), str(dest)], capture_output=True, text=True, timeout=120)


def _tree_bytes(root: Path) -> int:
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file())


@needs_pinned
@pytest.mark.slow
def test_kernels_tree_cut_is_small_and_still_loads_and_builds_the_spec_kernel(tmp_path):
    """scripts/sglang_kernels_tree.sh: the cut a node that receives little takes (with this repository
    and the wheelhouse) loads the same entry points and JIT-builds the speculative swap for sm_90."""
    dest = tmp_path / "sgl"
    proc = _cut(PINNED, dest)
    assert proc.returncode == 0, proc.stderr
    assert _tree_bytes(dest) < 2 * 2**20 < _tree_bytes(PINNED)
    assert not list(dest.glob("sglang-*.dist-info/RECORD"))
    proc = _python("""
        import json
        from hisparse.bench import sglang
        from hisparse import env
        k = sglang.load()
        built = None
        if env.NVCC is not None:
            from sglang.kernels.jit.utils import override_jit_cuda_arch
            with override_jit_cuda_arch(9, 0):
                built = type(k.module._jit_spec_module(576, 64, 2048, 4096, 4, False)).__name__
        print(json.dumps({"version": k.source.version, "lru": k.lru_swap.__name__,
                          "copy": k.copy_planned.__name__, "built": built}))
    """, HISPARSE_SGLANG_SRC=str(dest))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["version"] == sglang.PINNED_VERSION
    assert (out["lru"], out["copy"]) == ("load_cache_to_device_buffer_mla", "copy_cache_planned_mla")
    if env.NVCC is not None:
        assert out["built"] == "Module"


def test_kernels_tree_cut_refuses_a_source_without_the_kernels_and_an_existing_destination(tmp_path):
    proc = _cut(tmp_path / "nothing", tmp_path / "out")
    assert proc.returncode == 2
    assert "sglang/kernels/ops/kvcache/hisparse.py is missing" in proc.stderr
    assert not (tmp_path / "out").exists()
    src = tmp_path / "src"
    for rel in ("sglang/kernels/ops/kvcache/hisparse.py", "sglang/srt/environ.py", "sglang/_version.py"):
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text("# stub\n")
    for rel in ("utils", "include", "csrc/kvcacheio"):
        (src / "sglang/kernels/jit" / rel).mkdir(parents=True)
    (tmp_path / "taken").mkdir()
    proc = _cut(src, tmp_path / "taken")
    assert proc.returncode == 2 and "exists: give a new directory" in proc.stderr
    proc = _cut(src, tmp_path / "new")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "new/sglang/kernels/ops/kvcache/hisparse.py").read_text() == "# stub\n"
    assert (tmp_path / "new/sglang/kernels/jit/csrc/kvcacheio").is_dir()


SPEC_HEADER = Path("sglang/kernels/jit/csrc/kvcacheio/hisparse_spec.cuh")
VICTIM_LOOP = "for (int64_t iteration = 0; iteration < compact_iterations; ++iteration) {"


@needs_pinned
@pytest.mark.skipif(shutil.which("git") is None, reason="git applies the patch")
def test_commit_barrier_patch_ends_each_victim_iteration_with_a_barrier(tmp_path):
    """patches/sglang-0.5.23-commit-barrier.patch (README, docs/known-issues.md, sglang's commit race) applies to the
    pinned wheel and adds exactly one __syncthreads(), as the last statement of the commit kernel's
    victim-loop body: the fix the H200 probe measured, and nothing else."""
    original = (PINNED / SPEC_HEADER).read_text()
    (tmp_path / SPEC_HEADER).parent.mkdir(parents=True)
    (tmp_path / SPEC_HEADER).write_text(original)
    proc = subprocess.run(["git", "apply", "-p1", str(REPO / "patches" / "sglang-0.5.23-commit-barrier.patch")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    patched = (tmp_path / SPEC_HEADER).read_text()
    assert patched.count("__syncthreads();") == original.count("__syncthreads();") + 1
    lines = patched.splitlines()
    head = [i for i, line in enumerate(lines) if line.strip() == VICTIM_LOOP]
    assert len(head) == 1, "the victim loop's header is not where 0.5.23 has it"
    close = next(i for i in range(head[0] + 1, len(lines)) if lines[i] == "  }")  # the loop's own brace
    assert lines[close - 1].strip().startswith("__syncthreads();")
    assert len(lines) == len(original.splitlines()) + 1


# ---------------------------------------------------------------------------------------------
# A fake sglang tree: records every call


FAKE_HISPARSE = '''
from typing import NamedTuple
CALLS = []

class HiSparseSpecState(NamedTuple):
    cache_index: object
    cache_policy: object
    scratch_locs: object
    scratch_state: object

def load_cache_to_device_buffer_spec_mla(**kw):
    CALLS.append(("spec", kw))

def load_cache_to_device_buffer_mla(top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs,
                                    host_cache, device_buffer, top_k_device_locs, req_pool_indices, seq_lens,
                                    lru_slots, item_size_bytes, num_top_k, hot_buffer_size, page_size=1,
                                    block_size=256, num_real_reqs=None, miss_src=None, miss_dst=None,
                                    miss_count=None, skip_io=False):
    CALLS.append(("lru", dict(locals())))

def copy_cache_planned_mla(**kw):
    CALLS.append(("copy", kw))
'''


def _fake_tree(root: Path, body: str = FAKE_HISPARSE, version: str = "9.9.9") -> Path:
    pkg = root / "sglang" / "kernels" / "ops" / "kvcache"
    pkg.mkdir(parents=True)
    (pkg / "hisparse.py").write_text(body)
    (root / "sglang" / "__init__.py").write_text("raise ImportError('the serving stack must not be imported')\n")
    info = root / f"sglang-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: sglang\nVersion: {version}\n")
    return root


@pytest.fixture
def clean_sglang(monkeypatch):
    """Registering `sglang` is process-wide: drop it (and the loader's cache) after the test."""
    monkeypatch.setattr(sglang, "_LOADED", {})
    yield
    for name in [m for m in sys.modules if m == "sglang" or m.startswith("sglang.")]:
        del sys.modules[name]


@pytest.fixture
def fake(tmp_path, monkeypatch, clean_sglang):
    root = _fake_tree(tmp_path / "fake")
    monkeypatch.setattr(env, "SGLANG_SRC", str(root))
    kernels = sglang.load()
    kernels.module.CALLS.clear()
    return kernels


def _kernel_backend() -> Backend:
    """The backend protocol with is_kernel (sglang's binders refuse a reference backend) on the CPU."""
    def unused(**_):
        raise AssertionError("our ops must not be called for an sglang implementation")
    return Backend(name="cuda", is_kernel=True, device="cpu", swap_single_step=unused, swap_multi_step=unused,
                   copy_planned=unused, gather_floor=unused)


def _case(impl: str, **kw) -> Case:
    d = dict(implementation=impl, workload="upstream", batch=2, steps=2,
             timing=TimingSettings(calls_per_graph=3, warmup_calls=0, replays=10))
    d.update(kw)
    return Case(**d)


def test_fake_tree_loads_without_running_its_init(fake):
    assert fake.source.version == "9.9.9" and fake.source.kind == "tree"
    assert sys.modules["sglang"].__path__ == [str(fake.source.package_dir)]
    assert sglang.provenance()["sglang"]["version"] == "9.9.9"


def test_spec_call_gets_our_tensors_and_the_coordinator_state(fake):
    wl = make_workload(_case("sglang_multi_step"), "cpu")
    b = wl.buffers
    bound = calls.bind("sglang_multi_step", _kernel_backend(), wl, pdl=True)
    bound.call()
    (kind, kw), = fake.module.CALLS
    assert kind == "spec"
    assert set(kw) == {"top_k_tokens", "device_buffer_tokens", "host_cache_locs", "device_buffer_locs", "host_cache",
                       "device_buffer", "top_k_device_locs", "req_pool_indices", "seq_lens", "state", "num_real_reqs"}
    for name in ("top_k_tokens", "device_buffer_tokens", "host_cache_locs", "device_buffer_locs", "host_cache",
                 "device_buffer", "top_k_device_locs", "req_pool_indices", "seq_lens", "num_real_reqs"):
        assert kw[name] is getattr(b, name), name  # the very tensors our implementations get
    assert kw["seq_lens"].shape == (2 * 2,) and kw["seq_lens"].dtype == torch.int32
    assert kw["req_pool_indices"].dtype == torch.int64
    st = kw["state"]
    assert type(st).__name__ == "HiSparseSpecState"
    # HiSparseSpecSwapManager.__init__ at R=2, HOT=4096, T=2*2048: hash 8192, scratch min(T, max(1024, T-HOT))
    assert st.cache_index.shape == (2, 2, 8192) and st.cache_index.dtype == torch.int64
    assert st.cache_policy.shape == (3, 4096) and st.cache_policy.dtype == torch.int32
    assert st.scratch_locs.shape == (2, 1024) and st.scratch_locs.dtype == torch.int32
    assert st.scratch_state.shape == (3, max(4 * 2, 5 * 4096)) and st.scratch_state.dtype == torch.int32
    # reset(): row 0 of the metadata zero, request rows -1; CLOCK and epochs zero
    assert int(st.scratch_state[0].abs().sum()) == 0 and bool((st.scratch_state[1:] == -1).all())
    assert int(st.cache_policy.abs().sum()) == 0
    # identity seeding of bank 0: token t at (t * 2654435761) & (H-1), entry (t << 32) | t; bank 1 empty
    for t in (0, 1, 777, 4095):
        assert int(st.cache_index[1, 0, (t * 2654435761) & 8191]) == (t << 32) | t
    assert int((st.cache_index[:, 0] >= 0).sum()) == 2 * 4096 and bool((st.cache_index[:, 1] == -1).all())
    # the scratch rows are the workload's (the rows after each request's slots and extra page)
    assert torch.equal(st.scratch_locs, b.state.scratch_locs)


def test_recorded_spec_call_passes_the_plan_and_reset_restores_the_state(fake):
    wl = make_workload(_case("sglang_multi_step_planned", shared_layers=2), "cpu")
    b = wl.buffers
    bound = calls.bind("sglang_multi_step_planned", _kernel_backend(), wl, pdl=True)
    bound._recorded[0].fn(**bound._recorded[0].kwargs)
    bound.call()
    kinds = [k for k, _ in fake.module.CALLS]
    assert kinds == ["spec", "spec", "copy", "copy"]
    rec, timed = fake.module.CALLS[0][1], fake.module.CALLS[1][1]
    assert rec["miss_src"] is b.miss_src and rec["miss_dst"] is b.miss_dst and rec["miss_count"] is b.miss_count
    assert "miss_src" in timed  # the planned call records its plan for the shared layers
    assert rec["state"] is timed["state"]  # one state per workload
    copy = fake.module.CALLS[2][1]
    assert copy["device_buffer"] is b.shared_layer_buffers[0] and copy["item_size_bytes"] == 576
    assert fake.module.CALLS[3][1]["device_buffer"] is b.shared_layer_buffers[1]
    st = rec["state"]
    st.cache_policy.fill_(5)
    st.scratch_state.fill_(7)
    wl.reset()
    assert int(st.cache_policy.abs().sum()) == 0 and int(st.scratch_state[0].abs().sum()) == 0


def test_lru_call_per_step_on_strided_views(fake):
    wl = make_workload(_case("sglang_lru_sequential", steps=3), "cpu")
    b = wl.buffers
    calls.bind("sglang_lru_sequential", _kernel_backend(), wl).call()
    assert [k for k, _ in fake.module.CALLS] == ["lru"] * 3
    for s, (_, kw) in enumerate(fake.module.CALLS):
        assert kw["top_k_tokens"].data_ptr() == b.top_k_tokens[:, s].data_ptr()
        assert kw["top_k_tokens"].stride() == (3 * 2048, 1)
        assert kw["top_k_device_locs"].data_ptr() == b.top_k_device_locs[:, s].data_ptr()
        assert kw["seq_lens"] is b.step_seq_lens[s] and kw["lru_slots"] is b.lru_slots
        assert kw["lru_slots"].dtype == torch.int16 and kw["lru_slots"].shape == (2, 4096)
        assert (kw["num_top_k"], kw["hot_buffer_size"], kw["page_size"], kw["item_size_bytes"]) == (2048, 4096, 64, 576)
        # the coordinator's swap_in_block_size (hisparse_coordinator.py: 960), not the entry point's default;
        # no plan when timed
        assert kw["block_size"] == 960 and kw["miss_src"] is None


class _Tuple(NamedTuple):  # HiSparseSpecState's fields, for building a state without sglang
    cache_index: object
    cache_policy: object
    scratch_locs: object
    scratch_state: object


def test_state_view_decodes_sglangs_packed_state():
    """clock = [epoch, cursor] above ceil(log2 HOT) cursor bits; counters strided by R, flag = bit 31."""
    sizes = sglang.spec_sizes(3, 2, 2048, 6144)
    assert (sizes.scratch_capacity, sizes.hash_size, sizes.metadata_width) == (1024, 16384, 5 * 4096)
    st = sglang.new_spec_state(_Tuple, sizes,
                               torch.zeros((3, 1024), dtype=torch.int32))
    st.cache_policy[0, :3] = torch.tensor([(5 << 13) | 7, (1 << 13) | 6143, 0], dtype=torch.int32)
    st.cache_policy[2, 10] = 4
    row = st.scratch_state[0]
    row[0:3] = torch.tensor([11, 12, 13])  # counter 0 (last misses) of requests 0..2
    row[3 + 1] = 99  # counter 1 (work) of request 1
    row[9 + 2] = torch.tensor(-(1 << 31) | 3, dtype=torch.int32)  # generation of request 2: degraded, epoch 3
    view = sglang.SglangStateView(st, sizes)
    assert view.clock.tolist() == [[5, 7], [1, 6143], [0, 0]]
    assert view.counters.tolist() == [[11, 0, 0, 0], [12, 99, 0, 0], [13, 0, 0, 1]]
    assert view.ref_epochs.shape == (3, 6144) and int(view.ref_epochs[1, 10]) == 4
    assert view.hash_index is st.cache_index and view.scratch_locs is st.scratch_locs


# ---------------------------------------------------------------------------------------------
# Pruning, skipping, errors


@pytest.mark.parametrize("kw, words", [
    (dict(steps=1), "2-4 steps"),
    (dict(workload="distinct", top_k=512, hot_buffer_size=4096), "top_k >= 1024"),
    (dict(pdl=False), "decides PDL itself"),
    (dict(workload="distinct", top_k=1024, hot_buffer_size=2048, batch=4096), "request slots"),
])
def test_upstream_contract_prunes_with_a_reason(kw, words):
    assert words in (Case(**{**dict(implementation="sglang_multi_step", workload="upstream"), **kw}).problems() or "")


def test_our_implementations_are_not_pruned_by_upstreams_contract():
    assert Case(implementation="multi_step", workload="upstream", steps=1).problems() is None


def test_vs_sglang_config_expands_ours_and_sglangs_side_by_side():
    exp = load_config("vs-sglang").expand()
    impls = {c.implementation for c in exp.cases}
    assert impls == {"lru_sequential", "sglang_lru_sequential", "multi_step", "sglang_multi_step",
                     "multi_step_planned", "sglang_multi_step_planned"}
    ours = {c.case_id.split("/", 1)[1] for c in exp.cases if c.implementation == "multi_step"}
    theirs = {c.case_id.split("/", 1)[1] for c in exp.cases if c.implementation == "sglang_multi_step"}
    # {upstream, distinct} x 4 batches x steps {2, 4} x hot {4096, 32768} x {576, 656} B, plus the
    # serving slice (4 batches at steps 4, hot 4096, 576 B) in both regimes
    assert ours == theirs and len(ours) == 2 * 4 * 2 * 2 * 2 + 4 * 2
    assert {c.workload for c in exp.cases} == {"serving", "upstream", "distinct"}
    assert {c.batch for c in exp.cases} == {1, 8, 32, 64}
    # the lead workload runs first (decode regime beside warm), so a cut run keeps its 32 pairs' cases
    assert [c.workload for c in exp.cases[:32]] == ["serving"] * 32
    assert "serving" not in {c.workload for c in exp.cases[32:]}
    serving = [c for c in exp.cases if c.workload == "serving"]
    assert sorted({c.layers for c in serving}) == [1, 5, 10, 42, 61]
    assert sum(c.layers == 1 for c in serving) == len(serving) // 2
    # the other workloads are the published-figures patterns, timed warm as published
    assert {c.layers for c in exp.cases if c.workload != "serving"} == {1}


def test_no_sglang_skips_the_case_naming_what_to_install(monkeypatch, tmp_path, clean_sglang):
    monkeypatch.setattr(env, "SGLANG_SRC", None)
    monkeypatch.setattr(sglang.importlib.util, "find_spec", lambda name: None)
    result = run_case(_case("sglang_multi_step"), _kernel_backend(), floors=PinnedBandwidth(None))
    assert result.status == "skipped"
    assert "pip install" in result.reason and "HISPARSE_SGLANG_SRC" in result.reason
    assert result.samples_us == ()


def test_reference_backend_skips_sglang_cases():
    from hisparse.bench.backends import get_backend

    result = run_case(_case("sglang_lru_sequential"), get_backend("reference"), floors=PinnedBandwidth(None))
    assert result.status == "skipped" and "cuda backend" in result.reason


def test_sglang_src_without_the_kernels_is_a_clear_error(monkeypatch, tmp_path, clean_sglang):
    monkeypatch.setattr(env, "SGLANG_SRC", str(tmp_path))
    with pytest.raises(sglang.SglangUnavailable, match="HISPARSE_SGLANG_SRC.*holds no sglang package"):
        sglang.load()


def test_broken_tree_names_the_missing_import(monkeypatch, tmp_path, clean_sglang):
    root = _fake_tree(tmp_path / "broken", body="import msgspec_not_here_either as msgspec\n")
    monkeypatch.setattr(env, "SGLANG_SRC", str(root))
    with pytest.raises(sglang.SglangUnavailable, match="pip install msgspec"):
        sglang.load()


def test_tree_lacking_an_entry_point_is_a_clear_error(monkeypatch, tmp_path, clean_sglang):
    root = _fake_tree(tmp_path / "old", body="def load_cache_to_device_buffer_mla(**kw):\n    pass\n")
    monkeypatch.setattr(env, "SGLANG_SRC", str(root))
    with pytest.raises(sglang.SglangUnavailable, match="lacks load_cache_to_device_buffer_spec_mla"):
        sglang.load()
    assert "lacks" in sglang.unavailable_reason(backend=_kernel_backend())


def test_git_checkout_records_commit_and_dirty_flag(tmp_path):
    root = _fake_tree(tmp_path / "checkout")
    git = ["git", "-C", str(root), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    src = sglang.find_source(root)
    assert (src.git_commit, src.git_dirty) == (head, False)
    (root / "sglang" / "kernels" / "ops" / "kvcache" / "hisparse.py").write_text("# edited\n")
    assert sglang.find_source(root).git_dirty is True


# ---------------------------------------------------------------------------------------------
# Fault isolation: a worker that dies costs its case only


def fake_run(case, backend, *, floors):
    """A run function for the worker: dies (as a CUDA fault would kill it) for batch 3."""
    if case.batch == 3:
        os._exit(3)
    return CaseResult(case.case_id, {"batch": case.batch, "pid": os.getpid()}, "ok", samples_us=(1.0,))


def test_isolated_runner_records_a_dead_worker_and_goes_on():
    run_path = f"{fake_run.__module__}:fake_run"
    cases = [_case("sglang_multi_step", batch=n) for n in (1, 3, 2)]
    with isolate.IsolatedRunner("reference", run_path=run_path, timeout_s=240) as runner:
        results = [runner(c, None, floors=PinnedBandwidth(None)) for c in cases]
        faults = list(runner.faults)
    assert [r.status for r in results] == ["ok", "failed", "ok"]
    assert "died (exit code 3)" in results[1].reason and results[1].case_id == cases[1].case_id
    assert results[0].params["pid"] != results[2].params["pid"]  # a fresh worker after the death
    assert results[0].params["pid"] != os.getpid()
    assert faults == [(cases[1].case_id, "died (exit code 3)")]


def test_worker_survives_the_interrupt_its_parent_handles():
    # Ctrl-C goes to the whole process group; the sweep (the parent) turns it into "Interrupted." and
    # keeps its cases, so the worker must neither die nor print a traceback of its own.
    run_path = f"{fake_run.__module__}:fake_run"
    with isolate.IsolatedRunner("reference", run_path=run_path, timeout_s=240) as runner:
        first = runner(_case("sglang_multi_step", batch=1), None, floors=PinnedBandwidth(None))
        os.kill(runner.worker._proc.pid, signal.SIGINT)
        time.sleep(0.5)
        assert runner.worker._proc.is_alive()
        second = runner(_case("sglang_multi_step", batch=2), None, floors=PinnedBandwidth(None))
        assert runner.faults == []
    assert first.status == second.status == "ok"
    assert first.params["pid"] == second.params["pid"]  # the same worker answered after the signal


def slow_job(backend, *, seconds):
    """A worker job that is still running when its parent goes away."""
    time.sleep(seconds)
    return "done", ""


def test_worker_whose_parent_left_mid_job_exits_quietly(capfd):
    # Seen on the H200 (2026-12-03): `timeout -s INT` stopped a vs-sglang sweep while sglang's worker
    # was in a case; the parent kept its cases and closed the pipe, and the worker's reply then died
    # with a BrokenPipeError traceback after the sweep's "Interrupted." line.
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=isolate._worker_main, args=(child, "reference"), daemon=True)
    proc.start()
    child.close()
    parent.send((f"{slow_job.__module__}:slow_job", {"seconds": 1.0}))
    time.sleep(0.2)
    parent.close()  # the parent leaves while the job runs
    proc.join(60)
    err = capfd.readouterr().err
    assert proc.exitcode == 0
    assert "Traceback" not in err and "BrokenPipeError" not in err


def test_isolated_runner_runs_our_cases_in_this_process():
    run_path = f"{fake_run.__module__}:fake_run"
    with isolate.IsolatedRunner("reference", run_path=run_path) as runner:
        r = runner(_case("multi_step", batch=1), None, floors=PinnedBandwidth(None))
        assert runner.worker._proc is None
    assert r.params["pid"] == os.getpid()


# ---------------------------------------------------------------------------------------------
# A fake sglang that swaps correctly (our references behind sglang's signatures and state layout):
# a whole run_case through the sglang binders, SglangStateView and the checker must pass.


WORKING_HISPARSE = FAKE_HISPARSE + '''
import torch
from hisparse.kernels.reference.copy_planned import copy_planned as _copy
from hisparse.kernels.reference.swap_multi import swap_multi_step as _multi
from hisparse.kernels.reference.swap_single import swap_single_step as _single
from hisparse.kernels.state import MultiStepState, multi_step_sizes

OURS = {}

def _bits(hot):
    return (hot - 1).bit_length()

def _ours(state, steps, top_k):
    key = state.cache_index.data_ptr()
    if key not in OURS:
        r, hot = state.scratch_locs.shape[0], state.cache_policy.shape[1]
        sz = multi_step_sizes(r, steps, top_k, hot, scratch_capacity=state.scratch_locs.shape[1])
        OURS[key] = MultiStepState(
            hash_index=state.cache_index.clone(), ref_epochs=torch.zeros((r, hot), dtype=torch.int32),
            clock=torch.zeros((r, 2), dtype=torch.int32), counters=torch.zeros((r, 4), dtype=torch.int32),
            scratch_locs=state.scratch_locs.clone(),
            miss_keys=torch.full((r, sz.miss_table_size), -1, dtype=torch.int64),
            miss_vals=torch.full((r, sz.miss_table_size), -1, dtype=torch.int64),
            miss_order=torch.zeros((r, sz.occurrences), dtype=torch.int32), sizes=sz)
    ours = OURS[key]
    r, hot = ours.sizes.num_req_slots, ours.sizes.hot_buffer_size
    packed = state.cache_policy[0, :r].to(torch.int64) & 0xFFFFFFFF
    row = state.scratch_state[0, :4 * r].to(torch.int64).view(4, r)
    ours.hash_index.copy_(state.cache_index)
    ours.ref_epochs.copy_(state.cache_policy[1:1 + r])
    ours.clock.copy_(torch.stack([packed >> _bits(hot), packed & ((1 << _bits(hot)) - 1)], 1))
    ours.counters.copy_(torch.stack([row[0], row[1], row[2], ((row[3] >> 31) & 1)], 1))
    ours.scratch_locs.copy_(state.scratch_locs)
    return ours

def _back(ours, state):
    r, hot = ours.sizes.num_req_slots, ours.sizes.hot_buffer_size
    state.cache_index.copy_(ours.hash_index)
    state.cache_policy[1:1 + r].copy_(ours.ref_epochs)
    c = ours.clock.to(torch.int64)
    state.cache_policy[0, :r] = ((c[:, 0] << _bits(hot)) | c[:, 1]).to(torch.int32)
    gen = state.scratch_state[0, 3 * r:4 * r].to(torch.int64) & 0x7FFFFFFF
    flag = (ours.counters[:, 3].to(torch.int64) & 1) << 31
    for i in range(3):
        state.scratch_state[0, i * r:(i + 1) * r] = ours.counters[:, i]
    state.scratch_state[0, 3 * r:4 * r] = (gen | flag).to(torch.int64).to(torch.uint32).view(torch.int32) \
        if hasattr(torch, "uint32") else (gen | flag).to(torch.int32)
    state.scratch_locs.copy_(ours.scratch_locs)

def load_cache_to_device_buffer_spec_mla(*, state, host_cache, top_k_tokens, **kw):
    CALLS.append(("spec", kw))
    ours = _ours(state, top_k_tokens.shape[1], top_k_tokens.shape[2])
    _multi(state=ours, host_cache=host_cache, top_k_tokens=top_k_tokens,
           item_size_bytes=host_cache.stride(0) * host_cache.element_size(), **kw)
    _back(ours, state)

def load_cache_to_device_buffer_mla(top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs,
                                    host_cache, device_buffer, top_k_device_locs, req_pool_indices, seq_lens,
                                    lru_slots, item_size_bytes, num_top_k, hot_buffer_size, page_size=1,
                                    block_size=256, num_real_reqs=None, miss_src=None, miss_dst=None,
                                    miss_count=None, skip_io=False):
    CALLS.append(("lru", {}))
    _single(top_k_tokens=top_k_tokens, device_buffer_tokens=device_buffer_tokens, host_cache_locs=host_cache_locs,
            device_buffer_locs=device_buffer_locs, host_cache=host_cache, device_buffer=device_buffer,
            top_k_device_locs=top_k_device_locs, req_pool_indices=req_pool_indices, seq_lens=seq_lens,
            lru_slots=lru_slots, item_size_bytes=item_size_bytes, page_size=page_size, num_real_reqs=num_real_reqs,
            miss_src=miss_src, miss_dst=miss_dst, miss_count=miss_count)

def copy_cache_planned_mla(*, miss_src, miss_dst, miss_count, num_real_reqs, host_cache, device_buffer,
                           item_size_bytes, num_blocks=4, block_size=1024, is_dsv4_layout=False, skip_io=False):
    CALLS.append(("copy", {}))
    _copy(miss_src=miss_src, miss_dst=miss_dst, miss_count=miss_count, num_real_reqs=num_real_reqs,
          host_cache=host_cache, device_buffer=device_buffer, item_size_bytes=item_size_bytes)
'''


@pytest.fixture
def working(tmp_path, monkeypatch, clean_sglang):
    root = _fake_tree(tmp_path / "working", body=WORKING_HISPARSE)
    monkeypatch.setattr(env, "SGLANG_SRC", str(root))
    return sglang.load()


@pytest.mark.parametrize("impl", ["sglang_multi_step", "sglang_multi_step_planned", "sglang_lru_sequential"])
def test_a_correct_swap_behind_sglangs_layout_passes_the_same_gate(working, impl):
    from dataclasses import replace as dc_replace

    from hisparse.bench.backends import get_backend

    backend = dc_replace(get_backend("reference"), name="cuda", is_kernel=True)  # "kernels" on the CPU
    case = _case(impl, batch=1, shared_layers=1) if impl.endswith("planned") else _case(impl, batch=1)
    case = case.with_(timing=TimingSettings(calls_per_graph=2, warmup_calls=0, replays=10, check_calls=2))
    result = run_case(case, backend, floors=PinnedBandwidth(None))
    assert result.status == "ok", result.reason
    kinds = {k for k, _ in working.module.CALLS}
    assert kinds == ({"lru"} if impl == "sglang_lru_sequential" else
                     {"spec", "copy"} if impl.endswith("planned") else {"spec"})


def test_a_wrong_row_behind_sglangs_layout_fails_the_gate(working, monkeypatch):
    from dataclasses import replace as dc_replace

    from hisparse.bench.backends import get_backend
    from hisparse.kernels.reference.bytes import as_rows

    good = working.module.load_cache_to_device_buffer_spec_mla

    def corrupt(**kw):
        good(**kw)
        row = int(kw["top_k_device_locs"][0, 1, 5])
        as_rows(kw["device_buffer"], 576)[row, 3] ^= 0x5A

    monkeypatch.setattr(working.module, "load_cache_to_device_buffer_spec_mla", corrupt)
    monkeypatch.setattr(sglang, "_LOADED", {})  # rebind to the patched entry point
    sys.modules.pop(sglang.ENTRY_MODULE)
    sys.modules[sglang.ENTRY_MODULE] = working.module
    backend = dc_replace(get_backend("reference"), name="cuda", is_kernel=True)
    result = run_case(_case("sglang_multi_step", batch=1), backend, floors=PinnedBandwidth(None))
    assert result.status == "failed"
    assert result.reason.startswith("check call 0: invariant 1 failed for request 0")


# ---------------------------------------------------------------------------------------------
# Offline nodes: `hisparse-bench wheelhouse --with-sglang VERSION`


def test_wheelhouse_carries_sglang_unpacked_not_installed(tmp_path):
    from hisparse.cli import wheelhouse_build as wh

    reqs = wh.sglang_requirements("0.5.23")
    assert [r.name for r in reqs] == ["msgspec"]
    cmds = wh.sglang_download_commands("0.5.23", tmp_path, "3.12", python="py")
    assert [c[c.index("--python-version") + 1] for c in cmds] == ["3.12", "3.11", "3.10"]
    assert all(c[-1] == "sglang==0.5.23" and "--no-deps" in c and "manylinux_2_34_x86_64" in c for c in cmds)
    script = wh.install_script("3.12", wh.DEFAULT_PLATFORMS, reqs, False, "0.5.23")
    assert '"$here"/sglang/sglang-*.whl' in script
    assert 'echo "export HISPARSE_SGLANG_SRC=$here/sglang-src"' in script
    assert "sglang" not in wh.install_script("3.12", wh.DEFAULT_PLATFORMS, [], False)


def test_wheelhouse_rejects_a_bad_sglang_version():
    from hisparse.cli import wheelhouse_build as wh

    with pytest.raises(wh.WheelhouseError, match="--with-sglang: 'latest' is not a version"):
        wh.sglang_requirements("latest")


def test_install_script_unpacks_the_sglang_wheel(tmp_path):
    """The unpack step of install.sh on a wheel-shaped zip (the pip install step before it needs wheels)."""
    import zipfile

    from hisparse.cli import wheelhouse_build as wh

    (tmp_path / "sglang").mkdir()
    with zipfile.ZipFile(tmp_path / "sglang" / "sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl", "w") as z:
        z.writestr("sglang/kernels/ops/kvcache/hisparse.py", "# kernels\n")
    script = wh.install_script("3.12", wh.DEFAULT_PLATFORMS, [], False, "0.5.23")
    unpack = script[script.index("# sglang: unpacked"):]
    proc = subprocess.run(["bash", "-c", f'set -euo pipefail; shopt -s nullglob; here={tmp_path}; '
                           f'PYTHON={sys.executable}\n{unpack}'], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"export HISPARSE_SGLANG_SRC={tmp_path}/sglang-src"
    assert sglang.find_source(tmp_path / "sglang-src").package_dir == (tmp_path / "sglang-src" / "sglang").resolve()


def test_sglang_lru_is_not_held_to_our_references_tie_breaking(fake):
    """Bit-exactness against our single-step reference is our kernel's promise, not sglang's gate."""
    wl = make_workload(_case("sglang_lru_sequential"), "cpu")
    inv = calls.bind("sglang_lru_sequential", _kernel_backend(), wl)._timed[0]
    assert inv.kind == calls.SINGLE and calls._bit_exact_setup(inv, _kernel_backend()) is None
    ours = calls.bind("lru_sequential", _kernel_backend(), make_workload(_case("lru_sequential"), "cpu"))._timed[0]
    assert calls._bit_exact_setup(ours, _kernel_backend()) is not None


def test_sglang_kinds_are_calls_kinds():
    assert (sglang.SINGLE, sglang.MULTI, sglang.PLANNED) == (calls.SINGLE, calls.MULTI, calls.PLANNED)
