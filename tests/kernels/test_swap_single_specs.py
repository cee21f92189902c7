"""The single-step swap's instantiations (hisparse/kernels/ops/swap_single.py): the copy a call runs
follows its batch, and `hisparse-bench build` compiles every instantiation a call can pick, so no
compilation lands in a timed run. CPU only: nothing is compiled here."""
from __future__ import annotations

import pytest

from hisparse.kernels.ops import swap_single as ops


def _flat(spec) -> bool:
    return dict(spec.template_args)["flat_copy"]


@pytest.mark.parametrize("batch", [1, 2, ops.FLAT_COPY_MAX_BATCH, ops.FLAT_COPY_MAX_BATCH + 1, 64, 4096])
@pytest.mark.parametrize("record_plan", [False, True])
def test_every_instantiation_a_call_picks_is_built(batch, record_plan):
    picked = ops.kernel_spec(record_plan=record_plan, flat_copy=ops.flat_copy_for(batch))
    assert picked in ops.kernel_specs()
    assert _flat(picked) == (batch <= ops.FLAT_COPY_MAX_BATCH)


def test_a_swap_that_does_not_copy_has_no_flat_copy():
    plan_only = ops.kernel_spec(copy=False, flat_copy=True)
    assert plan_only == ops.kernel_spec(copy=False)
    assert dict(plan_only.template_args) == {"block_size": 1024, "record_plan": True, "copy": False,
                                             "flat_copy": False}
    assert plan_only in ops.kernel_specs(plan_only=True)
    assert plan_only not in ops.kernel_specs()


def test_the_four_copying_instantiations_differ_and_name_their_template_values():
    specs = ops.kernel_specs()
    assert len({s.cpp_function() for s in specs}) == 4
    assert "hisparse::swap_single_entry<1024, false, true, true>" in {s.cpp_function() for s in specs}
