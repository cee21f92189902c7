#!/usr/bin/env bash
# Prepared in the eleventh session, NOT RUN: where the multi-step gather's 4-per-SM pool line should
# sit. One build of the tree with l2-line-knob.patch (HISPARSE_PROBE_L2_MULT; 1 = the committed rule),
# then probe-l2-line-upstream.yaml and probe-l2-line-pools.yaml (multi-step only) at L2 multiples 1,
# 2 and 8, alternated twice; sglang's multi-step and LRU once (they ignore the knob).
# usage: bash run-l2-line.sh  (export HISPARSE_SGLANG_SRC=$PWD/.sgl, carry .whl and .sgl)
# About 2 x 3 x (40 + 15) s + 60 s of sglang / LRU + a build of ~20 s + the machine's start.
set -uo pipefail
P=results/probes/gather-groups-h200-20261201
L=/tmp/l2line; rm -rf $L /tmp/l2-tree; mkdir -p $L
source scripts/gpu_node_setup.sh
mkdir /tmp/l2-tree && tar cf - --exclude=./.cache --exclude=./.whl . | tar xf - -C /tmp/l2-tree
patch -d /tmp/l2-tree -p1 < $P/l2-line-knob.patch > $L/patch.txt 2>&1 || { echo "patch failed"; exit 2; }
cd /tmp/l2-tree
export PYTHONPATH=/tmp/site:/tmp/l2-tree HISPARSE_CACHE_DIR=/tmp/l2-tree/.cache/hisparse/jit
t0=$SECONDS
python3 -m hisparse build configs/default.yaml -j 16 > $L/build.txt 2>&1; echo "build rc=$? $((SECONDS-t0))s"
for rep in a b; do
  for m in 1 2 8; do
    for c in upstream pools; do
      HISPARSE_PROBE_L2_MULT=$m python3 -m hisparse run $P/probe-l2-line-$c.yaml --filter implementation=multi_step \
          --out $L/$c-x$m-$rep.json --no-plots > $L/run-$c-x$m-$rep.txt 2>&1
      echo "run $c x$m $rep rc=$? $((SECONDS-t0))s"; tar czf $OUT/l2line.tgz -C $L .
    done
  done
done
for c in upstream pools; do
  python3 -m hisparse run $P/probe-l2-line-$c.yaml --filter 'implementation=sglang_multi_step,lru_sequential' \
      --out $L/$c-others.json --no-plots > $L/run-$c-others.txt 2>&1
  echo "run $c others rc=$? $((SECONDS-t0))s"; tar czf $OUT/l2line.tgz -C $L .
done
for c in upstream pools; do
  python3 $P/table.py --labels x1-a,x2-a,x8-a,x1-b,x2-b,x8-b,others $L/$c-x1-a.json $L/$c-x2-a.json $L/$c-x8-a.json \
      $L/$c-x1-b.json $L/$c-x2-b.json $L/$c-x8-b.json $L/$c-others.json | tee $L/table-$c.txt
done
tar czf $OUT/l2line.tgz -C $L .
