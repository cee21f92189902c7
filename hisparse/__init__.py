"""hisparse: HiSparse KV-cache swap kernels, their PyTorch reference, and a benchmark harness."""
__version__ = "0.1.0"
