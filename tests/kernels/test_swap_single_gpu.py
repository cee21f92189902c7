"""GPU tests of the single-step exact-LRU swap kernel (hisparse/kernels/ops/swap_single.py), bit-exact against
the PyTorch reference (hisparse/kernels/reference/swap_single.py).

Every test builds one workload, runs the kernel on one copy and the reference on an identical copy
(both on the GPU; the reference computes on the CPU and writes back), then requires every tensor of the
call to be equal bit for bit: top_k_device_locs, device_buffer_tokens, lru_slots, device_buffer bytes,
the miss plan, and the read-only inputs (unchanged). A failure names the workload (seed and sizes) and
the first differing entry; rerun one with e.g. ``pytest tests/test_swap_single_gpu.py -k "random and 17-"``.

Run on a GPU machine: ``pytest -q tests/test_swap_single_gpu.py`` (the module builds its kernel
instantiations in parallel first; about 20 s of nvcc on 16 cores when the cache is cold).
"""
from __future__ import annotations

import os
import random
from dataclasses import dataclass, field, replace

import pytest
import torch

from hisparse.errors import InputError
from _topk import within_contract
from _gpu import GPU_ONLY, ITEM_SIZES, capture_allocation

pytestmark = GPU_ONLY

BLOCK_SIZES_TESTED = ((1024, False), (1024, True), (128, True), (256, False), (960, True))


@pytest.fixture(scope="module", autouse=True)
def built_kernels():
    """Compile every instantiation this module uses up front, in parallel (no-op when cached)."""
    from hisparse.kernels import jit
    from hisparse.kernels.ops import swap_single as ops
    from hisparse.kernels.ops.copy_planned import kernel_specs as planned_specs

    specs = [ops.kernel_spec(block_size=b, record_plan=r, flat_copy=f) for b, r in BLOCK_SIZES_TESTED
             for f in (False, True)] + planned_specs()
    specs += [ops.kernel_spec(block_size=b, copy=False) for b, r in BLOCK_SIZES_TESTED if r]
    jit.build_many(specs, jobs=os.cpu_count())


def kernel(**kw):
    from hisparse.kernels.ops.swap_single import swap_single_step

    return swap_single_step(**kw)


def reference(**kw):
    from hisparse.kernels.reference.swap_single import swap_single_step

    kw = {k: v for k, v in kw.items() if k not in ("block_size", "copy_blocks", "debug")}
    return swap_single_step(**kw)


# ------------------------------------------------------------------------------------------------
# Workloads


@dataclass(frozen=True)
class Spec:
    """Sizes and shape options of one random workload (everything else follows from ``seed``)."""

    seed: int
    bs: int
    top_k: int
    hot: int
    item: int
    page_size: int = 1
    num_real: int | None = None  # None = bs (no padding rows)
    long_frac: float = 0.8  # share of real rows with seq_len > HOT
    miss_rate: float = 0.3
    empty_frac: float = 0.05  # hot slots holding -1
    newest_frac: float = 0.5  # long rows whose top-k contains seq_len-1
    big_seq: bool = False  # seq_len > 2**20
    rid_dtype: torch.dtype = torch.int64
    seq_dtype: torch.dtype = torch.int64
    record_plan: bool = True
    strided: bool = False  # top-k / outputs / slot tables / plan as views with a wider row stride
    host_offset: int = 0  # host_cache starts this many bytes into its pinned buffer (misaligned rows)
    buf_dtype: torch.dtype = torch.uint8
    block_size: int = 1024
    copy_blocks: int = 0  # >= 1: the swap records the plan and a copy over this many CTAs follows

    def label(self) -> str:
        return (f"{self.seed}-bs{self.bs}-k{self.top_k}-hot{self.hot}-item{self.item}-page{self.page_size}"
                f"-real{self.num_real if self.num_real is not None else self.bs}"
                f"{'-big' if self.big_seq else ''}{'-strided' if self.strided else ''}"
                f"{'-plan' if self.record_plan else ''}-blk{self.block_size}"
                f"{f'-grid{self.copy_blocks}' if self.copy_blocks else ''}"
                f"-rid{str(self.rid_dtype)[-5:]}-seq{str(self.seq_dtype)[-5:]}-off{self.host_offset}")


@dataclass
class Workload:
    """Initial state on the device (``base``) and the pinned host cache; ``fresh()`` gives a call's
    kwargs on private copies, so the kernel and the reference start from identical state."""

    spec: Spec
    base: dict = field(default_factory=dict)
    host_cache: torch.Tensor | None = None
    paths: list = field(default_factory=list)

    def fresh(self) -> dict:
        s = self.spec
        # clone() keeps the dense base layouts; host_cache_locs is read-only and can be large
        b = {k: v.clone() for k, v in self.base.items() if k != "host_cache_locs"}
        bs, k, hot, page = s.bs, s.top_k, s.hot, s.page_size
        kw = dict(
            top_k_tokens=b["top_k_tokens"][:, 1] if s.strided else b["top_k_tokens"],
            top_k_device_locs=b["top_k_device_locs"][:, 1] if s.strided else b["top_k_device_locs"],
            device_buffer_tokens=b["device_buffer_tokens"][:, : hot + page],
            device_buffer_locs=b["device_buffer_locs"][:, : hot + page],
            host_cache_locs=self.base["host_cache_locs"],  # read-only: shared
            host_cache=self.host_cache,  # read-only: shared
            device_buffer=b["device_buffer"],
            req_pool_indices=b["req_pool_indices"],
            seq_lens=b["seq_lens"],
            lru_slots=b["lru_slots"],
            num_real_reqs=b["num_real_reqs"],
            item_size_bytes=s.item,
            page_size=page,
        )
        if s.record_plan:
            kw.update(miss_src=b["miss_src"][:, : k + 3], miss_dst=b["miss_dst"][:, : k + 3], miss_count=b["miss_count"])
        if s.copy_blocks:
            kw["copy_blocks"] = s.copy_blocks
        assert kw["top_k_tokens"].shape == (bs, k)
        return kw


