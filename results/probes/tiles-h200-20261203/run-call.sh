#!/usr/bin/env bash
# Calls 2 and 3 (device): validate and A/B a kernel patch against its parent, then the cases of
# configs/default.yaml's `serving` view that the gather's small-batch spread changes (batch 1, 2, 4) on the
# tree, for the record. Carry .whl and .sgl.
#   call 2: bash results/probes/tiles-h200-20261203/run-call.sh pN-spread-one-per-sm.patch tN 1736f59...
#   call 3: bash results/probes/tiles-h200-20261203/run-call.sh pN2-spread-leave-commit-sm.patch tN2 0a5ccbb...
# (The calls ran this script as run-call2.sh / run-call3.sh, the same lines with the patch and tree fixed.)
set -uo pipefail
PATCH=${1:?the patch the tree carries, in this folder}; TREE=${2:?the tree label}; SHA=${3:?the commit of the tree}
export HISPARSE_SGLANG_SRC=$PWD/.sgl HISPARSE_MACHINE=h200-sxm
OUT=$OUT TREE=$TREE REPS="a b" timeout -s INT 330 bash scripts/ab_patch.sh \
  results/probes/tiles-h200-20261203/$PATCH results/probes/tiles-h200-20261203/probe-tiles.yaml \
  multi_step/serving/b1/s4/k2048/h4096/i576/pdl1 > $OUT/ab-tail.txt 2>&1
source scripts/gpu_node_setup.sh
left=$((480 - SECONDS))
HISPARSE_CACHE_DIR=$PWD/.cache/hisparse/jit HISPARSE_GIT_COMMIT=$SHA HISPARSE_GIT_DIRTY=0 timeout -s INT $left \
  python3 -m hisparse run default --view serving --filter batch=1,2,4 --no-plots --out $OUT/serving.json > $OUT/serving-log.txt 2>&1
tail -25 $OUT/ab-tail.txt; tail -6 $OUT/serving-log.txt
