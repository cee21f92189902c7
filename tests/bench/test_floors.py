"""The gather floor's row lists (hisparse/bench/floors.py gather_calls) on CPU: grouped per
(host, destination) pair, in host-address order, every (host row -> device row) pair kept."""
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
