"""Fault isolation: cases (or stress jobs) in a worker process, so a CUDA fault costs that case, not
the sweep (issue 12: a kernel that reads misaligned rows, say, kills its process or leaves the CUDA
context unusable for every later call).

``Worker``: one long-lived spawned process that runs jobs in turn and is replaced after it dies.
``IsolatedRunner``: ``run_sweep``'s ``run=``, sending sglang's cases to a ``Worker`` and running the
others in this process. ``hisparse-bench run`` uses it when a sweep has sglang cases on the GPU.
"""
from __future__ import annotations

import importlib
from typing import Any



FAULT_MARKERS = ("CUDA error", "illegal memory access", "misaligned address", "unspecified launch failure",
                 "device-side assert", "an illegal instruction")


def _resolve(path: str) -> Any:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def _device_broken(device: str) -> str | None:
    """After a case: the CUDA context's sticky error, if a kernel faulted (every later call would fail)."""
    if not device.startswith("cuda"):
        return None
    try:
        import torch  # noqa: PLC0415

        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}"
    return None


def _worker_main(conn: Any, backend_name: str) -> None:
    """The worker: run jobs ``(function path, kwargs)`` sent over ``conn`` until it sends None. A job is
    ``fn(backend, **kwargs) -> (picklable result, text)``; ``text`` naming a CUDA fault, or a sticky CUDA
    error after the job, makes the worker report it and exit (its context is unusable), so the parent
    starts a fresh one for the next job."""
    import signal  # noqa: PLC0415

    from hisparse.bench.backends import get_backend  # noqa: PLC0415

    # Ctrl-C reaches the whole process group: the parent owns the interruption (it keeps the finished
    # cases and closes this worker), so the worker ignores it instead of dying with a traceback of its
    # own in the middle of the parent's "Interrupted." message.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    backend = get_backend(backend_name)
    while True:
        try:
            msg = conn.recv()
        except EOFError:  # the parent is gone (it closed its end, or died)
            return
        if msg is None:
            return
        fn_path, kwargs = msg
        result, text = _resolve(fn_path)(backend, **kwargs)
        broken = _device_broken(backend.device)
        if broken is None and text and any(m in text for m in FAULT_MARKERS):
            broken = text
        try:
            conn.send((result, broken))
        except OSError:  # BrokenPipeError: the parent closed its end mid-job (an interrupted sweep has
            return  # kept its cases and gone); nobody is left to read this result or a traceback
        if broken is not None:
            return


class Worker:
    """One long-lived worker process (spawned: no CUDA state inherited) that runs jobs in turn; after
    it dies (segfault, abort, CUDA fault, no answer within ``timeout_s``) the next job gets a fresh one.
    Every death or fault is kept in ``faults`` as (label, what happened)."""

    def __init__(self, backend_name: str, *, timeout_s: float | None = None) -> None:
        self.backend_name, self.timeout_s = backend_name, timeout_s
        self._proc: Any = None
        self._conn: Any = None
        self.faults: list[tuple[str, str]] = []

    def call(self, label: str, fn_path: str, **kwargs: Any) -> tuple[Any, str | None]:
        """(the job's result, None), or (None, what happened to the worker) when it died in the job.
        A job that answered but left the device broken returns its result and records the fault."""
        if self._proc is None or not self._proc.is_alive():
            self._start()
        reply = None
        try:
            self._conn.send((fn_path, kwargs))
            if self._conn.poll(self.timeout_s):
                reply = self._conn.recv()
        except (EOFError, OSError, BrokenPipeError):
            reply = None
        if reply is not None:
            result, broken = reply
            if broken is not None:
                self.faults.append((label, broken))
                self._stop(wait=True)
            return result, None
        what = self._stop(wait=False)
        self.faults.append((label, what))
        return None, what

    def _start(self) -> None:
        import multiprocessing  # noqa: PLC0415

        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        self._proc = ctx.Process(target=_worker_main, args=(child, self.backend_name), daemon=True,
                                 name="hisparse-worker")
        self._proc.start()
        child.close()  # the parent then sees EOF when the worker dies
        self._conn = parent

    def _stop(self, *, wait: bool) -> str:
        proc, self._proc = self._proc, None
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if proc is None:
            return "was gone"
        proc.join(5 if wait else 1)
        if proc.is_alive():
            proc.kill()  # our own worker, by its handle
            proc.join(5)
            return f"did not answer within {self.timeout_s} s (killed)"
        code = proc.exitcode
        return f"died of signal {-code}" if code is not None and code < 0 else f"died (exit code {code})"

    def close(self) -> None:
        if self._proc is not None and self._proc.is_alive() and self._conn is not None:
            try:
                self._conn.send(None)
            except OSError:
                pass
        if self._proc is not None:
            self._stop(wait=True)

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def run_case_job(backend: Any, *, params: dict, timing: dict, floors: Any,
                 run_path: str = "hisparse.bench.measure:run_case") -> tuple[dict, str | None]:
    """A worker job: ``run_case`` of one case; (its result as a dict, its reason)."""
    from hisparse.bench.case import Case  # noqa: PLC0415

    result = _resolve(run_path)(Case.from_dict(params, timing), backend, floors=floors)
    return result.to_dict(), result.reason


class IsolatedRunner:
    """``run_sweep``'s ``run=``: cases of ``isolate`` implementations (default: sglang's) run in a
    ``Worker``, the others in this process. A case whose worker died fails with what happened (no
    time); the sweep goes on in a fresh worker."""

    def __init__(self, backend_name: str, *, run_path: str = "hisparse.bench.measure:run_case",
                 isolate: tuple[str, ...] | None = None, timeout_s: float | None = None) -> None:
        from hisparse.bench import implementations as table  # noqa: PLC0415

        self.run_path = run_path
        self.isolate = isolate if isolate is not None else tuple(i.name for i in table.TABLE if i.source == "sglang")
        self.worker = Worker(backend_name, timeout_s=timeout_s)

    @property
    def faults(self) -> list[tuple[str, str]]:
        return self.worker.faults

    def __call__(self, case: Any, backend: Any, *, floors: Any) -> Any:
        if case.implementation not in self.isolate:
            return _resolve(self.run_path)(case, backend, floors=floors)
        from hisparse.bench.measure import case_params  # noqa: PLC0415
        from hisparse.results.model import CaseResult  # noqa: PLC0415

        timing = case.timing.to_dict()
        result, what = self.worker.call(case.case_id, "hisparse.bench.isolate:run_case_job", params=case_params(case),
                                        timing=timing, floors=floors, run_path=self.run_path)
        if result is not None:
            return CaseResult.from_dict(result)
        return CaseResult.failed(case.case_id, case_params(case),
                                 f"worker process {what} in this case (a CUDA fault or crash; isolated: the sweep "
                                 "went on in a fresh worker)",
                                 timing={k: v for k, v in timing.items() if k != "check_calls"})

    def close(self) -> None:
        self.worker.close()

    def __enter__(self) -> "IsolatedRunner":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
