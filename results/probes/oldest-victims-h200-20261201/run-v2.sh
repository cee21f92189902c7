#!/usr/bin/env bash
# Thirteenth session, call 2: oldest-victims v2 (ages cached in shared memory by one coalesced pass;
# v1 re-read ref volatile in every pass and lost 1-11 us at batch 1 and hot 16384) against the tree,
# same call: its multi-step + planned GPU tests first (nothing is timed on a kernel that fails them),
# head / v2 alternated 3x on probe-oldest.yaml, sequential LRU once, then the full validation of the
# v2 tree (every GPU test, compute-sanitizer, the multi-step stress) so that it can land from this call.
# usage: bash run-v2.sh   (carry .whl; ~390 s)
# The same A/B for another patch (run-switch.sh): PATCH (file in this folder), PROBE (config), SIDE (the
# patched side's label), LRU (0: no sequential-LRU run). The defaults are calls 2-3's.
set -uo pipefail
D=results/probes/oldest-victims-h200-20261201
V=results/probes/victim-policy-cpu-20261201
G=results/probes/gather-groups-h200-20261201
PATCH=${PATCH:-oldest-victims-v2.patch} PROBE=${PROBE:-$V/probe-oldest.yaml} SIDE=${SIDE:-v2} LRU=${LRU:-1}
L=/tmp/${SIDE}log; T=/tmp/$SIDE-tree; rm -rf $L $T; mkdir -p $L
source scripts/gpu_node_setup.sh
mkdir $T && tar cf - --exclude=./.cache --exclude=./.whl --exclude=./.sgl . | tar xf - -C $T
ROOT=$PWD
patch -d $T -p1 < $D/$PATCH > $L/patch.txt 2>&1 || { echo "patch failed"; exit 2; }
pk() { tar czf $OUT/$SIDE.tgz -C $L .; }
t0=$SECONDS
for tree in $ROOT $T; do
  (cd $tree && PYTHONPATH=/tmp/site:$tree HISPARSE_CACHE_DIR=$tree/.cache/hisparse/jit python3 -m hisparse build configs/default.yaml -j 16) \
      > $L/build-$(basename $tree).txt 2>&1; echo "build $tree rc=$? $((SECONDS-t0))s"
done
inv() { (cd $T && PYTHONPATH=/tmp/site:$T HISPARSE_CACHE_DIR=$T/.cache/hisparse/jit "$@"); }
inv python3 -m pytest -q -m gpu -p no:cacheprovider tests/kernels/test_swap_multi_gpu.py tests/kernels/test_copy_planned_gpu.py > $L/tests-$SIDE.txt 2>&1
rc=$?; echo "tests $SIDE rc=$rc $(tail -1 $L/tests-$SIDE.txt) $((SECONDS-t0))s"; pk
[ $rc -eq 0 ] || { echo "$SIDE fails its GPU tests: not timed"; exit 1; }
for rep in a b c; do
  for side in head $SIDE; do
    tree=$ROOT; [ $side = $SIDE ] && tree=$T
    (cd $tree && PYTHONPATH=/tmp/site:$tree HISPARSE_CACHE_DIR=$tree/.cache/hisparse/jit python3 -m hisparse run \
        $ROOT/$PROBE --filter implementation=multi_step --out $L/$side-$rep.json --no-plots) > $L/run-$side-$rep.txt 2>&1
    echo "run $side $rep rc=$? $((SECONDS-t0))s"; pk
  done
done
lru=()
if [ "$LRU" = 1 ]; then
  python3 -m hisparse run $PROBE --filter implementation=lru_sequential --out $L/lru.json --no-plots > $L/run-lru.txt 2>&1
  echo "run lru rc=$? $((SECONDS-t0))s"; lru=($L/lru.json)
fi
labels=head-a,$SIDE-a,head-b,$SIDE-b,head-c,$SIDE-c; [ "$LRU" = 1 ] && labels+=,lru
python3 $G/table.py --labels $labels $L/head-a.json $L/$SIDE-a.json \
    $L/head-b.json $L/$SIDE-b.json $L/head-c.json $L/$SIDE-c.json "${lru[@]}" > $L/table.txt 2>&1; pk
# the full validation of the patched tree (its own log dir, packed by gpu_session.sh into $OUT/session.tgz)
(cd $T && OUT=$OUT HISPARSE_CACHE_DIR=$T/.cache/hisparse/jit PYTHONPATH=/tmp/site:$T bash scripts/gpu_session.sh node tests sanitize \
    stress:ours:-i,multi_step,-i,multi_step_planned) > $L/validation.txt 2>&1
echo "validation rc=$? $((SECONDS-t0))s"; tail -6 $L/validation.txt; pk
cat $L/table.txt
