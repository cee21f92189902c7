"""The gather floor's row lists (hisparse/bench/floors.py gather_calls) on CPU: grouped per
(host, destination) pair, in host-address order, every (host row -> device row) pair kept."""
import pytest
import torch

from hisparse.bench import floors
from hisparse.bench.backends import get_backend
from hisparse.bench.calls import CallRecord, Copy


def _copy(src, dst, host, buf, layer=0):
    return Copy(torch.tensor(src, dtype=torch.int64), torch.tensor(dst, dtype=torch.int32), host, buf, layer)


def test_rows_sorted_by_host_row_with_their_destinations():
    host, buf, other = torch.zeros(100, 8), torch.zeros(10, 8), torch.zeros(10, 8)
    rec = CallRecord(copies=(_copy([70, 5, 33], [0, 1, 2], host, buf), _copy([12, 90], [3, 4], host, buf),
                             _copy([40, 2], [0, 1], host, other, layer=1)), occurrences=7, hits=0)
    (calls,) = floors.gather_calls([rec])
    by_buffer = {id(b): (s.tolist(), d.tolist()) for s, d, h, b in calls}
    # Two steps' copies into one buffer become one sorted list; 70 -> 0 stays 70 -> 0.
    assert by_buffer[id(buf)] == ([5, 12, 33, 70, 90], [1, 3, 2, 0, 4])
    assert by_buffer[id(other)] == ([2, 40], [1, 0])


def test_sorted_floor_moves_the_same_bytes_as_the_swap():
    """The reference backend's floor gather of the sorted lists writes exactly the rows the copies name."""
    host = torch.arange(64 * 8, dtype=torch.int64).reshape(64, 8)
    buf = torch.zeros(6, 8, dtype=torch.int64)
    rec = CallRecord(copies=(_copy([50, 3, 17], [4, 0, 2], host, buf), _copy([9], [5], host, buf)), occurrences=4, hits=0)
    for src, dst, h, b in floors.gather_calls([rec])[0]:
        get_backend("reference").gather_floor(src_rows=src, dst_rows=dst, host_cache=h, device_buffer=b,
                                              item_size_bytes=64)
    for s, d in ((50, 4), (3, 0), (17, 2), (9, 5)):
        assert torch.equal(buf[d], host[s])
    assert buf[1].abs().sum() == 0 and buf[3].abs().sum() == 0


def test_distinct_host_rows_count_a_shared_row_once_and_tell_views_of_one_pool_apart():
    pool = torch.zeros(100, 8)
    a, b = pool[0:50], pool[50:100]  # two layers' host caches: views of one pinned pool
    buf = torch.zeros(10, 8)
    rec = CallRecord(copies=(_copy([1, 2, 3], [0, 1, 2], a, buf), _copy([2, 3, 4], [3, 4, 5], a, buf),
                             _copy([1, 2], [0, 1], b, buf, layer=1)), occurrences=8, hits=0)
    assert rec.total_rows == 8
    assert rec.distinct_host_rows == 6  # pool rows 1, 2, 3, 4 and 51, 52
    aliased = CallRecord(copies=rec.copies[:2] + (_copy([1, 2], [0, 1], pool[0:50], buf, layer=1),),
                         occurrences=8, hits=0)
    assert aliased.distinct_host_rows == 4  # the layer's view is the same rows: 1 and 2 again
    work = floors.work_of([rec, aliased], item_size_bytes=32)
    assert work.bytes_per_call == 8 * 32 and work.host_bytes_per_call == (6 + 4) / 2 * 32


def test_upstream_reads_each_shared_row_once_and_serving_layers_read_their_own():
    """End to end on the reference backend: `upstream`'s 3 requests and 2 shared layers read the same host
    rows (1/9 of the rows copied are distinct), `distinct`'s and `serving`'s never share one."""
    from hisparse.bench.calls import bind
    from hisparse.bench.case import Case, TimingSettings
    from hisparse.bench.workload import make_workload

    timing = TimingSettings(warmup_calls=2, calls_per_graph=3, check_calls=1)
    for workload, params, share in (("upstream", {}, 1 / 9), ("distinct", {}, 1.0),
                                    ("serving", {"context_min": 4096, "context_max": 8192}, 1.0)):
        small = {} if workload == "upstream" else dict(top_k=64, hot_buffer_size=128)
        case = Case("multi_step_planned", workload, params, batch=3, steps=4, shared_layers=2, timing=timing, **small)
        w = make_workload(case, "cpu")
        bound = bind(case.implementation, get_backend("reference"), w, pdl=case.pdl)
        w.reset()
        records = [bound.recorded_call() for _ in range(3)]
        work = floors.work_of(records, case.item_size_bytes)
        assert work.host_bytes_per_call == pytest.approx(share * work.bytes_per_call), workload
