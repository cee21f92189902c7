"""CPU tests of the host-memory axis (issue 37): the mmap / hugetlb / mbind paths with the CUDA registration
replaced by a fake, NUMA node choice and huge page bookkeeping on fake sysfs trees, the case parameters
(ids, prune, config errors, run order), the new serving positions, and a case whose memory cannot be had
being skipped. The device side (the kernels reading each kind byte-exactly) is tests/bench/test_host_alloc_gpu.py."""
from __future__ import annotations

import gc
from pathlib import Path

import pytest
import torch

from hisparse.bench import host_alloc, host_numa, hugepages
from hisparse.bench.case import Case
from hisparse.bench.config import load_config, parse_config
from hisparse.bench.host_memory import HostMemory
from hisparse.bench.host_sweep import HostSweep
from hisparse.errors import ConfigError, HostAllocationError

REPO = Path(__file__).resolve().parents[2]


class FakeRegistrar:
    """Records what the CUDA registration would have been asked."""

    def __init__(self, fail: bool = False) -> None:
        self.registered: list[tuple[int, int]] = []
        self.unregistered: list[int] = []
        self.fail = fail

    def registrar(self) -> host_alloc.Registrar:
        def register(ptr: int, nbytes: int) -> None:
            if self.fail:
                raise HostAllocationError("cudaHostRegister: fake refusal")
            self.registered.append((ptr, nbytes))

        return host_alloc.Registrar(register, self.unregistered.append)


# ---------------------------------------------------------------------------------------------
# mmap paths


