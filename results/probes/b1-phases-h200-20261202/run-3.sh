#!/usr/bin/env bash
# Sixteenth session, call 3, on the landed tree (955299d): all GPU tests, compute-sanitizer and the
# stress check of that exact code; the `serving` grid of configs/vs-sglang.yaml; the `serving` cases of
# configs/default.yaml, cut at the call's limit if need be (an interrupted run keeps its cases).
# usage: OUT=... bash run-3.sh   (carry .whl and .sgl, the cut of scripts/sglang_kernels_tree.sh; ~560 s)
set -uo pipefail
source scripts/gpu_node_setup.sh
export HISPARSE_SGLANG_SRC=$PWD/.sgl
L=/tmp/log3; rm -rf $L; mkdir -p $L; t0=$SECONDS
pk() { tar czf $OUT/call3.tgz -C $L .; }
(python3 -m hisparse build configs/default.yaml -j 16 && python3 -m hisparse build configs/vs-sglang.yaml -j 16) > $L/build.txt 2>&1
echo "build rc=$? $((SECONDS-t0))s"
(OUT=$L/validation bash scripts/gpu_session.sh node tests sanitize stress:ours:-i,multi_step,-i,multi_step_planned) > $L/validation.txt 2>&1
echo "validation rc=$? $((SECONDS-t0))s"; tail -5 $L/validation.txt; pk
timeout -s INT 170 python3 -m hisparse run vs-sglang --filter workload=serving --no-plots --out $L/vs-sglang-serving.json > $L/vs-sglang-serving.log 2>&1
echo "vs-sglang serving rc=$? $((SECONDS-t0))s"; pk
left=$(( 550 - SECONDS + t0 ))
[ $left -gt 30 ] && timeout -s INT $left python3 -m hisparse run default --filter workload=serving --no-plots --out $L/default-serving.json > $L/default-serving.log 2>&1
echo "default serving rc=$? $((SECONDS-t0))s"; pk
tail -4 $L/vs-sglang-serving.log; tail -3 $L/default-serving.log
