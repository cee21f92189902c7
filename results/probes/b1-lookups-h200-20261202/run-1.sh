#!/usr/bin/env bash
# Seventeenth session, call 2 (the working tree = tG, its diff against the head = pG-scratch-rows-hit-rows.patch):
#   tG: the gather's miss takes its scratch row from a shared copy of the request's first 1024 scratch rows
#       (cp.async at the CTA's start, read after the round's lookups), and a hit's row is loaded with the
#       check that confirms its slot (hot_find): one global round trip fewer on each path to the round's
#       barrier, so the copy and the count (the commit's start) both one round trip earlier.
# Steps: head = tree with the patch reversed; build both; tG's multi-step + planned GPU tests; compute-sanitizer
# of tG (logs packed); head and tG alternated twice on ../b1-phases-h200-20261202/probe-b1.yaml; CUPTI split.
# usage: OUT=... bash run-1.sh   (carry .whl; ~400 s on a fresh machine)
set -uo pipefail
D=results/probes/b1-lookups-h200-20261202
P=results/probes/b1-phases-h200-20261202
L=/tmp/logg; rm -rf $L /tmp/head; mkdir -p $L
source scripts/gpu_node_setup.sh
ROOT=$PWD; t0=$SECONDS
pk() { tar czf $OUT/call.tgz -C $L .; }
mkdir /tmp/head; tar cf - --exclude=./.cache --exclude=./.whl --exclude=./.sgl --exclude=./results . | tar xf - -C /tmp/head
mkdir -p /tmp/head/results && cp -r results/probes /tmp/head/results/
patch -R -d /tmp/head -p1 < $D/pG-scratch-rows-hit-rows.patch > $L/patch.txt 2>&1 || { echo "reverse patch failed"; cat $L/patch.txt; exit 2; }
tree() { [ $1 = tG ] && echo $ROOT || echo /tmp/$1; }
inv() { local T=$(tree $1); shift; (cd $T && PYTHONPATH=/tmp/site:$T HISPARSE_CACHE_DIR=$T/.cache/hisparse/jit "$@"); }
for t in head tG; do (inv $t python3 -m hisparse build $ROOT/$P/probe-b1.yaml -j 8 > $L/build-$t.txt 2>&1; echo "build $t rc=$? $((SECONDS-t0))s") & done; wait
inv tG python3 -m pytest -q -m gpu -p no:cacheprovider tests/kernels/test_swap_multi_gpu.py tests/kernels/test_copy_planned_gpu.py > $L/tests-tG.txt 2>&1
echo "tests tG rc=$? $(tail -1 $L/tests-tG.txt) $((SECONDS-t0))s"; pk
SANITIZE_LOG_DIR=$L/sanitize inv tG bash scripts/gpu_sanitize.sh > $L/sanitize-tG.txt 2>&1
echo "sanitize tG rc=$? $(tail -1 $L/sanitize-tG.txt) $((SECONDS-t0))s"; pk
labels=""; files=""
for rep in a b; do
  for side in head tG; do
    inv $side python3 -m hisparse run $ROOT/$P/probe-b1.yaml --out $L/$side-$rep.json --no-plots > $L/run-$side-$rep.txt 2>&1
    echo "run $side $rep rc=$? $((SECONDS-t0))s"; labels+="$side-$rep,"; files+=" $L/$side-$rep.json"; pk
  done
done
python3 results/probes/b1-chain-h200-20261202/table.py --labels ${labels%,} $files > $L/table.txt 2>&1; pk
for side in head tG; do
  inv $side timeout 100 python3 scripts/probe_replay_modes.py --kernels $L/kernels-$side multi_step/serving/b1/s4/k2048/h4096/i576/pdl1 \
      > $L/kernels-$side.txt 2>&1; echo "kernels $side rc=$? $((SECONDS-t0))s"; pk
done
rm -rf $L/kernels-head $L/kernels-tG; pk
cat $L/table.txt
for s in head tG; do echo "== $s"; grep -A1 "  low\|  high" $L/kernels-$s.txt | head -8; done
