"""Synthetic result files (docs/results-format.md, schema_version 1) for the regression-tool tests.

Each case's samples are ``level * (1 + N(0, noise))`` from a seeded RNG, so tests know the truth:
the level per commit (and so every change point) is chosen by the test.
"""
from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

CASES = (
    {"implementation": "multi_step", "workload": "distinct", "batch": 8, "steps": 4, "top_k": 64,
     "hot_buffer_size": 128, "item_size_bytes": 64, "pdl": True, "shared_layers": 0, "workload_params": {},
     "seed": 0},
    {"implementation": "lru_sequential", "workload": "distinct", "batch": 8, "steps": 4, "top_k": 64,
     "hot_buffer_size": 128, "item_size_bytes": 64, "pdl": False, "shared_layers": 0, "workload_params": {},
     "seed": 0},
)


def case_id(p: dict) -> str:
    return (f"{p['implementation']}/{p['workload']}/b{p['batch']}/s{p['steps']}/k{p['top_k']}/"
            f"h{p['hot_buffer_size']}/i{p['item_size_bytes']}/pdl{int(p['pdl'])}")


def _quartile(xs, q):
    xs = sorted(xs)
    pos = q * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def make_case(params: dict, level_us: float, *, noise: float = 0.003, n: int = 10, rng: random.Random,
              status: str = "ok") -> dict:
    samples = [level_us * (1 + rng.gauss(0, noise)) for _ in range(n)] if status == "ok" else []
    stats = None
    if samples:
        q1, q3 = _quartile(samples, 0.25), _quartile(samples, 0.75)
        stats = {"n": n, "median_us": statistics.median(samples), "q1_us": q1, "q3_us": q3, "iqr_us": q3 - q1,
                 "min_us": min(samples), "max_us": max(samples), "mean_us": statistics.fmean(samples)}
    bytes_per_call = params["batch"] * params["top_k"] * params["item_size_bytes"]
    return {
        "case_id": case_id(params), "params": dict(params), "status": status,
        "reason": None if status == "ok" else "invariant 1 (data) failed for request 3",
        "timing": {"calls_per_graph": 100, "replays": n, "warmup_calls": 5, "l2_flush": True},
        "samples_us": samples, "stats": stats,
        "work": {"unique_misses_per_call": params["batch"] * params["top_k"], "hits_per_call": 0,
                 "bytes_per_call": bytes_per_call},
        "floor": {"pcie_floor_us": 1.0, "gather_floor_us": 2.0, "gather_samples_us": [2.0] * 3},
        "derived": {"gbps": bytes_per_call / (stats["median_us"] * 1e3) if stats else None,
                    "over_pcie_floor": 1.0, "over_gather_floor": 1.0, "speedup_vs_lru_sequential": None},
        "clocks": {"sm_mhz": [1980] * n, "mem_mhz": [2619] * n, "throttle_reasons": []},
        "wall_s": 0.5,
    }


def make_run(commit: str, created: datetime, levels: dict[str, float], *, machine: str = "h200-sxm",
             noise: float = 0.003, seed: int = 0, failed: tuple[str, ...] = (), config: str = "ci",
             backend: str = "cuda") -> dict:
    """A run of ``CASES`` at ``commit``; ``levels``: case implementation -> median level (us)."""
    rng = random.Random(seed)
    stamp = created.strftime("%Y%m%d-%H%M%S")
    cases = []
    for p in CASES:
        status = "failed" if p["implementation"] in failed else "ok"
        cases.append(make_case(p, levels[p["implementation"]], noise=noise, rng=rng, status=status))
    return {
        "schema_version": 1,
        "run_id": f"{stamp}_{commit[:12]}_{config}",
        "created": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "finished": (created + timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "backend": backend,
        "config": {"name": config, "path": f"configs/{config}.yaml", "hash": "0" * 64, "ci": True},
        "environment": {"machine": machine, "gpu": "NVIDIA H200", "gpu_count": 1, "compute_capability": "9.0",
                        "driver": "580.159.04", "cuda_runtime": "13.0", "torch": "2.11.0+cu130",
                        "tvm_ffi": "0.1.15.post2", "python": "3.12.3", "git_commit": commit, "git_dirty": False,
                        "hisparse": "0.1.0", "l2_bytes": 62914560, "sm_count": 132},
        "floors": {"pinned_h2d_gbps": 55.1, "pinned_h2d_samples_gbps": [55.1] * 3, "pinned_h2d_bytes": 1 << 30},
        "cases": cases,
    }


def write_run(results_dir: Path, run: dict) -> Path:
    path = Path(results_dir) / "runs" / f"{run['run_id']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(run, indent=1))
    return path


def fake_commit(i: int) -> str:
    return f"{i:02d}" + "ab" * 19


T0 = datetime(2026, 11, 1, 2, 0, tzinfo=timezone.utc)


def git(repo: Path | str, *args: str, date: str | None = None) -> str:
    """Run git in ``repo`` with a fixed identity; ``date`` sets author and committer dates (commits
    made within one second would otherwise tie on committer date). Returns stdout, stripped."""
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    if date:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = date
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()
