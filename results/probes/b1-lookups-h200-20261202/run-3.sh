#!/usr/bin/env bash
# Seventeenth session, call 4 (the working tree = tK, its diff against the head = pK-commit-cluster.patch):
#   tK: at small batch (the gather's SMs plus 4 per request fit on the device) the commit runs as a cluster of
#       4 CTAs per request; in union mode up to HOT 16384 each CTA computes the same selection and applies a
#       quarter of the misses in phases D-E (cluster barriers before D, between D and E, after E).
# Steps: head = tree with the patch reversed; build both; tK's multi-step + planned GPU tests; compute-sanitizer of
# tK (logs packed); head and tK alternated twice on probe-k.yaml; the CUPTI split of serving b1; then, while the
# call has time, ../item-bytes-h200-20261202/probe_items.py and run-2.sh's gather clocks (p-gather-clock.patch on
# the head's gather).   usage: OUT=... [REPS="a b"] [ITEMS_BEFORE=220] [GCLK_BEFORE=240] bash run-3.sh   (carry .whl; 150-300 s)
set -uo pipefail
D=results/probes/b1-lookups-h200-20261202; I=results/probes/item-bytes-h200-20261202
P5=results/probes/b1-chain-h200-20261202/probe-p5.yaml
L=/tmp/logk; rm -rf $L /tmp/head /tmp/gclk; mkdir -p $L
source scripts/gpu_node_setup.sh
ROOT=$PWD; t0=$SECONDS
pk() { tar czf $OUT/call4.tgz -C $L .; }
copy_tree() { mkdir $1; tar cf - --exclude=./.cache --exclude=./.whl --exclude=./.sgl --exclude=./results . | tar xf - -C $1
              mkdir -p $1/results && cp -r results/probes $1/results/; }
copy_tree /tmp/head
patch -R -d /tmp/head -p1 < $D/pK-commit-cluster.patch > $L/patch.txt 2>&1 || { echo "reverse patch failed"; cat $L/patch.txt; exit 2; }
tree() { case $1 in tK) echo $ROOT;; *) echo /tmp/$1;; esac; }
inv() { local T=$(tree $1); shift; (cd $T && PYTHONPATH=/tmp/site:$T HISPARSE_CACHE_DIR=$T/.cache/hisparse/jit "$@"); }
for t in head tK; do (inv $t python3 -m hisparse build $ROOT/$D/probe-k.yaml -j 8 > $L/build-$t.txt 2>&1; echo "build $t rc=$? $((SECONDS-t0))s") & done; wait
inv tK python3 -m pytest -q -m gpu -p no:cacheprovider tests/kernels/test_swap_multi_gpu.py tests/kernels/test_copy_planned_gpu.py > $L/tests-tK.txt 2>&1
echo "tests tK rc=$? $(tail -1 $L/tests-tK.txt) $((SECONDS-t0))s"; pk
SANITIZE_LOG_DIR=$L/sanitize inv tK bash scripts/gpu_sanitize.sh > $L/sanitize-tK.txt 2>&1
echo "sanitize tK rc=$? $(tail -1 $L/sanitize-tK.txt) $((SECONDS-t0))s"; pk
labels=""; files=""
for rep in ${REPS:-a b}; do
  for side in head tK; do
    inv $side python3 -m hisparse run $ROOT/$D/probe-k.yaml --out $L/$side-$rep.json --no-plots > $L/run-$side-$rep.txt 2>&1
    echo "run $side $rep rc=$? $((SECONDS-t0))s"; labels+="$side-$rep,"; files+=" $L/$side-$rep.json"; pk
  done
done
python3 results/probes/b1-chain-h200-20261202/table.py --labels ${labels%,} $files > $L/table.txt 2>&1; pk
for side in head tK; do
  inv $side timeout 60 python3 scripts/probe_replay_modes.py --kernels $L/kernels-$side multi_step/serving/b1/s4/k2048/h4096/i576/pdl1 \
      > $L/kernels-$side.txt 2>&1; echo "kernels $side rc=$? $((SECONDS-t0))s"; rm -rf $L/kernels-$side; pk
done
if [ $((SECONDS-t0)) -lt ${ITEMS_BEFORE:-220} ]; then
  timeout 60 python3 $I/probe_items.py > $L/items.txt 2>&1; echo "items rc=$? $((SECONDS-t0))s"; pk
fi
if [ $((SECONDS-t0)) -lt ${GCLK_BEFORE:-240} ]; then
  cp -r /tmp/head /tmp/gclk && patch -d /tmp/gclk -p1 < $D/p-gather-clock.patch > $L/patch-gclk.txt 2>&1 &&
  (cd /tmp/gclk && PYTHONPATH=/tmp/site:/tmp/gclk HISPARSE_CACHE_DIR=/tmp/gclk/.cache/hisparse/jit timeout 70 python3 -m hisparse run \
     $P5 --out $L/gclk.json --no-plots) > $L/run-gclk.txt 2>&1
  echo "gclk rc=$? $(grep -c 'PROBE gclk' $L/run-gclk.txt) lines $((SECONDS-t0))s"
  python3 $D/gclk.py $L/run-gclk.txt > $L/gclk-medians.txt 2>&1; pk
fi
cat $L/table.txt
for s in head tK; do echo "== $s"; grep -A1 "  low\|  high" $L/kernels-$s.txt | head -4; done
cat $L/items.txt 2>/dev/null | head -30; head -40 $L/gclk-medians.txt 2>/dev/null
