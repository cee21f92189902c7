#!/usr/bin/env bash
# Fifteenth session, call 3 (README.md), on the landed tree (p2 without its scratch-row prefetch):
# the GPU tests and compute-sanitizer of that exact code; the `serving` grid of configs/vs-sglang.yaml
# (the pairs the whole run of 2535c89 lost at its time limit); ncu of the commit at batch 1 with the
# finest PC sampling (call 2's default interval left 13 samples); the `serving` cases of
# configs/default.yaml, cut at the call's limit if need be (an interrupted run keeps its cases).
# usage: OUT=... bash run-final.sh   (carry .whl and .sgl; ~550 s)
set -uo pipefail
source scripts/gpu_node_setup.sh
export HISPARSE_SGLANG_SRC=$PWD/.sgl
L=/tmp/finallog; rm -rf $L; mkdir -p $L; t0=$SECONDS
pk() { tar czf $OUT/final.tgz -C $L .; }
(python3 -m hisparse build configs/default.yaml -j 16 && python3 -m hisparse build configs/vs-sglang.yaml -j 16) > $L/build.txt 2>&1
echo "build rc=$? $((SECONDS-t0))s"
(OUT=$L/validation bash scripts/gpu_session.sh node tests sanitize) > $L/validation.txt 2>&1
echo "validation rc=$? $((SECONDS-t0))s"; tail -3 $L/validation.txt; pk
timeout -s INT 200 python3 -m hisparse run vs-sglang --filter workload=serving --no-plots --out $L/vs-sglang-serving.json > $L/vs-sglang-serving.log 2>&1
echo "vs-sglang serving rc=$? $((SECONDS-t0))s"; pk
timeout 90 ncu --clock-control none --target-processes all -k "regex:spec_commit_kernel" --launch-skip 4 --launch-count 1 \
  --section SourceCounters --section WarpStateStats --sampling-interval 0 -o $L/ncu-commit-b1 \
  python3 scripts/ncu_case.py multi_step/serving/b1/s4/k2048/h4096/i576/pdl1 > $L/ncu-commit-b1.log 2>&1
echo "ncu rc=$? $((SECONDS-t0))s"
ncu --import $L/ncu-commit-b1.ncu-rep --csv --page source --print-source sass > $L/ncu-commit-b1-sass.csv 2>&1
ncu --import $L/ncu-commit-b1.ncu-rep --csv --page details > $L/ncu-commit-b1-details.csv 2>&1
rm -f $L/*.ncu-rep; pk
left=$(( 515 - SECONDS + t0 ))
[ $left -gt 30 ] && timeout -s INT $left python3 -m hisparse run default --filter workload=serving --no-plots --out $L/default-serving.json > $L/default-serving.log 2>&1
echo "default serving rc=$? $((SECONDS-t0))s"; pk
tail -4 $L/vs-sglang-serving.log; tail -3 $L/default-serving.log
