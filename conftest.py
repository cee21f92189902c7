"""Repo-wide pytest hooks: tests marked `gpu` are skipped when no CUDA GPU is visible; under CI
(the CI variable set, as .ci/run does) hypothesis runs derandomized, so a CI result does not depend
on which examples a fresh random seed draws (locally it keeps exploring and saves what fails)."""
import os

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_items:
        return
    import torch  # only when a gpu test was collected

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (torch.cuda.is_available() is False)")
    for item in gpu_items:
        item.add_marker(skip)