def _sample_excluding(g: torch.Generator, lo: int, hi: int, n: int, exclude: torch.Tensor) -> torch.Tensor:
    """n distinct ints in [lo, hi) not in ``exclude`` (hi - lo is at least a few times n + |exclude|)."""
    out = torch.empty(0, dtype=torch.int64)
    while out.numel() < n:
        cand = torch.randint(lo, hi, (4 * n + 16,), generator=g)
        cand = torch.unique(cand[~torch.isin(cand, exclude)])
        cand = cand[~torch.isin(cand, out)]
        out = torch.cat([out, cand[torch.randperm(cand.numel(), generator=g)][: n - out.numel()]])
    return out


def make_workload(s: Spec, device: str = "cuda") -> Workload:
    g = torch.Generator().manual_seed(s.seed)
    bs, k, hot, page = s.bs, s.top_k, s.hot, s.page_size
    width = hot + page
    n_real = bs if s.num_real is None else s.num_real
    r = bs + 2  # request slots: two never used
    rids = torch.randperm(r, generator=g)[:bs]  # distinct for all rows (long rows mutate their slot)

    seq_lens = torch.zeros(bs, dtype=torch.int64)
    tokens = torch.full((r, width), -1, dtype=torch.int64)
    top_k = torch.full((bs, k), -1, dtype=torch.int64)
    paths = []
    for b in range(bs):
        if b >= n_real:  # padding: garbage the kernel must never read
            seq_lens[b] = int(torch.randint(0, 1 << 30, (1,), generator=g))
            top_k[b] = torch.randint(-5, 1 << 30, (k,), generator=g)
            rids[b] = 1_000_000 + b
            paths.append("padding")
            continue
        rid = int(rids[b])
        if float(torch.rand(1, generator=g)) < s.long_frac:
            paths.append("long")
            # At least 2K positions below the newest are not resident, so misses are easy to draw.
            base = max((1 << 20) + 7, hot + 2 * k + 1) if s.big_seq else hot + 2 * k + 1
            seq_len = base + int(torch.randint(0, 3 * k + 64, (1,), generator=g))
            seq_lens[b] = seq_len
            newest = seq_len - 1
            # Residents: distinct tokens below the newest, some hot slots empty; sometimes the newest
            # token is resident too (it must still resolve to slot HOT and its hot slot stay evictable).
            res = _sample_excluding(g, 0, newest, hot, torch.tensor([], dtype=torch.int64))
            if float(torch.rand(1, generator=g)) < 0.2:
                res[int(torch.randint(0, hot, (1,), generator=g))] = newest
            empty = torch.rand(hot, generator=g) < s.empty_frac
            res[empty] = -1
            tokens[rid, :hot] = res
            tokens[rid, hot] = newest
            with_newest = float(torch.rand(1, generator=g)) < s.newest_frac
            n_new = 1 if with_newest else 0
            resident = res[(res >= 0) & (res != newest)]
            n_hit = min(int(round((k - n_new) * (1 - s.miss_rate))), resident.numel())
            hits = resident[torch.randperm(resident.numel(), generator=g)[:n_hit]]
            n_miss = k - n_new - n_hit
            misses = _sample_excluding(g, 0, newest, n_miss, torch.cat([res, torch.tensor([newest])]))
            row = torch.cat([hits, misses, torch.tensor([newest] * n_new, dtype=torch.int64)])
            top_k[b] = row[torch.randperm(k, generator=g)]
        else:
            paths.append("fast")
            seq_len = int(torch.randint(1, hot + 1, (1,), generator=g))
            seq_lens[b] = seq_len
            tokens[rid] = torch.randint(-1, 1 << 20, (width,), generator=g)
            # Slot positions (extra page included), 10% padding, within the top-k contract
            # (tests/_topk.py): repeats and entries past a short context become -1.
            row = torch.randint(0, width, (k,), generator=g)
            row[torch.rand(k, generator=g) < 0.1] = -1
            top_k[b] = within_contract(row, seq_len, limit=width)
    max_len = int(seq_lens[:n_real].max()) + 1 if n_real else 1  # padding rows' garbage sizes nothing

    host_rows = 64 + min(2 * bs * k, 4096)  # tokens share host rows at random; 4 MB of bytes at most
    host_cache_locs = torch.randint(0, host_rows, (r, max_len), generator=g)
    for b in range(n_real):
        if paths[b] == "long":  # the newest token is not on the host yet (eager backup is async)
            host_cache_locs[int(rids[b]), int(seq_lens[b]) - 1] = -1
    # Unique device rows for every slot of every request slot, shuffled, plus a few unused rows.
    dev_rows = r * width + 5
    locs = torch.randperm(dev_rows, generator=g)[: r * width].view(r, width)
    lru = torch.stack([torch.randperm(hot, generator=g) for _ in range(r)])

    host_bytes = torch.randint(0, 256, (s.host_offset + host_rows * s.item,), generator=g, dtype=torch.uint8)
    # Pinned for the GPU (the kernel reads it through UVA); plain on the CPU (generator self-checks).
    pinned = torch.empty(host_bytes.numel(), dtype=torch.uint8, pin_memory=device != "cpu")
    pinned.copy_(host_bytes)
    host_cache = _as_dtype(pinned[s.host_offset:], s.buf_dtype)

    dev_gen = torch.Generator(device=device).manual_seed(s.seed)
    device_buffer = _as_dtype(
        torch.randint(0, 256, (dev_rows * s.item,), generator=dev_gen, dtype=torch.uint8, device=device), s.buf_dtype)

    pad = 3 if s.strided else 0
    def wide(t: torch.Tensor, dtype) -> torch.Tensor:  # [rows, cols + pad], the first cols filled
        out = torch.full((t.shape[0], t.shape[1] + pad), -77, dtype=dtype)
        out[:, : t.shape[1]] = t
        return out

    if s.strided:  # [bs, 3, K] with the call's rows at [:, 1]: row stride 3K
        tk = torch.randint(-9, 9, (bs, 3, k), generator=g, dtype=torch.int32)
        tk[:, 1] = top_k.to(torch.int32)
        out = torch.full((bs, 3, k), 4242, dtype=torch.int32)
    else:
        tk = top_k.to(torch.int32)
        out = torch.full((bs, k), 4242, dtype=torch.int32)  # stale: every entry must be rewritten
    base = dict(
        top_k_tokens=tk,
        top_k_device_locs=out,
        device_buffer_tokens=wide(tokens, torch.int32),
        device_buffer_locs=wide(locs, torch.int32),
        host_cache_locs=host_cache_locs,
        req_pool_indices=rids.to(s.rid_dtype),
        seq_lens=seq_lens.to(s.seq_dtype),
        lru_slots=lru.to(torch.int16),
        num_real_reqs=torch.tensor([n_real], dtype=torch.int32),
    )
    if s.record_plan:
        plan_w = k + 3 + (5 if s.strided else 0)
        base.update(miss_src=torch.full((bs + 1, plan_w), -7, dtype=torch.int64),
                    miss_dst=torch.full((bs + 1, plan_w), -7, dtype=torch.int32),
                    miss_count=torch.full((bs + 1,), 123, dtype=torch.int32))
    base = {key: v.to(device) for key, v in base.items()}
    base["device_buffer"] = device_buffer
    return Workload(spec=s, base=base, host_cache=host_cache, paths=paths)


