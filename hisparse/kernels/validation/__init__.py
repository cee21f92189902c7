"""Argument validation shared by the PyTorch reference and the CUDA wrappers.

Both call the same ``check_*_inputs`` function before doing anything, so a bad call fails the same
way on either backend, before any kernel launch or compilation."""