def test_registered_maps_whole_pages_registers_them_and_frees_on_release():
    fake = FakeRegistrar()
    a = host_alloc.map_host(10_000, "registered", registrar=fake.registrar())
    page = host_alloc.BASE_PAGE_BYTES
    assert a.kind == "registered" and a.nbytes == 10_000 and a.tensor.numel() == 10_000
    assert fake.registered == [(a.tensor.data_ptr(), -(-10_000 // page) * page)]
    assert a.info["page_bytes"] == page and a.info["api"] == "mmap+cudaHostRegister"
    a.tensor.fill_(7)  # the memory is ours to write
    assert int(a.tensor.sum()) == 7 * 10_000
    ptr = a.tensor.data_ptr()
    del a
    gc.collect()
    assert fake.unregistered == [ptr]


def test_a_refused_registration_unmaps_and_raises():
    with pytest.raises(HostAllocationError, match="fake refusal"):
        host_alloc.map_host(1 << 20, "registered", registrar=FakeRegistrar(fail=True).registrar())


def test_mmap_flags_name_the_huge_page_size():
    assert host_alloc.mmap_flags(host_alloc.BASE_PAGE_BYTES) & host_alloc.MAP_HUGETLB == 0
    assert host_alloc.mmap_flags(2 << 20) >> host_alloc.MAP_HUGE_SHIFT & 0x3F == 21  # MAP_HUGE_2MB
    assert host_alloc.mmap_flags(1 << 30) >> host_alloc.MAP_HUGE_SHIFT & 0x3F == 30  # MAP_HUGE_1GB


def _free_huge_pages(page_bytes: int) -> int:
    try:
        return int((hugepages.pool_dir(page_bytes) / "free_hugepages").read_text())
    except OSError:
        return 0


@pytest.mark.parametrize("kind", ["hugetlb-2m", "hugetlb-1g"])
def test_hugetlb_without_reserved_pages_is_refused_with_the_pool_numbers(kind):
    page = hugepages.PAGE_BYTES[kind]
    if _free_huge_pages(page) > 0:
        pytest.skip(f"this machine has free {kind} pages: the refusal cannot be provoked")
    with pytest.raises(HostAllocationError) as e:
        host_alloc.map_host(page, kind, registrar=FakeRegistrar().registrar())
    assert f"host_alloc={kind}" in str(e.value) and "huge pages" in str(e.value) and "free" in str(e.value)


def test_mbind_binds_to_an_existing_node_and_names_a_missing_one():
    fake = FakeRegistrar()
    try:
        a = host_alloc.map_host(1 << 20, "registered", node=0, registrar=fake.registrar())
    except HostAllocationError as e:
        pytest.skip(f"no mbind here: {e}")
    a.tensor.fill_(1)  # first touch after the bind
    assert fake.registered
    with pytest.raises(HostAllocationError, match="node 1000"):
        host_alloc.map_host(1 << 20, "registered", node=1000, registrar=fake.registrar())


def test_allocate_names_the_parameter_and_the_choices():
    with pytest.raises(HostAllocationError, match="host_alloc: 'huge' is not allowed; allowed: pinned, registered"):
        host_alloc.allocate(4096, "huge", "cpu")
    with pytest.raises(HostAllocationError, match="host_numa: 'near' is not allowed; allowed: any, local, remote"):
        host_alloc.allocate(4096, "registered", "cpu", numa="near")
    with pytest.raises(HostAllocationError, match="host_numa=local needs a host_alloc that places its pages"):
        host_alloc.allocate(4096, "pinned", "cpu", numa="local")
    for kind in host_alloc.HOST_ALLOCATIONS:  # off CUDA every kind is pageable memory
        assert host_alloc.allocate(4096, kind, "cpu").kind == "pageable"


# ---------------------------------------------------------------------------------------------
# NUMA


def fake_sysfs(root: Path, nodes: str, distances: dict[int, str], gpu_node: int | None) -> Path:
    node_dir = root / "devices/system/node"
    node_dir.mkdir(parents=True)
    (node_dir / "has_memory").write_text(nodes + "\n")
    for n, row in distances.items():
        (node_dir / f"node{n}").mkdir()
        (node_dir / f"node{n}/distance").write_text(row + "\n")
    if gpu_node is not None:
        dev = root / "bus/pci/devices/0000:19:00.0"
        dev.mkdir(parents=True)
        (dev / "numa_node").write_text(f"{gpu_node}\n")
    return root


def test_node_lists_and_bus_ids_read_as_sysfs_writes_them():
    assert host_numa.parse_node_list("0") == (0,)
    assert host_numa.parse_node_list("0,2-3\n") == (0, 2, 3)
    assert host_numa.sysfs_bus_id("00000000:19:00.0") == "0000:19:00.0"


def test_local_and_remote_on_a_four_node_machine(tmp_path):
    root = fake_sysfs(tmp_path, "0-3", {0: "10 12 32 32", 1: "12 10 32 32", 2: "32 32 10 12", 3: "32 32 12 10"}, 2)
    topo = host_numa.read_topology("00000000:19:00.0", root)
    assert topo.gpu_node == 2 and topo.nodes == (0, 1, 2, 3)
    assert host_numa.node_for("any", topo) is None
    assert host_numa.node_for("local", topo) == 2
    assert host_numa.node_for("remote", topo) == 3  # the nearest other node


@pytest.mark.parametrize("placement", ["local", "remote"])
def test_a_one_node_machine_or_an_unplaced_gpu_gives_the_reason(tmp_path, placement):
    one = host_numa.read_topology("00000000:19:00.0", fake_sysfs(tmp_path / "one", "0", {0: "10"}, 0))
    with pytest.raises(HostAllocationError, match="one memory node"):
        host_numa.node_for(placement, one)
    unplaced = host_numa.read_topology("00000000:19:00.0", fake_sysfs(tmp_path / "two", "0-1", {0: "10 20", 1: "20 10"}, -1))
    with pytest.raises(HostAllocationError, match="names no memory node"):
        host_numa.node_for(placement, unplaced)


# ---------------------------------------------------------------------------------------------
# Huge page bookkeeping


def fake_pool(root: Path, page: int, total: int, free: int) -> Path:
    d = hugepages.pool_dir(page, root)
    d.mkdir(parents=True)
    (d / "nr_hugepages").write_text(f"{total}\n")
    (d / "free_hugepages").write_text(f"{free}\n")
    return d


def test_reserve_raises_the_pool_by_the_shortfall_and_release_restores_it(tmp_path):
    d = fake_pool(tmp_path, 2 << 20, total=10, free=4)
    r = hugepages.reserve("hugetlb-2m", 10 << 20, tmp_path)  # 5 pages, 4 free: one more
    assert (r.needed, r.before, r.asked, r.got, r.error) == (5, 10, 11, 11, None) and r.raised
    hugepages.release(r, tmp_path)
    assert (d / "nr_hugepages").read_text().strip() == "10"


def test_reserve_leaves_a_pool_with_enough_free_pages_alone(tmp_path):
    d = fake_pool(tmp_path, 1 << 30, total=8, free=8)
    r = hugepages.reserve("hugetlb-1g", 3 << 30, tmp_path)
    assert (r.asked, r.got, r.raised) == (8, 8, False)
    assert (d / "nr_hugepages").read_text().strip() == "8"


def test_reserve_records_eperm_and_a_missing_pool(tmp_path, monkeypatch):
    fake_pool(tmp_path, 2 << 20, total=0, free=0)

    def refuse(self, *a, **k):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(Path, "write_text", refuse)
    r = hugepages.reserve("hugetlb-2m", 4 << 20, tmp_path)
    assert r.got == 0 and "Operation not permitted" in r.error and not r.raised
    assert "cannot read" in hugepages.reserve("hugetlb-1g", 1 << 30, tmp_path).error
    assert "needs 2 free 2 MiB huge pages, the pool has 0 free of 0" in hugepages.shortfall("hugetlb-2m", 4 << 20, tmp_path)


def test_the_sweep_reserves_at_its_start_and_gives_pages_back_after_their_kind(tmp_path):
    fake_pool(tmp_path, 2 << 20, total=0, free=0)
    fake_pool(tmp_path, 1 << 30, total=0, free=0)
    base = Case("multi_step", "serving", {"context_min": 4096 + 8192 + 64, "context_max": 16384}, batch=2,
                timing={"calls_per_graph": 2, "warmup_calls": 1, "check_calls": 1, "replays": 10})
    cases = [base.with_(host_alloc="hugetlb-1g"), base.with_(host_alloc="hugetlb-2m"), base]
    sweep = HostSweep(cases, "cpu", sysfs=tmp_path)
    info = sweep.start()
    assert set(info["hugepages"]) == {"hugetlb-2m", "hugetlb-1g"}
    assert info["hugepages"]["hugetlb-1g"]["asked"] == 1 and info["hugepages"]["hugetlb-2m"]["asked"] >= 1
    assert sweep.before(cases[0]) and not sweep.before(cases[0])
    assert "hugetlb-1g" in info["allocations"]
    sweep.before(cases[1])  # 1g's cases are done: its pages go back
    assert (hugepages.pool_dir(1 << 30, tmp_path) / "nr_hugepages").read_text().strip() == "0"
    sweep.finish()
    assert (hugepages.pool_dir(2 << 20, tmp_path) / "nr_hugepages").read_text().strip() == "0"


# ---------------------------------------------------------------------------------------------
# The case parameters and the config


def test_default_host_memory_keeps_ids_and_params_and_others_name_themselves():
    c = Case("multi_step", "serving", batch=64)
    assert c.case_id == "multi_step/serving/b64/s4/k2048/h4096/i576/pdl1"
    assert "host_alloc" not in c.to_dict() and "host_numa" not in c.to_dict()
    v = c.with_(host_alloc="hugetlb-2m", host_numa="remote")
    assert v.case_id.endswith("/host_alloc=hugetlb-2m/host_numa=remote")
    assert Case.from_id(v.case_id) == v and Case.from_dict(v.to_dict()) == v
    assert v.baseline().host_memory == HostMemory("hugetlb-2m", "remote")  # the baseline reads the same memory
    assert "pinned takes host_numa=any only" in c.with_(host_numa="local").problems()


def test_a_config_names_the_field_and_the_choices():
    with pytest.raises(ConfigError, match=r"axes.host_alloc\[1\]: str 'huge' is not allowed; allowed: pinned, registered, "
                                          r"hugetlb-2m, hugetlb-1g, vmm"):
        parse_config({"axes": {"host_alloc": ["pinned", "huge"]}})
    with pytest.raises(ConfigError, match="axes.host_numa: str 'near' is not allowed; allowed: any, local, remote"):
        parse_config({"axes": {"host_numa": "near"}})


def test_a_sweep_runs_each_kind_together_in_the_order_named():
    cfg = parse_config({"axes": {"implementation": ["lru_sequential", "multi_step"], "batch": [1, 8],
                                 "host_alloc": ["vmm", "pinned"]}, "workloads": {"distinct": {}}})
    kinds = [c.host_alloc for c in cfg.expand().cases]
    assert kinds == ["vmm"] * 4 + ["pinned"] * 4
    only = cfg.expand(filters=("host_alloc=pinned",)).cases  # the default matches though it is not stored
    assert len(only) == 4 and all(c.host_alloc == "pinned" for c in only)


def test_the_host_alloc_config_lists_its_cases_kind_by_kind():
    cases = load_config(REPO / "configs" / "host-alloc.yaml").expand().cases
    assert 40 <= len(cases) <= 70
    order = list(dict.fromkeys(c.host_memory.label for c in cases))
    assert order[:5] == ["hugetlb-1g", "hugetlb-2m", "pinned", "registered", "vmm"]
    assert {c.param("positions") for c in cases} == {"scattered", "pool", "chunks"}
    assert all(c.batch == 64 and c.implementation in ("lru_sequential", "multi_step") for c in cases)


# ---------------------------------------------------------------------------------------------
# Rows: chunks and pool


def test_chunk_positions_are_page_runs_and_pool_positions_leave_the_region():
    from hisparse.bench.workload import _serving_layout, context_rows

    rows = context_rows("chunks", 256, torch.Generator().manual_seed(1))
    assert sorted(rows.tolist()) == list(range(256))
    runs = rows.view(4, 64)
    assert all(int(r[0]) % 64 == 0 and torch.equal(r - r[0], torch.arange(64)) for r in runs)
    base = dict(context_min=4096 + 8192 + 64, context_max=4096 + 8192 + 64)
    timing = {"calls_per_graph": 2, "warmup_calls": 1, "check_calls": 1, "replays": 10}
    region = Case("multi_step", "serving", {**base, "positions": "consecutive"}, batch=4, timing=timing)
    pool = region.with_(workload_params={**base, "positions": "pool"})
    _, own, n = _serving_layout(region, 7, torch.device("cpu"))
    _, spread, m = _serving_layout(pool, 7, torch.device("cpu"))
    assert n == m and sorted(spread[:, :n // 4].reshape(-1).unique().tolist()) != sorted(own[:, :n // 4].reshape(-1).tolist())
    per_request = n // 4
    assert bool(((spread[0] // per_request) != 0).any())  # request 0 reads rows of other regions


@pytest.mark.parametrize("positions", ["chunks", "pool"])
def test_the_new_positions_run_and_check_on_the_reference_backend(positions):
    from hisparse.bench import measure
    from hisparse.bench.backends import get_backend
    from hisparse.bench.floors import NOT_APPLICABLE

    case = Case("lru_sequential", "serving", {"context_min": 1024 + 2048 + 64, "context_max": 4096,
                                              "positions": positions}, batch=2, top_k=256, hot_buffer_size=1024,
                timing={"calls_per_graph": 2, "warmup_calls": 1, "check_calls": 1, "replays": 10},
                host_alloc="registered")
    r = measure.run_case(case, get_backend("reference"), floors=NOT_APPLICABLE)
    assert r.status == "ok", r.reason


def test_memory_the_machine_cannot_give_skips_the_case_with_the_reason():
    from hisparse.bench import measure
    from hisparse.bench.backends import get_backend
    from hisparse.bench.floors import NOT_APPLICABLE

    def refuse(case, device, **kw):
        raise HostAllocationError("host_alloc=hugetlb-1g: mmap failed (Cannot allocate memory): needs 3 free 1024 MiB "
                                  "huge pages, the pool has 0 free of 0")

    case = Case("multi_step", "distinct", batch=1, host_alloc="hugetlb-1g")
    r = measure.run_case(case, get_backend("reference"), floors=NOT_APPLICABLE, make_workload=refuse)
    assert r.status == "skipped" and "needs 3 free 1024 MiB huge pages" in r.reason


def test_the_vmm_entry_compiles_without_a_gpu_or_libcuda(tmp_path, monkeypatch):
    from hisparse import env
    from hisparse.bench import host_vmm
    from hisparse.kernels import jit

    if env.CUDA_HOME is None:
        pytest.skip("no CUDA toolkit here")
    monkeypatch.setattr(env, "CACHE_DIR", tmp_path)
    for report in jit.build_many(host_vmm.SPECS):
        assert report.path.is_file()
    assert set(host_vmm.SPECS) <= set(__import__("hisparse.bench.implementations", fromlist=["x"]).kernel_specs(
        Case("multi_step", "distinct", host_alloc="vmm")))
