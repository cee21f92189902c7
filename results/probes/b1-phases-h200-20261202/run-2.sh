#!/usr/bin/env bash
# Sixteenth session, call 2: the commit changes (tA = head + pA-commit.patch) and the commit + gather
# changes (tB = the tree) against head (161ab1d: the tree minus both patches), in one device call.
# Steps: build the three trees; the GPU tests of tB (multi-step + planned copy); head, tA, tB
# alternated twice on probe-b1.yaml (every case is checked against the reference before it is timed);
# the CUPTI kernel split of serving b1 for head and tB.  usage: OUT=... bash run-2.sh  (carry .whl)
set -uo pipefail
D=results/probes/b1-phases-h200-20261202
L=/tmp/log2; rm -rf $L /tmp/head /tmp/tA; mkdir -p $L
source scripts/gpu_node_setup.sh
ROOT=$PWD
pk() { tar czf $OUT/call2.tgz -C $L .; }
for t in head tA; do
  mkdir /tmp/$t; tar cf - --exclude=./.cache --exclude=./.whl --exclude=./.sgl --exclude=./results . | tar xf - -C /tmp/$t
  mkdir -p /tmp/$t/results && cp -r results/probes /tmp/$t/results/
  patch -R -d /tmp/$t -p1 < $D/pB-gather.patch > $L/patch-$t.txt 2>&1 || { echo "patch $t failed"; exit 2; }
done
patch -R -d /tmp/head -p1 < $D/pA-commit.patch >> $L/patch-head.txt 2>&1 || { echo "patch head failed"; exit 2; }
t0=$SECONDS
tree() { [ $1 = tB ] && echo $ROOT || echo /tmp/$1; }
inv() { local T=$(tree $1); shift; (cd $T && PYTHONPATH=/tmp/site:$T HISPARSE_CACHE_DIR=$T/.cache/hisparse/jit "$@"); }
for t in head tA tB; do (inv $t python3 -m hisparse build $ROOT/$D/probe-b1.yaml -j 16 > $L/build-$t.txt 2>&1; echo "build $t rc=$? $((SECONDS-t0))s") & done; wait
inv tB python3 -m pytest -q -m gpu -p no:cacheprovider tests/kernels/test_swap_multi_gpu.py tests/kernels/test_copy_planned_gpu.py > $L/tests-tB.txt 2>&1
echo "tests tB rc=$? $(tail -1 $L/tests-tB.txt) $((SECONDS-t0))s"; pk
labels=""; files=""
for rep in a b; do
  for side in head tA tB; do
    inv $side python3 -m hisparse run $ROOT/$D/probe-b1.yaml --out $L/$side-$rep.json --no-plots > $L/run-$side-$rep.txt 2>&1
    echo "run $side $rep rc=$? $((SECONDS-t0))s"; labels+="$side-$rep,"; files+=" $L/$side-$rep.json"; pk
  done
done
python3 results/probes/b1-chain-h200-20261202/table.py --labels ${labels%,} $files > $L/table.txt 2>&1; pk
for side in head tB; do
  inv $side timeout 100 python3 scripts/probe_replay_modes.py --kernels $L/kernels-$side multi_step/serving/b1/s4/k2048/h4096/i576/pdl1 \
      > $L/kernels-$side.txt 2>&1; echo "kernels $side rc=$? $((SECONDS-t0))s"; pk
done
cat $L/table.txt
for s in head tB; do echo "== $s"; tail -14 $L/kernels-$s.txt; done