def _as_dtype(flat_u8: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The same bytes as another dtype when the size allows (the kernel addresses bytes either way)."""
    size = torch.empty(0, dtype=dtype).element_size()
    if flat_u8.numel() % size == 0 and flat_u8.data_ptr() % size == 0:
        return flat_u8.view(dtype)
    return flat_u8


# ------------------------------------------------------------------------------------------------
# Comparison


_SAME_SIZE_INT = {2: torch.int16, 4: torch.int32, 8: torch.int64}


def bits(t: torch.Tensor) -> torch.Tensor:
    """Floating tensors as same-size ints: random bytes include NaN patterns, and NaN != NaN."""
    if t.is_floating_point():
        return t.view(_SAME_SIZE_INT[t.element_size()])
    return t


def describe_mismatch(name: str, got: torch.Tensor, want: torch.Tensor) -> str:
    got, want = bits(got), bits(want)
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"{name}: dtype/shape {got.dtype}{tuple(got.shape)} vs {want.dtype}{tuple(want.shape)}"
    g8 = got.contiguous().reshape(-1).view(torch.uint8) if got.dtype != torch.uint8 else got.reshape(-1)
    w8 = want.contiguous().reshape(-1).view(torch.uint8) if want.dtype != torch.uint8 else want.reshape(-1)
    if name == "device_buffer":
        diff = torch.nonzero(g8 != w8).flatten()
        first = int(diff[0])
        return f"device_buffer: {diff.numel()} bytes differ, first at byte {first}"
    diff = torch.nonzero(got != want)
    first = tuple(int(x) for x in diff[0])
    return (f"{name}: {diff.shape[0]} entries differ, first at {first}: kernel {got[first].item()} "
            f"reference {want[first].item()}")


def assert_same(kw_kernel: dict, kw_ref: dict, label: str) -> None:
    problems = []
    for name, got in kw_kernel.items():
        if not isinstance(got, torch.Tensor):
            continue
        want = kw_ref[name]
        if got.dtype != want.dtype or not torch.equal(bits(got), bits(want)):
            problems.append(describe_mismatch(name, got, want))
    assert not problems, f"[{label}] kernel differs from the reference:\n  " + "\n  ".join(problems)


def check_workload(w: Workload, *, debug: bool = False) -> tuple[dict, dict]:
    """Kernel vs reference from the same state; returns (kernel kwargs, reference kwargs) after the call."""
    kk, kr = w.fresh(), w.fresh()
    read_only = ("top_k_tokens", "device_buffer_locs", "req_pool_indices", "seq_lens", "num_real_reqs")
    before = {n: kk[n].clone() for n in read_only}
    kernel(**kk, block_size=w.spec.block_size, debug=debug)
    torch.cuda.synchronize()
    reference(**kr)
    torch.cuda.synchronize()
    rows = "".join(path[0].upper() for path in w.paths)  # L(ong) F(ast) P(adding) per batch row
    assert_same(kk, kr, f"{w.spec.label()} rows={rows} req_pool_indices={kk['req_pool_indices'].tolist()}")
    # Inputs the swap must not touch (the reference leaves them alone, so equality above already
    # covers them against each other; this pins them to their initial values).
    for name in read_only:
        assert torch.equal(kk[name], before[name]), f"[{w.spec.label()}] {name} was modified"
    return kk, kr


# ------------------------------------------------------------------------------------------------
# Random workloads (hundreds, mostly small; a few at production sizes)


def random_specs(count: int, seed0: int) -> list[Spec]:
    rng = random.Random(seed0)
    specs = []
    for i in range(count):
        kind = rng.random()
        if kind < 0.83:
            bs = rng.randint(1, 16)
            k = rng.choice([1, 2, 3, 17, 32, 64, 100, 128, 255, 256])
            hot = rng.choice([k, k + 1, 2 * k + 3, max(k, 97), max(k, 513), max(k, 1000), max(k, 1024)])
        elif kind < 0.95:
            bs = rng.randint(1, 64)
            k = rng.choice([512, 1000, 1024, 2048])
            hot = rng.choice([k, 3000, 4096, 6144, 5000]) if k <= 3000 else rng.choice([4096, 6144])
            hot = max(hot, k)
        else:
            bs = rng.randint(1, 4)
            k = rng.choice([64, 256, 2048])
            hot = max(k, rng.choice([1024, 4096]))
        big = kind >= 0.95
        item = rng.choice(ITEM_SIZES)
        if bs * (hot + 64) * item > (1 << 28):  # keep each buffer under ~256 MiB
            item = rng.choice([4, 100, 512, 576])
        block, plan = rng.choice(BLOCK_SIZES_TESTED)
        specs.append(Spec(
            seed=seed0 * 1000 + i, bs=bs, top_k=k, hot=hot, item=item,
            page_size=rng.choice([1, 1, 1, 4, 64]),
            num_real=bs if rng.random() < 0.6 else rng.randint(0, bs),
            long_frac=rng.choice([1.0, 0.8, 0.5, 0.0]) if not big else 1.0,
            miss_rate=rng.choice([0.0, 0.001, 0.1, 0.3, 0.7, 1.0]),
            empty_frac=rng.choice([0.0, 0.05, 0.5]),
            newest_frac=rng.choice([0.0, 0.5, 1.0]),
            big_seq=big,
            rid_dtype=rng.choice([torch.int32, torch.int64]),
            seq_dtype=rng.choice([torch.int32, torch.int64]),
            record_plan=plan,
            strided=rng.random() < 0.3,
            host_offset=rng.choice([0, 0, 0, 3, 8]),
            buf_dtype=rng.choice([torch.uint8, torch.int32, torch.bfloat16]),
            block_size=block,
            # its own generator, so the specs above are the ones the suite always drew
            copy_blocks=random.Random(seed0 * 1000 + i).choice([0, 0, 1, 7, 132]) if plan else 0,
        ))
    return specs


RANDOM_SPECS = random_specs(240, 1)


@pytest.mark.parametrize("spec", RANDOM_SPECS, ids=[s.label() for s in RANDOM_SPECS])
def test_random_workload_bit_exact(spec):
    check_workload(make_workload(spec))


PRODUCTION_SPECS = [
    Spec(seed=9001, bs=64, top_k=2048, hot=4096, item=576, miss_rate=0.1),
    Spec(seed=9002, bs=64, top_k=2048, hot=6144, item=656, miss_rate=0.2, page_size=64, strided=True),
    Spec(seed=9003, bs=32, top_k=2048, hot=8192, item=1152, miss_rate=1.0, rid_dtype=torch.int32,
         seq_dtype=torch.int32),
    Spec(seed=9004, bs=16, top_k=2048, hot=6144, item=584, miss_rate=0.3, num_real=11, host_offset=8),
    Spec(seed=9005, bs=4, top_k=2048, hot=4096, item=512, big_seq=True, long_frac=1.0, miss_rate=0.5),
    Spec(seed=9006, bs=8, top_k=2048, hot=2048, item=100, miss_rate=1.0, newest_frac=0.0),  # K == HOT, all miss
    Spec(seed=9007, bs=64, top_k=2048, hot=6144, item=4, miss_rate=0.0, newest_frac=1.0),  # hit only
    Spec(seed=9008, bs=2, top_k=8192, hot=32767, item=64, miss_rate=0.4),  # largest shared memory (~200 KiB)
    Spec(seed=9009, bs=3, top_k=4096, hot=30000, item=576, miss_rate=0.9, block_size=128),  # few warps, many misses
    # the copy over the grid after a plan-only swap: one CTA per SM, and a single CTA
    Spec(seed=9010, bs=64, top_k=2048, hot=4096, item=576, miss_rate=0.4, copy_blocks=132),
    Spec(seed=9011, bs=5, top_k=2048, hot=6144, item=656, miss_rate=1.0, page_size=64, strided=True, copy_blocks=1),
]


@pytest.mark.parametrize("spec", PRODUCTION_SPECS, ids=[s.label() for s in PRODUCTION_SPECS])
def test_production_size_bit_exact(spec):
    check_workload(make_workload(spec))


def test_debug_mode_runs_the_contract_and_matches():
    check_workload(make_workload(Spec(seed=5, bs=8, top_k=64, hot=200, item=576, num_real=6)), debug=True)


# ------------------------------------------------------------------------------------------------
# Hand-checked examples (docs/semantics.md §2.4) and the single-step cases of §6.2.
# HOT=4, lru=[0,1,2,3], slot tokens [1,4,2,5], slot rows [9,7,3,5], newest-token row 11; float32
# items of 32 B as upstream's test. Request slot r: host row of token t is 32r+t, device rows +16r.

HOT, ITEM = 4, 32


class World:
    def __init__(self, num_req_slots: int = 1, page_size: int = 1, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        r = num_req_slots
        extra = list(range(12, 12 + page_size - 1))
        self.page = page_size
        self.tokens = torch.tensor([[1, 4, 2, 5, 7] + [-1] * (page_size - 1)] * r, dtype=torch.int32).cuda()
        self.locs = (torch.tensor([[9, 7, 3, 5, 11] + extra] * r, dtype=torch.int32)
                     + 16 * torch.arange(r).view(r, 1).int()).cuda()
        self.lru = torch.tensor([[0, 1, 2, 3]] * r, dtype=torch.int16).cuda()
        self.hcl = (torch.arange(32).view(1, 32) + 32 * torch.arange(r).view(r, 1)).to(torch.int64).cuda()
        self.host = torch.randn(32 * r, ITEM // 4, generator=g).pin_memory()
        self.dev = torch.randn(16 * r, ITEM // 4, generator=g).cuda()

    def kwargs(self, queries, seq_lens, rids=None, num_real=None, plan=False, idx_dtype=torch.int64,
               seq_dtype=torch.int64):
        q = torch.tensor(queries, dtype=torch.int32)
        bs, k = q.shape
        kw = dict(
            top_k_tokens=q.cuda(), device_buffer_tokens=self.tokens, host_cache_locs=self.hcl,
            device_buffer_locs=self.locs, host_cache=self.host, device_buffer=self.dev,
            top_k_device_locs=torch.full((bs, k), 999, dtype=torch.int32).cuda(),
            req_pool_indices=torch.tensor(rids if rids is not None else list(range(bs)), dtype=idx_dtype).cuda(),
            seq_lens=torch.tensor(seq_lens, dtype=seq_dtype).cuda(),
            lru_slots=self.lru,
            num_real_reqs=torch.tensor([bs if num_real is None else num_real], dtype=torch.int32).cuda(),
            item_size_bytes=ITEM, page_size=self.page,
        )
        if plan:
            kw.update(miss_src=torch.full((bs, k), -9, dtype=torch.int64).cuda(),
                      miss_dst=torch.full((bs, k), -9, dtype=torch.int32).cuda(),
                      miss_count=torch.full((bs,), 123, dtype=torch.int32).cuda())
        return kw

    def tensors(self):
        return dict(tokens=self.tokens, locs=self.locs, lru=self.lru, hcl=self.hcl, dev=self.dev)

    def clone(self) -> "World":
        other = object.__new__(World)
        other.page = self.page
        other.host = self.host
        for name, t in self.tensors().items():
            setattr(other, name, t.clone())
        return other


def call_both(world: World, queries, seq_lens, **opts) -> dict:
    """Run the kernel on ``world`` and the reference on a clone; require identical results."""
    twin = world.clone()
    kk = world.kwargs(queries, seq_lens, **opts)
    kr = twin.kwargs(queries, seq_lens, **opts)
    kernel(**kk)
    reference(**kr)
    torch.cuda.synchronize()
    label = f"queries={queries} seq_lens={seq_lens} {opts}"
    assert_same(kk, kr, label)
    for name, t in world.tensors().items():
        assert torch.equal(bits(t), bits(twin.tensors()[name])), f"[{label}] {name} differs from the reference"
    return kk


def row(t: torch.Tensor, r: int) -> list[float]:
    return t[r].tolist()


def test_example_hits_and_newest_token_move_to_mru():
    w = World()
    dev_before = w.dev.clone()
    kw = call_both(w, [[4, 2, 7]], [8], plan=True)
    assert kw["top_k_device_locs"].tolist() == [[7, 3, 11]]
    assert w.lru.tolist() == [[0, 3, 1, 2]]
    assert w.tokens[0, :HOT].tolist() == [1, 4, 2, 5]
    assert torch.equal(w.dev, dev_before)
    assert kw["miss_count"].tolist() == [0]


def test_example_follow_up_miss_evicts_the_updated_lru_head():
    w = World()
    call_both(w, [[4, 2, 7]], [8])
    kw = call_both(w, [[6]], [8], plan=True)
    assert kw["top_k_device_locs"].tolist() == [[9]]
    assert w.tokens[0, :HOT].tolist() == [6, 4, 2, 5]
    assert w.lru.tolist() == [[3, 1, 2, 0]]
    assert row(w.dev, 9) == row(w.host, 6)
    assert (kw["miss_src"][0, :1].tolist(), kw["miss_dst"][0, :1].tolist(), kw["miss_count"].tolist()) == ([6], [9], [1])


def test_example_batched_long_fast_and_padding_rows():
    w = World(num_req_slots=2)
    rid1 = (w.tokens[1].clone(), w.lru[1].clone())
    kw = call_both(w, [[4, 6, 7], [2, 0, -1], [1, 2, 3]], [8, 3, 50], rids=[0, 1, 77], num_real=2, plan=True)
    assert kw["top_k_device_locs"].tolist() == [[7, 9, 11], [19, 25, -1], [-1, -1, -1]]
    assert w.lru[0].tolist() == [2, 3, 0, 1]
    assert w.tokens[0, :HOT].tolist() == [6, 4, 2, 5]
    assert torch.equal(w.tokens[1], rid1[0]) and torch.equal(w.lru[1], rid1[1])
    assert kw["miss_count"].tolist() == [1, 0, 0]
    assert row(w.dev, 9) == row(w.host, 6)


@pytest.mark.parametrize("seq_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("idx_dtype", [torch.int32, torch.int64])
def test_fast_path_indexes_slots_directly_and_mutates_nothing(seq_dtype, idx_dtype):
    w = World()
    snap = {n: t.clone() for n, t in w.tensors().items()}
    kw = call_both(w, [[0, 3, 1]], [4], idx_dtype=idx_dtype, seq_dtype=seq_dtype, plan=True)
    assert kw["top_k_device_locs"].tolist() == [[9, 5, 7]]
    assert kw["miss_count"].tolist() == [0]
    assert all(torch.equal(t, snap[n]) for n, t in w.tensors().items())


def test_fast_path_overwrites_stale_output_beyond_seq_len_and_for_minus_one():
    w = World()
    kw = call_both(w, [[1, -1, -1, -1]], [2])  # seq_len 2 < top_k 4: the contract pads from index 2 on
    assert kw["top_k_device_locs"].tolist() == [[7, -1, -1, -1]]


def test_all_miss_copies_every_slot_and_keeps_lru_order():
    w = World()
    kw = call_both(w, [[20, 21, 22, 23]], [30], plan=True)
    assert kw["top_k_device_locs"].tolist() == [[9, 7, 3, 5]]
    assert w.lru.tolist() == [[0, 1, 2, 3]]
    assert w.tokens[0, :HOT].tolist() == [20, 21, 22, 23]
    for t, loc in zip([20, 21, 22, 23], [9, 7, 3, 5]):
        assert row(w.dev, loc) == row(w.host, t)
    assert kw["miss_count"].tolist() == [4]


def test_newest_token_resident_in_a_hot_slot_still_resolves_to_the_extra_page():
    w = World()
    # seq_len 5: newest token 4, which slot 1 also holds: token 4 -> row 11 and slot 1 stays evictable;
    # token 0 misses and takes the LRU head, slot 0.
    kw = call_both(w, [[4, 0]], [5])
    assert kw["top_k_device_locs"].tolist() == [[11, 9]]
    assert w.lru.tolist() == [[1, 2, 3, 0]]


def test_empty_hot_slots_are_evictable_and_taken_in_lru_order():
    w = World()
    w.tokens[0, 2] = -1
    w.lru[0] = torch.tensor([2, 0, 1, 3], dtype=torch.int16)
    kw = call_both(w, [[30, 5]], [40])
    assert kw["top_k_device_locs"].tolist() == [[3, 5]]  # 30 takes empty slot 2 (LRU head); 5 hits slot 3
    assert w.lru.tolist() == [[0, 1, 2, 3]]


def test_speculative_extra_page_and_page_size():
    w = World(page_size=4)
    kw = call_both(w, [[6, 4, 2]], [7], plan=True)  # 6 is the newest (extra page row 11)
    assert kw["top_k_device_locs"].tolist() == [[11, 7, 3]]
    kw = call_both(w, [[5, 6, 7]], [4])  # fast path: position == slot, extra-page slots included
    assert kw["top_k_device_locs"].tolist() == [[12, 13, 14]]


def test_padding_rows_never_read_their_request_slot():
    w = World(num_req_slots=1)
    before = {n: t.clone() for n, t in w.tensors().items()}
    kw = call_both(w, [[4, 2], [1, 2]], [8, 9], rids=[0, 2_000_000_000], num_real=1, plan=True)
    assert kw["top_k_device_locs"][1].tolist() == [-1, -1]
    assert kw["miss_count"].tolist() == [0, 0]
    assert not torch.equal(w.lru, before["lru"])  # row 0 did run


def test_zero_real_rows_write_only_minus_one_and_zero_counts():
    w = World()
    before = {n: t.clone() for n, t in w.tensors().items()}
    kw = call_both(w, [[4, 2, 7]], [8], num_real=0, plan=True)
    assert kw["top_k_device_locs"].tolist() == [[-1, -1, -1]]
    assert kw["miss_count"].tolist() == [0]
    assert all(torch.equal(t, before[n]) for n, t in w.tensors().items())


def test_seq_len_above_2_pow_20_round_trips_tokens():
    s = Spec(seed=77, bs=2, top_k=256, hot=512, item=576, big_seq=True, long_frac=1.0, miss_rate=0.6)
    w = make_workload(s)
    kk, _ = check_workload(w)
    # A second identical call from the post-call state hits everything but nothing new is loaded.
    w2 = replace_base(w, kk)
    kk2, _ = check_workload(w2)
    assert int(kk2["miss_count"][: s.bs].sum()) == 0


def replace_base(w: Workload, kw: dict) -> Workload:
    """A workload whose initial state is ``kw``'s post-call state (same top-k)."""
    base = dict(w.base)
    for name in ("device_buffer_tokens", "device_buffer_locs", "lru_slots", "device_buffer"):
        src = kw[name]
        if name in ("device_buffer_tokens", "device_buffer_locs"):
            full = base[name].clone()
            full[:, : src.shape[1]] = src
            base[name] = full
        else:
            base[name] = src.clone()
    return Workload(spec=w.spec, base=base, host_cache=w.host_cache, paths=w.paths)


def test_consecutive_calls_stay_bit_exact():
    """Ten calls in a row on evolving state (the LRU order and slot contents feed the next call)."""
    s = Spec(seed=31, bs=6, top_k=128, hot=300, item=656, num_real=5, miss_rate=0.3)
    w = make_workload(s)
    kk, kr = w.fresh(), w.fresh()
    g = torch.Generator().manual_seed(3)
    for step in range(10):
        kernel(**kk)
        reference(**kr)
        torch.cuda.synchronize()
        assert_same(kk, kr, f"{s.label()} step {step}")
        # Next call: rotate half of each long row's top-k to fresh tokens (unique, below the newest).
        tk = kk["top_k_tokens"].cpu().to(torch.int64)
        seq = kk["seq_lens"].cpu().to(torch.int64)
        for b in range(s.num_real):
            if w.paths[b] != "long":
                continue
            keep = tk[b][torch.randperm(s.top_k, generator=g)[: s.top_k // 2]]
            keep = keep[keep != seq[b] - 1]
            new = _sample_excluding(g, 0, int(seq[b]) - 1, s.top_k - keep.numel(), keep)
            tk[b] = torch.cat([keep, new])
        kk["top_k_tokens"].copy_(tk.to(torch.int32))
        kr["top_k_tokens"].copy_(tk.to(torch.int32))


# ------------------------------------------------------------------------------------------------
# CUDA graphs: capture + replay gives the eager result; nothing is allocated per call.




@pytest.mark.parametrize("record_plan,copy_blocks", [(False, 0), (True, 0), (True, 9)])
def test_cuda_graph_capture_and_replay_match_eager(record_plan, copy_blocks):
    s = Spec(seed=404, bs=12, top_k=512, hot=1500, item=576, num_real=10, record_plan=record_plan, strided=True,
             copy_blocks=copy_blocks)
    w = make_workload(s)

    # Eager: two consecutive calls (the second with another top-k on the evolved state).
    eager = w.fresh()
    kernel(**eager)
    top_k_2 = _second_top_k(eager, w)
    eager["top_k_tokens"].copy_(top_k_2)
    kernel(**eager)
    torch.cuda.synchronize()

    # Graph: the same two calls captured once (warmed up first so the module is loaded).
    warm = w.fresh()
    kernel(**warm)
    torch.cuda.synchronize()
    graph_kw = w.fresh()
    first_top_k = graph_kw["top_k_tokens"].clone()
    initial = {n: v.clone() for n, v in graph_kw.items() if isinstance(v, torch.Tensor) and v.device.type == "cuda"}

    def two_calls():
        graph_kw["top_k_tokens"].copy_(first_top_k)
        kernel(**graph_kw)
        graph_kw["top_k_tokens"].copy_(top_k_2)
        kernel(**graph_kw)

    allocated, g = capture_allocation(two_calls)
    assert allocated == 0, f"the captured swap allocated {allocated} B of device memory"
    for replay in range(3):
        for n, v in initial.items():  # restore the initial state in place (the graph holds these addresses)
            graph_kw[n].copy_(v)
        g.replay()
        torch.cuda.synchronize()
        assert_same(graph_kw, eager, f"{s.label()} graph replay {replay}")


def _second_top_k(kw: dict, w: Workload) -> torch.Tensor:
    """Next call's top-k: long rows swap half their tokens for unseen ones; other rows unchanged."""
    g = torch.Generator().manual_seed(w.spec.seed + 1)
    tk = kw["top_k_tokens"].cpu().to(torch.int64)
    seq = kw["seq_lens"].cpu().to(torch.int64)
    k = tk.shape[1]
    for b, path in enumerate(w.paths):
        if path != "long":
            continue
        keep = tk[b, : k // 2]
        keep = keep[keep != seq[b] - 1]
        tk[b] = torch.cat([keep, _sample_excluding(g, 0, int(seq[b]) - 1, k - keep.numel(), tk[b])])
    return tk.to(torch.int32).cuda()


def test_eager_call_allocates_nothing():
    s = Spec(seed=8, bs=4, top_k=64, hot=128, item=100)
    w = make_workload(s)
    kw = w.fresh()
    kernel(**kw)  # first call loads the module
    torch.cuda.synchronize()
    kw = w.fresh()
    allocated = torch.cuda.memory_allocated()
    kernel(**kw)
    assert torch.cuda.memory_allocated() == allocated


# ------------------------------------------------------------------------------------------------
# Shared-index layers: the recorded plan replayed by copy_planned reproduces the swap's copies.


def test_recorded_plan_replays_into_a_shared_layer():
    from hisparse.kernels.ops.copy_planned import copy_planned
    from hisparse.kernels.reference.bytes import as_rows

    s = Spec(seed=606, bs=10, top_k=256, hot=700, item=656, num_real=8, miss_rate=0.5)
    w = make_workload(s)
    kw = w.fresh()
    kernel(**kw)
    other_layer = torch.randint(0, 256, kw["device_buffer"].reshape(-1).view(torch.uint8).shape,
                                dtype=torch.uint8, device="cuda")
    copy_planned(miss_src=kw["miss_src"], miss_dst=kw["miss_dst"], miss_count=kw["miss_count"],
                 num_real_reqs=kw["num_real_reqs"], host_cache=w.host_cache, device_buffer=other_layer,
                 item_size_bytes=s.item)
    torch.cuda.synchronize()
    n = int(kw["miss_count"][: s.bs].sum())
    assert n > 0
    counts = kw["miss_count"][: s.num_real].cpu()
    dst = torch.cat([kw["miss_dst"][b, : int(c)].cpu() for b, c in enumerate(counts)]).to(torch.int64)
    primary = as_rows(kw["device_buffer"], s.item)
    shared = as_rows(other_layer, s.item)
    assert torch.equal(primary[dst.cuda()], shared[dst.cuda()])


# ------------------------------------------------------------------------------------------------
# Input errors: raised before any launch, naming the argument.


def test_rejects_pageable_host_cache():
    s = Spec(seed=1, bs=2, top_k=8, hot=16, item=32)
    w = make_workload(s)
    kw = w.fresh()
    kw["host_cache"] = w.host_cache.clone()  # a plain (pageable) CPU tensor
    assert not kw["host_cache"].is_pinned()
    with pytest.raises(InputError, match="host_cache"):
        kernel(**kw)


def test_rejects_shared_memory_beyond_the_device_limit():
    from hisparse.kernels.ops.swap_single import max_shared_memory_per_block, swap_single_smem_bytes

    k = hot = 16384
    assert swap_single_smem_bytes(k, hot) > max_shared_memory_per_block(torch.device("cuda"))
    s = Spec(seed=2, bs=1, top_k=8, hot=16, item=4)
    kw = make_workload(s).fresh()
    dev = torch.device("cuda")
    kw.update(
        top_k_tokens=torch.zeros((1, k), dtype=torch.int32, device=dev),
        top_k_device_locs=torch.zeros((1, k), dtype=torch.int32, device=dev),
        lru_slots=torch.zeros((kw["lru_slots"].shape[0], hot), dtype=torch.int16, device=dev),
        device_buffer_tokens=torch.zeros((kw["lru_slots"].shape[0], hot + 1), dtype=torch.int32, device=dev),
        device_buffer_locs=torch.zeros((kw["lru_slots"].shape[0], hot + 1), dtype=torch.int32, device=dev),
    )
    kw.update(miss_src=None, miss_dst=None, miss_count=None)
    with pytest.raises(InputError, match="top_k_tokens, lru_slots"):
        kernel(**kw)


def test_rejects_unknown_block_size():
    kw = make_workload(Spec(seed=3, bs=1, top_k=4, hot=8, item=4)).fresh()
    with pytest.raises(InputError, match="block_size"):
        kernel(**kw, block_size=100)


def test_debug_mode_rejects_a_contract_violation():
    s = Spec(seed=4, bs=2, top_k=16, hot=32, item=4, long_frac=1.0)
    kw = make_workload(s).fresh()
    kw["top_k_tokens"][0, 1] = kw["top_k_tokens"][0, 0]  # a repeated token in a long row
    with pytest.raises(InputError, match="top_k_tokens"):
        kernel(**kw, debug=True)


# ------------------------------------------------------------------------------------------------
# Device values outside the contract (hardened in 3803334): without debug=True the
# kernel cannot see them, and must still never touch memory outside its tensors.


def test_out_of_contract_device_values_never_touch_memory_outside_the_tensors():
    s = Spec(seed=77, bs=6, top_k=64, hot=128, item=576, long_frac=1.0, miss_rate=0.5, empty_frac=0.0)
    w = make_workload(s)
    assert w.paths == ["long"] * 6
    kk, kr = w.fresh(), w.fresh()
    rids = kk["req_pool_indices"].cpu().tolist()
    num_slots, hot = kk["lru_slots"].shape
    locs = kk["host_cache_locs"].clone()
    kk["host_cache_locs"] = locs

    def misses_of(b: int) -> list[int]:
        rid = rids[b]
        resident = set(kk["device_buffer_tokens"][rid, :hot].cpu().tolist())
        newest = int(kk["seq_lens"][b]) - 1
        return [j for j, t in enumerate(kk["top_k_tokens"][b].cpu().tolist()) if t not in resident and t != newest]

    kk["req_pool_indices"][0] = num_slots + 5  # row 0: a request slot outside the pool
    kk["lru_slots"][rids[1], 3], kk["lru_slots"][rids[1], 9] = -3, hot + 7  # row 1: LRU entries that are not slots
    m2 = misses_of(2)  # row 2: misses whose host rows are -1 or past the host cache
    t2 = kk["top_k_tokens"][2, m2[:2]].to(torch.int64)
    locs[rids[2], t2[0]], locs[rids[2], t2[1]] = -1, 1 << 40
    for j in range(4):  # row 3: victim rows outside the device buffer
        kk["device_buffer_locs"][rids[3], int(kk["lru_slots"][rids[3], j])] = (1 << 30) if j % 2 else -5
    kk["top_k_tokens"][4, misses_of(4)[0]] = locs.shape[1] + 5  # row 4: a missed token past host_cache_locs

    guard = 8 * s.item
    n = kk["device_buffer"].numel()
    backing = torch.randint(0, 256, (guard + n + guard,), dtype=torch.uint8, device="cuda")
    backing[guard: guard + n].copy_(kk["device_buffer"])
    kk["device_buffer"] = backing[guard: guard + n]
    before = backing.clone()

    kernel(**kk)
    torch.cuda.synchronize()  # a fault would surface here
    assert torch.equal(backing[:guard], before[:guard]) and torch.equal(backing[-guard:], before[-guard:])

    out, cnt, src = kk["top_k_device_locs"].cpu(), kk["miss_count"].cpu(), kk["miss_src"].cpu()
    assert bool((out[0] == -1).all()) and int(cnt[0]) == 0
    assert -1 in src[2, : int(cnt[2])].tolist() and (1 << 40) in src[2, : int(cnt[2])].tolist()
    assert -1 in src[4, : int(cnt[4])].tolist()
    # Row 5 is untouched by the corruption: bit-exact with the reference on the clean state.
    reference(**kr)
    rid5 = rids[5]
    assert torch.equal(out[5], kr["top_k_device_locs"][5].cpu())
    assert torch.equal(kk["lru_slots"][rid5], kr["lru_slots"][rid5])
    assert torch.equal(kk["device_buffer_tokens"][rid5], kr["device_buffer_tokens"][rid5])
    rows5 = kk["device_buffer_locs"][rid5, : hot + s.page_size].to(torch.int64)
    item_rows = lambda buf: buf.reshape(-1).view(torch.uint8).view(-1, s.item)  # noqa: E731
    assert torch.equal(item_rows(kk["device_buffer"])[rows5], item_rows(kr["device_buffer"])[rows5])

    # The recorded plan, -1 and out-of-range rows included, replays without writing outside the buffer.
    from hisparse.kernels.ops.copy_planned import copy_planned

    layer = torch.zeros(guard + n + guard, dtype=torch.uint8, device="cuda")
    copy_planned(miss_src=kk["miss_src"], miss_dst=kk["miss_dst"], miss_count=kk["miss_count"],
                 num_real_reqs=kk["num_real_reqs"], host_cache=w.host_cache, device_buffer=layer[guard: guard + n],
                 item_size_bytes=s.item)
    torch.cuda.synchronize()
    assert not bool(layer[:guard].any()) and not bool(layer[-guard:].any())
