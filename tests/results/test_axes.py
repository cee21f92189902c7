"""The readers of hisparse/results/axes.py on stored params, and the file-format fact behind two of them:
a case stores host_alloc / host_numa only when they are not the harness's defaults."""
from __future__ import annotations

from hisparse.bench.case import Case
from hisparse.bench.host_memory import DEFAULT_HOST_ALLOCATION, DEFAULT_HOST_NUMA
from hisparse.results import axes


def test_an_absent_host_memory_key_reads_as_the_harness_default():
    # If a default in hisparse/bench/host_memory.py changes, every file already written still means
    # pinned / any where the key is absent: the harness must then store the key, and this fails first.
    assert (axes.HOST_ALLOC_WHEN_ABSENT, axes.HOST_NUMA_WHEN_ABSENT) == (DEFAULT_HOST_ALLOCATION, DEFAULT_HOST_NUMA)
    assert axes.host_alloc({}) == "pinned" and axes.host_numa(None) == "any"
    assert axes.host_alloc({"host_alloc": "hugetlb-2m"}) == "hugetlb-2m"
    assert axes.host_numa({"host_numa": "remote"}) == "remote"


def test_stored_params_omit_the_default_host_memory_and_keep_the_rest():
    default = Case(implementation="multi_step", workload="serving", batch=2)
    moved = Case(implementation="multi_step", workload="serving", batch=2, host_alloc="vmm", host_numa="local")
    assert "host_alloc" not in default.to_dict() and "host_numa" not in default.to_dict()
    assert (axes.host_alloc(default.to_dict()), axes.host_numa(default.to_dict())) == ("pinned", "any")
    assert (axes.host_alloc(moved.to_dict()), axes.host_numa(moved.to_dict())) == ("vmm", "local")


def test_layers_and_regime_read_absent_or_bad_values_as_warm():
    assert axes.layers(None) == 1 and axes.regime({}) == "warm"
    assert axes.layers({"workload_params": {"layers": "x"}}) == 1
    assert axes.regime({"workload_params": {"layers": 61}}) == "decode L=61"
