"""Swap kernels of the regression set, one asv class per implementation.

Generated from configs/ci.yaml (``track: true``): the axes and their values are the regression set's
(``hisparse/track/asv.py`` defines them, shared with the converter that writes asv results from
our own single-process runner). Grid points that are not a case of the set raise
NotImplementedError in setup: asv records them as skipped.

``gpu_time_*`` is our benchmark type (the ``asv_bench_hisparse`` plugin, plugins/asv_bench_hisparse):
the method returns the raw per-replay samples that hisparse.bench.timing measured (CUDA graph of
``calls_per_graph`` calls, L2 flushed, one CUDA-event time per replay), and asv stores them as a
timing result with median, IQR and CI. Workload, kernel build and the correctness check happen in
setup, outside anything timed.
"""
from . import common


class _Swap:
    implementation = ""
    version = common.layout.SUITE_VERSION  # results from asv and from our converter line up
    timeout = common.layout.BENCH_TIMEOUT

    def setup(self, *point):
        case = common.case_at(self.implementation, point)
        if case is None:
            raise NotImplementedError("not a case of the regression set (pruned combination)")
        self.prepared = common.prepare(case.case_id)

    def gpu_time_swap(self, *point):
        return self.prepared.sample_seconds()


for _name, _cls in common.suite().items():
    _class_name = common.layout.class_name(_cls.implementation)
    globals()[_class_name] = type(_class_name, (_Swap,), {
        "implementation": _cls.implementation,
        "param_names": _cls.param_names,
        "params": [list(_cls.values[a]) for a in _cls.param_names],
        "__doc__": f"{_cls.implementation}: {len(_cls.cases)} case(s) of the regression set",
    })
