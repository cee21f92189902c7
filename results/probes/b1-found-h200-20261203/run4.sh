#!/usr/bin/env bash
# Nineteenth session, fourth call: pF3 = the gather's found list (as pF) with a commit that adds no store
# or atomic before phase E for it, and writes miss_vals in D only when phase G reads it. Call 3 found a
# store or atomic in D costs the warp ~one round trip and loads queue behind them, so: the entry loaded
# with the counters, the ordinal after them, the scratch row after the age pass, the output parked in
# shared memory before D and stored after E. Expected: the commit no longer grows (tF/tF2: +0.76-1.12 us),
# D ~700 cycles shorter, so b1 gets the gather's 0.5 us; PDL off shows the commit alone.
# The working tree carries pF3; `head` is the tree with it reversed.
# usage: OUT=... bash run4.sh   (carry .whl)
set -uo pipefail
D=results/probes/b1-found-h200-20261203
P=results/probes/b1-phases-h200-20261202
L=/tmp/logF3; rm -rf $L /tmp/head; mkdir -p $L
source scripts/gpu_node_setup.sh
ROOT=$PWD; t0=$SECONDS
pk() { tar czf $OUT/found3.tgz -C $L .; }
mkdir /tmp/head; tar cf - --exclude=./.cache --exclude=./.whl --exclude=./.sgl --exclude=./results . | tar xf - -C /tmp/head
mkdir -p /tmp/head/results && cp -r results/probes /tmp/head/results/
patch -R -d /tmp/head -p1 < $D/pF3-found-list-no-stores.patch > $L/patch.txt 2>&1 || { echo "reverse patch failed"; cat $L/patch.txt; exit 2; }
tree() { [ $1 = tF3 ] && echo $ROOT || echo /tmp/$1; }
inv() { local T=$(tree $1); shift; (cd $T && PYTHONPATH=/tmp/site:$T HISPARSE_CACHE_DIR=$T/.cache/hisparse/jit "$@"); }
for t in head tF3; do (inv $t python3 -m hisparse build $ROOT/$P/probe-b1.yaml -j 8 > $L/build-$t.txt 2>&1; echo "build $t rc=$? $((SECONDS-t0))s") & done; wait
inv tF3 python3 -m pytest -q -m gpu -p no:cacheprovider tests/kernels/test_swap_multi_gpu.py tests/kernels/test_copy_planned_gpu.py > $L/tests-tF3.txt 2>&1
echo "tests tF3 rc=$? $(tail -1 $L/tests-tF3.txt) $((SECONDS-t0))s"; pk
SANITIZE_LOG_DIR=$L/sanitize-tF3 inv tF3 bash scripts/gpu_sanitize.sh > $L/sanitize-tF3.txt 2>&1
echo "sanitize tF3 rc=$? $(tail -1 $L/sanitize-tF3.txt) $((SECONDS-t0))s"; pk
labels=""; files=""
for rep in ${REPS:-a b}; do
  for side in head tF3; do
    inv $side python3 -m hisparse run $ROOT/$P/probe-b1.yaml --out $L/$side-$rep.json --no-plots > $L/run-$side-$rep.txt 2>&1
    echo "run $side $rep rc=$? $((SECONDS-t0))s"; labels+="$side-$rep,"; files+=" $L/$side-$rep.json"; pk
  done
done
python3 results/probes/b1-chain-h200-20261202/table.py --labels ${labels%,} $files > $L/table.txt 2>&1; pk
for side in head tF3; do
  for c in b1 b1p0; do
    inv $side timeout 60 python3 scripts/probe_replay_modes.py --kernels $L/kernels-$side multi_step/serving/b1/s4/k2048/h4096/i576/$([ $c = b1 ] && echo pdl1 || echo pdl0) \
        > $L/kernels-$side-$c.txt 2>&1; echo "kernels $side $c rc=$? $((SECONDS-t0))s"; rm -rf $L/kernels-$side; pk
  done
done
cat $L/table.txt
for f in $L/kernels-*.txt; do echo "== $(basename $f)"; grep -A1 "  low\|  high" $f | head -4; done
