"""hisparse.kernels.jit on real nvcc: compile-only on the CPU machine, load/run with a GPU.

The probe kernel (tests/data/csrc/jit_probe.cuh) includes the real shared headers (hisparse/copy.cuh,
hisparse/pdl.cuh, launch.h), so these builds use the same include dirs, flags and launch path as the ops.
Each compile takes ~5 s on the 2-core CPU machine; the module shares builds between tests.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hisparse import env
from hisparse.kernels import jit
from hisparse.errors import BuildError, KernelUnavailable

PROBE_DIR = Path(__file__).parents[1] / "data" / "csrc"
needs_nvcc = pytest.mark.skipif(env.CUDA_HOME is None, reason="no CUDA toolkit (nvcc) on this machine")


def probe(in_flight: int = 2, pdl: bool = False) -> jit.KernelSpec:
    return jit.KernelSpec("jit_probe", "jit_probe::copy_rows_entry", (("in_flight", in_flight), ("pdl", pdl)),
                          source_dir=PROBE_DIR)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("jit-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(env, "CACHE_DIR", path)
        mp.setattr(env, "NO_JIT", False)
        yield path


@pytest.fixture(scope="module")
def built(cache_dir):
    """The first (cold) build of the default probe."""
    return jit.build(probe())


@pytest.fixture
def broken_dir(tmp_path):
    (tmp_path / "broken.cuh").write_text(
        '#pragma once\n#include "launch.h"\n'
        "template <int N>\nvoid broken_entry(tvm::ffi::TensorView x) { int y = N +; }\n")
    return tmp_path


# -- names and keys (no compiler needed) --------------------------------------------------------

def test_module_name_is_readable_and_follows_the_template_args():
    spec = jit.KernelSpec("swap_single", "hisparse::swap_single_entry",
                          (("top_k", 2048), ("hot_buffer_size", 4096), ("record_plan", True)))
    assert spec.name == "hisparse_swap_single__top_k2048_hot_buffer_size4096_record_plan1"
    assert spec.cpp_function() == "hisparse::swap_single_entry<2048, 4096, true>"
    assert probe(2, False).name == "hisparse_jit_probe_copy_rows__in_flight2_pdl0"
    src = probe(2, True).source()
    assert '#include "jit_probe.cuh"' in src
    assert "TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, (jit_probe::copy_rows_entry<2, true>));" in src


def test_module_names_are_distinct_per_instantiation_and_stable():
    specs = [probe(f, p) for f in (1, 2, 4) for p in (False, True)]
    names = [s.module_name("9.0") for s in specs]
    assert len(set(names)) == len(specs)
    assert all(n.startswith(s.name + "_") for n, s in zip(names, specs))
    assert probe(2, True).module_name("9.0") == probe(2, True).module_name("9.0")
    assert probe(2, True) == probe(2, True) and hash(probe(2, True)) == hash(probe(2, True))
    # entries of one header (e.g. a gather and a commit kernel) get distinct names too
    a = jit.KernelSpec("swap_multi", "hisparse::swap_multi_gather_entry", (("steps", 4),))
    b = jit.KernelSpec("swap_multi", "hisparse::swap_multi_commit_entry", (("steps", 4),))
    assert a.name == "hisparse_swap_multi_gather__steps4" and b.name == "hisparse_swap_multi_commit__steps4"


def test_cache_key_covers_included_headers_and_arch(tmp_path, monkeypatch):
    monkeypatch.setattr(env, "CACHE_DIR", tmp_path / "cache")
    (tmp_path / "k.cuh").write_text('#pragma once\n#include "k_detail.h"\n#include <hisparse/copy.cuh>\n')
    (tmp_path / "k_detail.h").write_text("// v1\n")
    (tmp_path / "unrelated.h").write_text("// v1\n")
    spec = jit.KernelSpec("k", "k_entry", (("n", 1),), source_dir=tmp_path)
    deps = {p.name for p in spec.dependencies()}
    assert deps == {"k.cuh", "k_detail.h", "copy.cuh"}
    before = spec.module_name("9.0")
    (tmp_path / "unrelated.h").write_text("// v2\n")
    assert spec.module_name("9.0") == before
    (tmp_path / "k_detail.h").write_text("// v2\n")
    assert spec.module_name("9.0") != before
    assert spec.module_name("8.0") != spec.module_name("9.0")
    assert spec.build_dir("9.0") == tmp_path / "cache" / "sm_90" / spec.module_name("9.0")
    assert spec.build_dir("8.0").parent.name == "sm_80"


@pytest.mark.parametrize("kwargs", [
    dict(op="bad-op", entry="f"),
    dict(op="k", entry="f(); int x"),
    dict(op="k", entry="f", template_args=(("n", 1.5),)),
    dict(op="k", entry="f", template_args=(("n", "a b"),)),
    dict(op="k", entry="f", template_args=(("n", 1), ("n", 2))),
    dict(op="k", entry="f", template_args=(("2n", 1),)),
])
def test_invalid_spec_is_rejected(kwargs):
    with pytest.raises(ValueError):
        jit.KernelSpec(**kwargs)


def test_missing_header_raises_kernel_unavailable(tmp_path):
    with pytest.raises(KernelUnavailable, match="nope.cuh"):
        jit.build(jit.KernelSpec("nope", "f", source_dir=tmp_path))


# -- building (nvcc, no GPU needed) --------------------------------------------------------------

@needs_nvcc
def test_build_compiles_then_is_cached(built):
    assert not built.cached and built.ok
    assert built.path.is_file() and built.path.suffix == ".so"
    assert built.path.parent == probe().build_dir(built.arch)
    assert built.path.parent.parent.name == env.arch_tag(built.arch)
    stamp = json.loads((built.path.parent / "hisparse_build.json").read_text())
    assert stamp["module_name"] == built.module_name and stamp["template_args"] == [["in_flight", 2], ["pdl", False]]
    t0 = time.perf_counter()
    again = jit.build(probe())
    assert again.cached and again.path == built.path
    assert time.perf_counter() - t0 < 1.0  # no ninja, no nvcc


@needs_nvcc
def test_unfinished_build_is_not_trusted(built):
    stamp = built.path.parent / "hisparse_build.json"
    stamp.unlink()  # as if the process died between link and stamp
    report = jit.build(probe())
    assert not report.cached and stamp.is_file()
    assert jit.build(probe()).cached


@needs_nvcc
def test_concurrent_processes_compile_once(cache_dir):
    script = (
        "import json, sys\nfrom pathlib import Path\nfrom hisparse import env\nfrom hisparse.kernels import jit\n"
        "env.CACHE_DIR = Path(sys.argv[1])\n"
        f"spec = jit.KernelSpec('jit_probe', 'jit_probe::copy_rows_entry', (('in_flight', 4), ('pdl', False)), "
        f"source_dir={str(PROBE_DIR)!r})\n"
        "r = jit.build(spec)\nprint(json.dumps({'cached': r.cached, 'path': str(r.path)}))\n")
    child_env = {**os.environ, "HISPARSE_CUDA_ARCH": env.CUDA_ARCH}
    procs = [subprocess.Popen([sys.executable, "-c", script, str(cache_dir)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=child_env) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
    results = [json.loads(o[0].strip().splitlines()[-1]) for o in outs]
    assert sorted(r["cached"] for r in results) == [False, True]
    assert results[0]["path"] == results[1]["path"] == str(probe(4).library_path(env.CUDA_ARCH))


@needs_nvcc
def test_compile_error_raises_build_error_with_nvcc_output(cache_dir, broken_dir):
    spec = jit.KernelSpec("broken", "broken_entry", (("n", 3),), source_dir=broken_dir)
    with pytest.raises(BuildError) as info:
        jit.build(spec)
    msg = str(info.value)
    assert "error: expected an expression" in msg  # nvcc's own diagnostic ...
    assert "broken.cuh(4)" in msg  # ... with its file and line
    assert spec.module_name() in msg
    assert isinstance(info.value, KernelUnavailable)
    assert not spec.library_path().exists()


@needs_nvcc
def test_build_many_reports_every_module(built, broken_dir):
    bad = jit.KernelSpec("broken", "broken_entry", (("n", 4),), source_dir=broken_dir)
    reports = jit.build_many([probe(), bad, probe()], jobs=2, keep_going=True)
    assert [r.spec for r in reports] == [probe(), bad]  # duplicates built once, input order kept
    assert reports[0].ok and reports[0].cached
    assert isinstance(reports[1].error, BuildError) and "expected an expression" in str(reports[1].error)
    with pytest.raises(BuildError):
        jit.build_many([probe(), bad], jobs=2)


# -- HISPARSE_NO_JIT -----------------------------------------------------------------------------

def test_no_jit_without_prebuilt_module_raises(cache_dir, monkeypatch):
    monkeypatch.setattr(env, "NO_JIT", True)
    spec = probe(in_flight=16)
    with pytest.raises(KernelUnavailable) as info:
        jit.build(spec)
    assert not isinstance(info.value, BuildError)
    msg = str(info.value)
    assert spec.module_name() in msg and str(cache_dir) in msg and "HISPARSE_NO_JIT" in msg
    assert not spec.build_dir().exists()  # nothing compiled


@needs_nvcc
def test_no_jit_uses_a_prebuilt_module(built, monkeypatch):
    monkeypatch.setattr(env, "NO_JIT", True)
    report = jit.build(probe())
    assert report.cached and report.path == built.path


# -- loading and calling -------------------------------------------------------------------------

def test_load_without_gpu_fails_cleanly(cache_dir):
    if jit.cuda_available():
        pytest.skip("a GPU is visible")
    spec = probe(in_flight=8)
    with pytest.raises(KernelUnavailable, match="needs a CUDA GPU"):
        jit.load(spec)
    assert not spec.build_dir().exists()  # refused before compiling


@pytest.mark.gpu
@pytest.mark.parametrize("pdl", [False, True])
@pytest.mark.parametrize("item_size_bytes", [576, 37, 8])
@pytest.mark.parametrize("pinned_src", [False, True])
def test_loaded_kernel_copies_rows(cache_dir, pdl, item_size_bytes, pinned_src):
    import torch

    mod = jit.load(probe(2, pdl))
    assert jit.load(probe(2, pdl)) is mod  # memoised
    rows = 1000
    gen = torch.Generator().manual_seed(item_size_bytes)
    src = torch.randint(0, 256, (rows * item_size_bytes,), dtype=torch.uint8, generator=gen)
    src = src.pin_memory() if pinned_src else src.cuda()
    dst = torch.zeros(rows * item_size_bytes, dtype=torch.uint8, device="cuda")
    mod.run(src, dst, item_size_bytes)
    torch.cuda.synchronize()
    assert torch.equal(dst.cpu(), src.cpu())


@pytest.mark.gpu
def test_kernel_argument_check_raises(cache_dir):
    import torch

    mod = jit.load(probe())
    x = torch.zeros(10, dtype=torch.uint8, device="cuda")
    with pytest.raises(Exception, match="item_size_bytes must be positive"):
        mod.run(x, x, 0)


def test_runner_loads_each_key_once(monkeypatch):
    """The ops' launch path: jit.runner memoises the loaded run function per key (no spec built or
    hashed after the first call of a key)."""
    from hisparse.kernels import jit as jit_mod

    loaded = []

    class Module:
        def __init__(self, spec):
            self.run = ("run", spec.name)

    monkeypatch.setattr(jit_mod, "load", lambda spec: loaded.append(spec.name) or Module(spec))
    specs = []

    def spec_of(block_size, record_plan):
        specs.append((block_size, record_plan))
        return jit_mod.KernelSpec(op="probe", entry="probe::entry",
                                  template_args=(("block_size", block_size), ("record_plan", record_plan)))

    get = jit_mod.runner(spec_of)
    first = get(1024, False)
    assert get(1024, False) is first and get(256, True) != first
    assert specs == [(1024, False), (256, True)] and len(loaded) == 2
