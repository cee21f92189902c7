#!/usr/bin/env bash
# Eleventh session, call 1: one machine, four variants of the multi-step swap on probe-groups.yaml
# (multi-step only), alternated so that drift between runs shows up in every column:
#   head   the tree (c0b6a55's kernels)
#   sp256  small-pool-knob.patch, pools <= 256 MiB take the 64-register gather at 4 CTAs per SM
#   sp2047 the same build with HISPARSE_PROBE_SMALL_POOL_MIB=2047 (every pool under the 2 GiB line)
#   merged merged-commit.patch (the commit's phases B and D merged)
# then the multi-step GPU tests on both patched trees.   usage: bash run-ab4.sh
set -uo pipefail
P=results/probes/gather-groups-h200-20261201
L=/tmp/ab; rm -rf $L /tmp/ab-sp /tmp/ab-mc; mkdir -p $L
source scripts/gpu_node_setup.sh
ROOT=$PWD; CONFIG=$ROOT/$P/probe-groups.yaml
for t in sp mc; do
  mkdir /tmp/ab-$t && tar cf - --exclude=./.cache --exclude=./.whl --exclude=./.sgl . | tar xf - -C /tmp/ab-$t
done
patch -d /tmp/ab-sp -p1 < $P/small-pool-knob.patch > $L/patch-sp.txt 2>&1 || { echo "patch sp failed"; exit 2; }
patch -d /tmp/ab-mc -p1 < $P/merged-commit.patch > $L/patch-mc.txt 2>&1 || { echo "patch mc failed"; exit 2; }
t0=$SECONDS
tree_of() { case $1 in head) echo $ROOT ;; sp*) echo /tmp/ab-sp ;; merged) echo /tmp/ab-mc ;; esac; }
for tree in $ROOT /tmp/ab-sp /tmp/ab-mc; do
  (cd $tree && PYTHONPATH=/tmp/site:$tree HISPARSE_CACHE_DIR=$tree/.cache/hisparse/jit python3 -m hisparse build configs/default.yaml -j 16) \
      > $L/build-$(basename $tree).txt 2>&1; echo "build $tree rc=$? $((SECONDS-t0))s"
done
run() {  # run VARIANT REP
  local tree; tree=$(tree_of $1); local mib=256; [ $1 = sp2047 ] && mib=2047
  (cd $tree && HISPARSE_PROBE_SMALL_POOL_MIB=$mib PYTHONPATH=/tmp/site:$tree HISPARSE_CACHE_DIR=$tree/.cache/hisparse/jit \
      python3 -m hisparse run $CONFIG --filter implementation=multi_step --out $L/$1-$2.json --no-plots) > $L/run-$1-$2.txt 2>&1
  echo "run $1 $2 rc=$? $((SECONDS-t0))s"; tar czf $OUT/ab.tgz -C $L .
}
for rep in a b; do for v in head sp256 sp2047 merged; do run $v $rep; done; done
for v in head sp256 merged; do run $v c; done
for t in sp mc; do
  (cd /tmp/ab-$t && PYTHONPATH=/tmp/site:/tmp/ab-$t HISPARSE_CACHE_DIR=/tmp/ab-$t/.cache/hisparse/jit \
      python3 -m pytest -q -m gpu -p no:cacheprovider tests/kernels/test_swap_multi_gpu.py) > $L/tests-$t.txt 2>&1
  echo "tests $t rc=$? $(tail -1 $L/tests-$t.txt) $((SECONDS-t0))s"
done
tar czf $OUT/ab.tgz -C $L .
labels=head-a,sp256-a,sp2047-a,merged-a,head-b,sp256-b,sp2047-b,merged-b,head-c,sp256-c,merged-c
files=$(for l in ${labels//,/ }; do echo $L/$l.json; done)
python3 $P/table.py --labels $labels $files | tee $L/table.txt | cut -c1-200
tar czf $OUT/ab.tgz -C $L .
