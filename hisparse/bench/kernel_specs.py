"""Which kernel instantiations a benchmark case needs: implementation name -> spec factory.

A factory takes a case (``hisparse.bench.case.Case`` or anything with the same attributes) and returns the
``KernelSpec`` list that implementation compiles for it (a pure-PyTorch implementation returns none).
``hisparse-bench build`` compiles the union over a config's cases before anything is timed.

The built-in factories combine the ops an implementation calls (``IMPLEMENTATION_OPS``); each op's
wrapper ``hisparse/kernels/ops/<op>.py`` provides ``kernel_specs(case)`` (or ``kernel_spec(case)`` for one spec).
An op wrapper that does not exist yet is skipped and noted in ``MISSING``; any other import error
propagates (a broken wrapper must not look like "no kernel"). ``register`` adds or replaces a factory.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from hisparse.kernels.jit import KernelSpec

SpecFactory = Callable[[Any], "list[KernelSpec]"]

# implementation (a case's `implementation`, see hisparse/bench/calls.py) -> the ops its calls
# launch. gather_floor is the in-run floor measured next to every case on a GPU.
IMPLEMENTATION_OPS: dict[str, tuple[str, ...]] = {
    "lru_sequential": ("swap_single", "gather_floor"),
    "multi_step": ("swap_multi", "gather_floor"),
    "multi_step_planned": ("swap_multi", "copy_planned", "gather_floor"),
    "lru_sequential_planned": ("swap_single", "copy_planned", "gather_floor"),
}
# Implementations that never compile anything (the PyTorch reference backend).
NO_KERNEL: set[str] = {"reference", "torch"}
# Attributes of a case that name its implementation, first match wins.
_IMPL_ATTRS = ("implementation", "impl")

KERNEL_SPECS: dict[str, SpecFactory] = {}
MISSING: dict[str, str] = {}  # implementation -> which of its ops have no factory yet, and why


def register(impl: str, factory: SpecFactory) -> None:
    """Add or replace the factory of ``impl`` (it then lists everything ``impl`` needs)."""
    KERNEL_SPECS[impl] = factory
    MISSING.pop(impl, None)


def _op_factory(op: str) -> tuple[SpecFactory | None, str | None]:
    """(factory, None) for hisparse.kernels.ops.<op>, or (None, why not)."""
    mod_name = f"hisparse.kernels.ops.{op}"
    try:
        module = importlib.import_module(mod_name)
    except ModuleNotFoundError as e:
        if e.name != mod_name:  # the wrapper exists but one of its imports is missing: a real error
            raise
        return None, f"{mod_name} does not exist yet"
    plural = getattr(module, "kernel_specs", None)
    if callable(plural):
        return (lambda case: list(plural(case))), None
    single = getattr(module, "kernel_spec", None)
    if callable(single):
        return (lambda case: [single(case)]), None
    return None, f"{mod_name} defines neither kernel_specs(case) nor kernel_spec(case)"


def _combine(factories: list[SpecFactory]) -> SpecFactory:
    def factory(case: Any) -> list[KernelSpec]:
        return [spec for f in factories for spec in f(case)]

    return factory


def _load_builtins() -> None:
    for impl, ops in IMPLEMENTATION_OPS.items():
        if impl in KERNEL_SPECS:
            continue
        found, why = [], []
        for op in ops:
            factory, reason = _op_factory(op)
            if factory is None:
                why.append(reason)
            else:
                found.append(factory)
        if found:
            KERNEL_SPECS[impl] = _combine(found)
        if why:
            MISSING[impl] = "; ".join(why)


def case_impl(case: Any) -> str:
    for attr in _IMPL_ATTRS:
        value = getattr(case, attr, None)
        if isinstance(value, str) and value:
            return value
    raise TypeError(f"case {case!r} names no implementation (expected one of the attributes {_IMPL_ATTRS})")


def specs_for_case(case: Any, notes: list[str] | None = None) -> list[KernelSpec]:
    """The KernelSpecs ``case`` needs. What cannot be listed (an op wrapper not written yet, an
    implementation with no factory) is left out and, when ``notes`` is given, noted once."""
    impl = case_impl(case)
    factory = KERNEL_SPECS.get(impl)
    specs: list[KernelSpec] = []
    if factory is not None:
        specs = list(factory(case))
        bad = [s for s in specs if not isinstance(s, KernelSpec)]
        if bad:
            raise TypeError(f"kernel spec factory of {impl!r} returned non-KernelSpec items: {bad!r}")
    if notes is not None and impl not in NO_KERNEL and (factory is None or impl in MISSING):
        why = MISSING.get(impl, "no kernel spec factory registered")
        note = f"{impl}: {'skipped' if factory is None else 'partly skipped'} ({why})"
        if note not in notes:
            notes.append(note)
    return specs


_load_builtins()
