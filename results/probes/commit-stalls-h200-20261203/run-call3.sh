#!/usr/bin/env bash
# Call 3 (device): finish call 2's interrupted default run, then validate the tree in full (every GPU
# test, compute-sanitizer with its planted bugs). Carry .whl and .sgl.
#   bash results/probes/commit-stalls-h200-20261203/run-call3.sh SHA results/runs/RUN.json
set -uo pipefail
SHA=${1:?the commit of the tree}; RESUME=${2:?call 2s run file, copied into the tree}
export HISPARSE_SGLANG_SRC=$PWD/.sgl HISPARSE_MACHINE=h200-sxm
source scripts/gpu_node_setup.sh
python3 -m hisparse build default -j 16 > $OUT/build.txt 2>&1
echo "build rc=$? $SECONDS s"
HISPARSE_GIT_COMMIT=$SHA HISPARSE_GIT_DIRTY=0 timeout -s INT 300 python3 -m hisparse run default --resume "$RESUME" \
  --no-plots > $OUT/default-log.txt 2>&1
echo "run rc=$? $SECONDS s"
cp "$RESUME" $OUT/
timeout $((540 - SECONDS)) python3 -m pytest -q -m gpu -p no:cacheprovider tests/ > $OUT/gpu-tests.txt 2>&1
echo "tests rc=$? $SECONDS s"
SANITIZE_LOG_DIR=/tmp/sanitize timeout $((590 - SECONDS)) bash scripts/gpu_sanitize.sh > $OUT/sanitize.txt 2>&1
echo "sanitize rc=$? $SECONDS s"
tail -4 $OUT/default-log.txt; tail -2 $OUT/gpu-tests.txt; tail -7 $OUT/sanitize.txt
