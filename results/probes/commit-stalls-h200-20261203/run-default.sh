#!/usr/bin/env bash
# Calls 2-3 (device): the whole of configs/default.yaml on the tree, in two calls (one call's 600 s is
# less than the ~570 s sweep plus its build). Carry .whl and .sgl.
#   call 2: bash results/probes/commit-stalls-h200-20261203/run-default.sh SHA
#   call 3: bash results/probes/commit-stalls-h200-20261203/run-default.sh SHA results/runs/RUN.json
#           (RUN.json: call 2's interrupted run file, copied into the tree; --resume skips its cases and
#           keeps its pinned-bandwidth floor)
set -uo pipefail
SHA=${1:?the commit of the tree}; RESUME=${2:-}
export HISPARSE_SGLANG_SRC=$PWD/.sgl HISPARSE_MACHINE=h200-sxm
source scripts/gpu_node_setup.sh
python3 -m hisparse build default -j 16 > $OUT/build.txt 2>&1
echo "build rc=$? $SECONDS s"
left=$((575 - SECONDS))
if [ -n "$RESUME" ]; then
  HISPARSE_GIT_COMMIT=$SHA HISPARSE_GIT_DIRTY=0 timeout -s INT $left python3 -m hisparse run default --resume "$RESUME" \
    --no-plots > $OUT/default-log.txt 2>&1
  cp "$RESUME" $OUT/
else
  HISPARSE_GIT_COMMIT=$SHA HISPARSE_GIT_DIRTY=0 timeout -s INT $left python3 -m hisparse run default \
    --no-plots --out $OUT/default.json > $OUT/default-log.txt 2>&1
fi
echo "run rc=$? $SECONDS s"
grep -E "^\[[0-9]+/" $OUT/default-log.txt | tail -3
tail -4 $OUT/default-log.txt
