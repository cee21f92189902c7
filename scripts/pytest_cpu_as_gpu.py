"""pytest plugin: run the GPU tests on the CPU with the reference in place of the CUDA swap, to check
that every input the GPU tests build satisfies the content contract (the reference enforces it) when
no GPU is at hand. Not a GPU test: the "kernel" is the reference, so kernel-vs-reference comparisons
are trivially equal; what it catches is a generator or hand-made case the contract rejects.

    PYTHONPATH=scripts python -m pytest -q -m gpu -p pytest_cpu_as_gpu -p no:cacheprovider tests/ \
        | grep ^FAILED | sed 's/ - .*//' | sort > after.txt     # compare with the same before a change

About 158 tests fail for reasons of the simulation alone (CUDA graphs, pinned-memory checks, checks only
the CUDA wrappers make, kernel-only behaviour such as the index rebuild): compare the failing sets
before and after a change, not the count. Used for the top-k contract change of 2026-12-01.
"""
import functools
import torch

torch.cuda.is_available = lambda: True
torch.cuda.synchronize = lambda *a, **k: None
torch.Tensor.cuda = lambda self, *a, **k: self
torch.Tensor.pin_memory = lambda self, *a, **k: self
torch.Tensor.is_pinned = lambda self, *a, **k: True
_orig_empty = torch.empty
def _empty(*a, **k):
    k.pop("pin_memory", None)
    if str(k.get("device", "")) .startswith("cuda"):
        k["device"] = "cpu"
    return _orig_empty(*a, **k)
torch.empty = _empty
for name in ("zeros", "full", "ones", "arange", "tensor", "randint", "randperm", "empty_like", "zeros_like", "full_like"):
    orig = getattr(torch, name)
    def wrap(orig=orig):
        @functools.wraps(orig)
        def f(*a, **k):
            if str(k.get("device", "")).startswith("cuda"):
                k["device"] = "cpu"
            k.pop("pin_memory", None)
            return orig(*a, **k)
        return f
    setattr(torch, name, wrap())
_orig_to = torch.Tensor.to
def _to(self, *a, **k):
    a = tuple("cpu" if (isinstance(x, str) and x.startswith("cuda")) or (isinstance(x, torch.device) and x.type == "cuda") else x for x in a)
    if str(k.get("device", "")).startswith("cuda"):
        k["device"] = "cpu"
    return _orig_to(self, *a, **k)
torch.Tensor.to = _to
_OrigGen = torch.Generator
class _Gen(_OrigGen):
    def __new__(cls, device="cpu"):
        return _OrigGen("cpu")
torch.Generator = _Gen


def pytest_collection_modifyitems(config, items):
    import sys
    for modname in list(sys.modules):
        m = sys.modules[modname]
        if modname.startswith("test_swap_") and modname.endswith("_gpu"):
            ref = getattr(m, "reference")
            def as_kernel(ref=ref, **kw):
                kw.pop("block_size", None); kw.pop("pdl", None); kw.pop("debug", None)  # the reference always checks
                return ref(**kw)
            m.kernel = as_kernel
            if hasattr(m, "DEVICE"):
                m.DEVICE = "cpu"


if __name__ == "__main__":  # a plugin, not a program: --help (or any call) prints how to use it
    print(__doc__)
