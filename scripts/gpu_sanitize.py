#!/usr/bin/env python3
"""Small GPU cases for compute-sanitizer (docs/semantics.md §H7); run through scripts/gpu_sanitize.sh.

    python scripts/gpu_sanitize.py build          # compile every kernel below (do this outside the sanitizer)
    python scripts/gpu_sanitize.py real           # our kernels on small cases, checked against the reference
    python scripts/gpu_sanitize.py planted-oob    # control for memcheck: a deliberate out-of-bounds write
    python scripts/gpu_sanitize.py planted-race   # control for racecheck: a deliberate shared-memory race

Under ``compute-sanitizer --tool memcheck|racecheck --error-exitcode 9`` with
``PYTORCH_NO_CUDA_MEMORY_CACHING=1`` (so every tensor is its own cudaMalloc and an out-of-bounds access
leaves the allocation): ``real`` must exit 0 with no errors reported, the planted cases must be
reported (exit 9). A clean real run means something only next to a caught planted bug.

``real`` runs: the single-step swap (the flat copy at batch 4 and the warp copy at batch 20, plan
recorded and not, an aligned and an unaligned item size, long / fast / padding rows, the rows used at
the very end of exactly sized buffers), the planned copy replaying its plan, the bare gather (flat
paths of 16-, 8- and 4-byte words, the warp fallback), and the multi-step swap (72-byte items: the
8-byte flat copy; at batch 3, one round of the gather, and at the smallest batch whose grid runs two
rounds, the 64-register gather at 4 CTAs per SM) when hisparse.kernels.ops.swap_multi exists (checked
with the invariant checker), else a "skipped" line.
Exit codes of the script itself: 0 ok, 1 a result differs from the reference, 2 usage.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
PLANTED_DIR = REPO / "tests" / "data" / "csrc"
SWAP_BLOCK = 256  # a small CTA: sanitizer runs are slow, and the code paths are the same


def planted_specs():
    from hisparse.kernels.jit import KernelSpec

    return [
        KernelSpec("planted_bugs", "planted_bugs::oob_write_entry", (("bytes_past_end", 64),), source_dir=PLANTED_DIR),
        KernelSpec("planted_bugs", "planted_bugs::smem_race_entry", (("threads", 256),), source_dir=PLANTED_DIR),
    ]


def real_specs():
    from hisparse.kernels.ops import copy_planned, gather_floor, swap_single

    # every swap the wrapper can launch: both plan variants with each copy, and the plan-only swap
    return (swap_single.kernel_specs(block_size=SWAP_BLOCK, plan_only=True)
            + copy_planned.kernel_specs() + gather_floor.kernel_specs())


def build() -> int:
    from hisparse.kernels import jit

    specs = real_specs() + planted_specs()
    if importlib.util.find_spec("hisparse.kernels.ops.swap_multi") is not None:
        mod = importlib.import_module("hisparse.kernels.ops.swap_multi")
        factory = getattr(mod, "kernel_specs", None)
        if callable(factory):
            try:  # keyword-only factories take no case; registry-style ones take one
                specs += list(factory())
            except TypeError:
                try:
                    specs += list(factory(None))
                except Exception as e:
                    print(f"swap_multi: specs not prebuilt, they build on first call ({type(e).__name__}: {e})")
    for r in jit.build_many(specs):
        print(f"{r.module_name}: {'cached' if r.cached else 'built'} ({r.seconds:.1f} s)")
    return 0


# -------------------------------------------------------------------------------------------------
# real cases


# (item size, record_plan, copy_blocks, batch) of the single-step swap's real cases, the seed being the
# index. Batch 4 copies flat, batch 20 a miss per warp (swap_single.flat_copy_for); the last two copy
# over their own grid after a plan-only swap, in request-major tasks (1 and 8 a request).
SWAP_CASES = [(576, True, 0, 4), (100, False, 0, 4), (656, True, 0, 4), (576, True, 0, 20), (100, False, 0, 20),
              (576, True, 5, 4), (576, True, 32, 20)]


def _swap_case(item: int, record_plan: bool, seed: int, device: str = "cuda", batch: int = 4) -> dict:
    """batch >= 4 rows (long, long, fast, then padding), K=48, HOT=100 (not a power of two), page 2.

    The last device row and the last host row are used, and both buffers are exactly sized. A batch
    over ``FLAT_COPY_MAX_BATCH`` (padding rows added) runs the warp-copy instantiation, 4 the flat one."""
    g = torch.Generator().manual_seed(seed)
    bs, k, hot, page, r = batch, 48, 100, 2, 5
    width = hot + page
    pad = bs - 3
    seq = [hot + 3 * k + 5, hot + 2 * k + 9, 37] + [999] * pad
    rids = [3, 0, 1] + [12345] * pad  # padding rows' slot does not exist: it must never be read
    max_len = max(seq[:3]) + 1
    tokens = torch.full((r, width), -1, dtype=torch.int64)
    top_k = torch.zeros((bs, k), dtype=torch.int64)
    for b in range(2):  # long rows: 60% hits, the newest token, the rest misses
        newest = seq[b] - 1
        perm = torch.randperm(newest, generator=g)
        res = perm[:hot].clone()
        res[::17] = -1  # a few empty slots
        tokens[rids[b], :hot] = res
        tokens[rids[b], hot] = newest
        resident = res[res >= 0]
        hits = resident[: int(0.6 * k)]
        misses = perm[hot: hot + k - hits.numel() - 1]
        top_k[b] = torch.cat([hits, misses, torch.tensor([newest])])[torch.randperm(k, generator=g)]
    # short row (seq 37 < K): distinct slots of [0, hot + page) with some padding, tokens first and -1
    # from index seq_len on (the top-k contract, hisparse/kernels/validation/common.py check_top_k_rows)
    top_k[2] = torch.randperm(width, generator=g)[:k]
    top_k[2, ::7] = -1
    top_k[2, seq[2]:] = -1
    top_k[3:] = torch.randint(0, 1 << 30, (pad, k), generator=g)
    dev_rows = r * width
    locs = torch.randperm(dev_rows, generator=g).view(r, width)  # includes the last row
    host_rows = 97
    hcl = torch.randint(0, host_rows, (r, max_len), generator=g)
    hcl[:, -1] = host_rows - 1
    for b in range(2):
        hcl[rids[b], top_k[b, 0]] = host_rows - 1  # one miss or hit at the host's last row
    host = torch.empty(host_rows * item, dtype=torch.uint8, pin_memory=device == "cuda")
    host.copy_(torch.randint(0, 256, (host_rows * item,), generator=g, dtype=torch.uint8))
    dev = torch.device(device)
    kw = dict(
        top_k_tokens=top_k.to(torch.int32).to(dev),
        device_buffer_tokens=tokens.to(torch.int32).to(dev),
        host_cache_locs=hcl.to(dev),
        device_buffer_locs=locs.to(torch.int32).to(dev),
        host_cache=host,
        device_buffer=torch.randint(0, 256, (dev_rows * item,), dtype=torch.uint8, device=dev),
        top_k_device_locs=torch.full((bs, k), 7, dtype=torch.int32, device=dev),
        req_pool_indices=torch.tensor(rids, dtype=torch.int64, device=dev),
        seq_lens=torch.tensor(seq, dtype=torch.int32, device=dev),
        lru_slots=torch.stack([torch.randperm(hot, generator=g) for _ in range(r)]).to(torch.int16).to(dev),
        num_real_reqs=torch.tensor([3], dtype=torch.int32, device=dev),
        item_size_bytes=item,
        page_size=page,
    )
    if record_plan:
        kw.update(miss_src=torch.full((bs, k), -1, dtype=torch.int64, device=dev),
                  miss_dst=torch.full((bs, k), -1, dtype=torch.int32, device=dev),
                  miss_count=torch.full((bs,), 99, dtype=torch.int32, device=dev))
    return kw


def _clone(kw: dict) -> dict:
    return {k: (v.clone() if isinstance(v, torch.Tensor) and v.device.type == "cuda" else v) for k, v in kw.items()}


def _differs(a: dict, b: dict) -> list[str]:
    return [k for k, v in a.items() if isinstance(v, torch.Tensor) and not torch.equal(v, b[k])]


def run_real() -> int:
    from hisparse.kernels.ops.copy_planned import copy_planned
    from hisparse.kernels.ops.gather_floor import gather_floor
    from hisparse.kernels.ops.swap_single import swap_single_step
    from hisparse.kernels.reference.bytes import copy_rows
    from hisparse.kernels.reference.copy_planned import copy_planned as copy_planned_ref
    from hisparse.kernels.reference.swap_single import swap_single_step as swap_single_ref

    failures = []
    for seed, (item, plan, grid, batch) in enumerate(SWAP_CASES):
        kw = _swap_case(item, plan, seed, batch=batch)
        ref = _clone(kw)
        swap_single_step(**kw, block_size=SWAP_BLOCK, copy_blocks=grid)
        torch.cuda.synchronize()
        swap_single_ref(**ref)
        bad = _differs(kw, ref)
        verdict = "MISMATCH " + str(bad) if bad else "ok"
        print(f"swap_single batch={batch} item={item} record_plan={plan} copy_blocks={grid}: {verdict}")
        failures += bad
        if plan:  # replay the recorded plan into a second, exactly sized layer
            layer = torch.randint(0, 256, kw["device_buffer"].shape, dtype=torch.uint8, device="cuda")
            layer_ref = layer.clone()
            pkw = dict(miss_src=kw["miss_src"], miss_dst=kw["miss_dst"], miss_count=kw["miss_count"],
                       num_real_reqs=kw["num_real_reqs"], host_cache=kw["host_cache"], item_size_bytes=item)
            copy_planned(**pkw, device_buffer=layer)
            torch.cuda.synchronize()
            copy_planned_ref(**pkw, device_buffer=layer_ref)
            ok = torch.equal(layer, layer_ref)
            print(f"copy_planned item={item}: {'ok' if ok else 'MISMATCH'}")
            failures += [] if ok else ["copy_planned"]

    # flat 16-, 8-, 4-byte words (576, 584 = 73 * 8, 100 = 25 * 4), the warp fallback (alignment)
    for item, offset in ((576, 0), (584, 0), (100, 0), (576, 3)):
        n, host_rows, dev_rows = 300, 211, 317
        g = torch.Generator().manual_seed(item + offset)
        pinned = torch.empty(offset + host_rows * item, dtype=torch.uint8, pin_memory=True)
        pinned.copy_(torch.randint(0, 256, (pinned.numel(),), generator=g, dtype=torch.uint8))
        host = pinned[offset:]
        src = torch.randint(0, host_rows, (n,), generator=g)
        src[0] = host_rows - 1
        dst = torch.randperm(dev_rows, generator=g)[:n]
        dst[dst == dev_rows - 1] = dst[0].clone()
        dst[0] = dev_rows - 1
        buf = torch.randint(0, 256, (dev_rows * item,), dtype=torch.uint8, device="cuda")
        want = buf.clone()
        gather_floor(src_rows=src.cuda(), dst_rows=dst.to(torch.int32).cuda(), host_cache=host, device_buffer=buf,
                     item_size_bytes=item)
        torch.cuda.synchronize()
        copy_rows(host, src, want, dst, item)
        ok = torch.equal(buf, want)
        print(f"gather_floor item={item} host_offset={offset}: {'ok' if ok else 'MISMATCH'}")
        failures += [] if ok else ["gather_floor"]

    failures += run_multi_step()
    return 1 if failures else 0


def run_multi_step() -> list[str]:
    """Hook for the multi-step swap: runs only when hisparse.kernels.ops.swap_multi exists."""
    if importlib.util.find_spec("hisparse.kernels.ops.swap_multi") is None:
        print("swap_multi: skipped (hisparse.kernels.ops.swap_multi does not exist yet)")
        return []
    # Two shapes of the gather (csrc/swap_multi.cuh, launch_gather): batch 3 runs one round, so the
    # 128-register build; the second case's batch is the smallest at which the 2-per-SM grid would give
    # each CTA a second round, so the 64-register build at 4 per SM runs (its pool, ~3 MB, fits in L2).
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    failures = []
    for bs, steps, k, hot in multi_step_cases(sms):
        failures += _multi_step_case(bs, steps, k, hot)
    return failures


def multi_step_cases(sms: int) -> list[tuple[int, int, int, int]]:
    """(batch, steps, top_k, hot) of the multi-step cases on a device of ``sms`` SMs."""
    steps, k = 4, 1024
    rounds_bs = 2 * sms * 256 // (steps * k) + 1  # 256 = the gather's CTA; 2 = its CTAs per SM on the H200
    return [(3, 2, 64, 128), (rounds_bs, steps, k, 1024)]


def multi_step_inputs(bs: int, steps: int, k: int, hot: int) -> dict:
    """The multi-step swap's arguments on the CPU: random top-k over each request's context, each step's
    newest token included, the last request padding, the plan recorded, 72-byte items."""
    from hisparse.kernels.scenarios import build_case

    g = torch.Generator().manual_seed(11)
    seq = torch.tensor([[hot + 500 + s for s in range(steps)] for _ in range(bs)], dtype=torch.int32)
    top_k = torch.stack([torch.stack([torch.randperm(int(seq[b, s]) - 1, generator=g)[:k] for s in range(steps)])
                         for b in range(bs)])
    top_k[:, :, 0] = seq - 1  # each step's newest token (tail / extra page path)
    case = build_case(top_k.to(torch.int32), seq.reshape(-1), hot=hot, page=4, max_len=int(seq.max()) + 1,
                      num_real=bs - 1, record_plan=True, words=9)
    return dict(case.kwargs)


def _multi_step_case(bs: int, steps: int, k: int, hot: int) -> list[str]:
    from hisparse.kernels.ops.swap_multi import swap_multi_step
    from hisparse.kernels.reference.invariants import check_multi_step, snapshot
    from hisparse.kernels.state import MultiStepState

    kw = multi_step_inputs(bs, steps, k, hot)
    dev = torch.device("cuda")
    for name, v in list(kw.items()):
        if name == "host_cache":
            kw[name] = v.pin_memory()
        elif isinstance(v, torch.Tensor):
            kw[name] = v.to(dev)
    state = kw["state"]
    kw["state"] = MultiStepState(**{n: t.to(dev) for n, t in state.tensors().items()}, sizes=state.sizes)
    before = snapshot(kw)
    swap_multi_step(**kw)
    torch.cuda.synchronize()
    violations = check_multi_step(inputs=kw, before=before, after=snapshot(kw))
    verdict = 'ok' if not violations else f'{len(violations)} invariant violations: {violations[:3]}'
    print(f"swap_multi bs={bs} steps={steps} k={k} hot={hot}: {verdict}")
    return [f"swap_multi bs={bs}"] if violations else []


# -------------------------------------------------------------------------------------------------
# planted bugs


def run_planted(which: str) -> int:
    from hisparse.kernels import jit

    oob, race = planted_specs()
    if which == "planted-oob":
        buf = torch.zeros(4096, dtype=torch.uint8, device="cuda")  # its own cudaMalloc under NO_CACHING
        jit.load(oob).run(buf)
    else:
        out = torch.zeros(256, dtype=torch.int32, device="cuda")
        jit.load(race).run(out)
    torch.cuda.synchronize()
    print(f"{which}: launched (the sanitizer must report it)")
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if len(argv) != 1 or argv[0] not in ("build", "real", "planted-oob", "planted-race"):
        print(__doc__, file=sys.stderr)
        return 2
    what = argv[0]
    if what == "build":
        return build()
    if not torch.cuda.is_available():
        print("no CUDA GPU visible", file=sys.stderr)
        return 2
    return run_real() if what == "real" else run_planted(what)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
