#!/usr/bin/env bash
# Prepared in the eleventh session, NOT RUN: a same-call A/B of covering-loads.patch (run-ab.sh on
# probe-covering.yaml: tree and patched copy alternated three times, then the multi-step GPU tests on
# the patched copy), plus the gather floor's GPU tests and compute-sanitizer on the patched copy: the
# patch adds loads and stores of new shapes, so memcheck must see them before anything lands.
# usage: bash run-covering.sh   (~6 x 25 s + 2 builds + tests + ~40 s of sanitizer)
set -uo pipefail
P=results/probes/gather-groups-h200-20261201
bash $P/run-ab.sh $P/covering-loads.patch $P/probe-covering.yaml
(cd /tmp/ab-tree && PYTHONPATH=/tmp/site:/tmp/ab-tree HISPARSE_CACHE_DIR=/tmp/ab-tree/.cache/hisparse/jit \
    python3 -m pytest -q -m gpu -p no:cacheprovider tests/kernels/test_gather_floor_gpu.py) > /tmp/ab/tests-floor.txt 2>&1
echo "floor tests rc=$? $(tail -1 /tmp/ab/tests-floor.txt)"
(cd /tmp/ab-tree && PYTHONPATH=/tmp/site:/tmp/ab-tree HISPARSE_CACHE_DIR=/tmp/ab-tree/.cache/hisparse/jit \
    bash scripts/gpu_sanitize.sh) > /tmp/ab/sanitize.txt 2>&1
echo "sanitize rc=$? $(tail -1 /tmp/ab/sanitize.txt)"
tar czf $OUT/ab.tgz -C /tmp/ab .
