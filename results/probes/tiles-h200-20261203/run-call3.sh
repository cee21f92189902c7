#!/usr/bin/env bash
# Call 3 (device): validate and A/B pN2 (the landed rule: one SM per request left for its commit) against its parent, then the cases of
# configs/default.yaml's `serving` view that the rule changes (batch 1, 2, 4) on the landed tree, for the
# record. Carry .whl and .sgl.
#   run: bash results/probes/tiles-h200-20261203/run-call2.sh SHA
set -uo pipefail
SHA=${1:?the landed commit}
export HISPARSE_SGLANG_SRC=$PWD/.sgl HISPARSE_MACHINE=h200-sxm
OUT=$OUT TREE=tN2 REPS="a b" timeout -s INT 330 bash scripts/ab_patch.sh \
  results/probes/tiles-h200-20261203/pN2-spread-leave-commit-sm.patch results/probes/tiles-h200-20261203/probe-tiles.yaml \
  multi_step/serving/b1/s4/k2048/h4096/i576/pdl1 > $OUT/ab-tail.txt 2>&1
source scripts/gpu_node_setup.sh
left=$((480 - SECONDS))
HISPARSE_CACHE_DIR=$PWD/.cache/hisparse/jit HISPARSE_GIT_COMMIT=$SHA HISPARSE_GIT_DIRTY=0 timeout -s INT $left \
  python3 -m hisparse run default --view serving --filter batch=1,2,4 --no-plots --out $OUT/serving.json > $OUT/serving-log.txt 2>&1
tail -25 $OUT/ab-tail.txt; tail -6 $OUT/serving-log.txt
