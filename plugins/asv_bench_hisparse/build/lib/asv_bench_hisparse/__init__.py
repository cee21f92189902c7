"""asv_runner plugin of hisparse-bench: the ``gpu_time_*`` benchmark type (see benchmarks/gputime.py)."""
__version__ = "0.1.0"
