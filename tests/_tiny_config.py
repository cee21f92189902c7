"""The tiny sweep config the command tests run on the reference backend: `distinct` at 2 steps, top-k 16,
hot 64, 64 B rows, warm (layers 1), a 2-call graph of 10 replays. Tests vary it by name, implementations,
batch and a few extra lines, and some edit the text (``.replace("replays: 10", ...)``): the layout below
is what they edit."""
from __future__ import annotations


def tiny_config(name: str, *, implementation: str = "[lru_sequential, multi_step]", batch: str = "1",
                axes_extra: str = "", extra: str = "", timing_extra: str = "") -> str:
    """The YAML text; ``axes_extra`` / ``extra``: whole lines added under ``axes:`` / after it."""
    return f"""\
name: {name}
axes:
  implementation: {implementation}
  workload: distinct
  batch: {batch}
  steps: 2
  top_k: 16
  hot_buffer_size: 64
  item_size_bytes: 64
  pdl: on
{axes_extra}{extra}workloads: {{distinct: {{layers: 1}}}}
timing: {{warmup_calls: 1, calls_per_graph: 2, replays: 10, l2_flush: false, check_calls: 1{timing_extra}}}
"""
