#!/usr/bin/env bash
# Eighteenth session, on the landed tree (tH: the gather's hit and miss atomics issued together): the
# run files of configs/default.yaml and configs/vs-sglang.yaml for these kernels.
#   PART=1: build; every GPU test, compute-sanitizer and the stress check of ours (scripts/gpu_session.sh);
#           the `serving` grid of vs-sglang; the `serving` cases of default, cut at the call's limit
#           if need be (an interrupted run keeps its finished cases).   (~470 s)
#   PART=2: the `upstream` and `distinct` cases of default (113).               (~350 s)
# usage: OUT=... PART=1|2 HISPARSE_GIT_COMMIT=<sha> HISPARSE_GIT_DIRTY=0 bash run.sh
#        (carry .whl and .sgl, the cut of scripts/sglang_kernels_tree.sh)
set -uo pipefail
source scripts/gpu_node_setup.sh
export HISPARSE_SGLANG_SRC=$PWD/.sgl
L=/tmp/land$PART; rm -rf $L; mkdir -p $L; t0=$SECONDS
pk() { tar czf $OUT/part$PART.tgz -C $L .; }
limit=${LIMIT:-560}
(python3 -m hisparse build configs/default.yaml -j 16 && python3 -m hisparse build configs/vs-sglang.yaml -j 16) > $L/build.txt 2>&1
echo "build rc=$? $((SECONDS-t0))s"
if [ "$PART" = 1 ]; then
  (OUT=$L/validation bash scripts/gpu_session.sh node tests sanitize stress:ours:-i,multi_step,-i,multi_step_planned) > $L/validation.txt 2>&1
  echo "validation rc=$? $((SECONDS-t0))s"; tail -6 $L/validation.txt; pk
  timeout -s INT 170 python3 -m hisparse run vs-sglang --filter workload=serving --no-plots --out $L/vs-sglang-serving.json > $L/vs-sglang-serving.log 2>&1
  echo "vs-sglang serving rc=$? $((SECONDS-t0))s"; pk
  left=$(( limit - SECONDS + t0 ))
  [ $left -gt 30 ] && timeout -s INT $left python3 -m hisparse run default --filter workload=serving --no-plots --out $L/default-serving.json > $L/default-serving.log 2>&1
  echo "default serving rc=$? $((SECONDS-t0))s"; pk
  tail -4 $L/vs-sglang-serving.log; tail -3 $L/default-serving.log
else
  left=$(( limit - SECONDS + t0 ))
  timeout -s INT $left python3 -m hisparse run default --filter workload=upstream,distinct --no-plots --out $L/default-upstream-distinct.json > $L/default-upstream-distinct.log 2>&1
  echo "default upstream,distinct rc=$? $((SECONDS-t0))s"; pk
  tail -3 $L/default-upstream-distinct.log
fi
