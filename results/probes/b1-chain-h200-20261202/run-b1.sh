#!/usr/bin/env bash
# Fifteenth session, call 1: four cumulative changes for batch 1 against the tree, in one device call.
#   t1 = p1-chain            the gather is a PDL dependent launch too; the commit triggers at its start
#   t2 = t1 + p2-commit       the commit's first-miss words prefetched across phase B, E's token and
#                             buckets from registers, the threshold age by one warp
#   t3 = t2 + p3-gather-early round 0's token and seq_len before the request's state; host row with the
#                             hot lookup
#   t4 = t3 + p4-l2-prefetch  the claimer asks L2 for its host row at once
# Steps: the GPU tests of t4 (multi-step + planned copy); head, t1..t4 alternated twice on
# probe-b1.yaml (every case is checked against the reference before it is timed); CUPTI kernel split
# of serving b1 for head and t4.  usage: OUT=... bash run-b1.sh   (carry .whl; ~450 s)
set -uo pipefail
D=results/probes/b1-chain-h200-20261202
L=/tmp/b1log; rm -rf $L /tmp/t[1-4]; mkdir -p $L
source scripts/gpu_node_setup.sh
ROOT=$PWD
pk() { tar czf $OUT/b1.tgz -C $L .; }
prev=$ROOT
for i in 1 2 3 4; do
  p=$(ls $D/p$i-*.patch); T=/tmp/t$i; mkdir $T
  (cd $prev && tar cf - --exclude=./.cache --exclude=./.whl --exclude=./.sgl --exclude=./results .) | tar xf - -C $T
  mkdir -p $T/results && cp -r $ROOT/results/probes $T/results/ 2>/dev/null
  patch -d $T -p1 < $p > $L/patch-t$i.txt 2>&1 || { echo "patch t$i failed"; cat $L/patch-t$i.txt; exit 2; }
  prev=$T
done
t0=$SECONDS
build() { (cd $1 && PYTHONPATH=/tmp/site:$1 HISPARSE_CACHE_DIR=$1/.cache/hisparse/jit python3 -m hisparse build $ROOT/$D/probe-b1.yaml -j 16) > $L/build-$2.txt 2>&1; echo "build $2 rc=$? $((SECONDS-t0))s"; }
build $ROOT head & for i in 1 2 3 4; do build /tmp/t$i t$i & done; wait
inv() { local T=$1; shift; (cd $T && PYTHONPATH=/tmp/site:$T HISPARSE_CACHE_DIR=$T/.cache/hisparse/jit "$@"); }
inv /tmp/t4 python3 -m pytest -q -m gpu -p no:cacheprovider tests/kernels/test_swap_multi_gpu.py tests/kernels/test_copy_planned_gpu.py > $L/tests-t4.txt 2>&1
echo "tests t4 rc=$? $(tail -1 $L/tests-t4.txt) $((SECONDS-t0))s"; pk
labels=""; files=""
for rep in a b; do
  for side in head t1 t2 t3 t4; do
    tree=$ROOT; [ $side != head ] && tree=/tmp/$side
    inv $tree python3 -m hisparse run $ROOT/$D/probe-b1.yaml --out $L/$side-$rep.json --no-plots > $L/run-$side-$rep.txt 2>&1
    echo "run $side $rep rc=$? $((SECONDS-t0))s"; labels+="$side-$rep,"; files+=" $L/$side-$rep.json"; pk
  done
done
python3 $D/table.py --labels ${labels%,} $files > $L/table.txt 2>&1; pk
for side in head t4; do
  tree=$ROOT; [ $side != head ] && tree=/tmp/$side
  inv $tree timeout 120 python3 scripts/probe_replay_modes.py --kernels $L/kernels-$side multi_step/serving/b1/s4/k2048/h4096/i576/pdl1 \
      > $L/kernels-$side.txt 2>&1; echo "kernels $side rc=$? $((SECONDS-t0))s"; pk
done
cat $L/table.txt
