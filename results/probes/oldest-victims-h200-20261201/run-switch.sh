#!/usr/bin/env bash
# Prepared in the thirteenth session, NOT RUN: hot-switch.patch (union-mode victims = the oldest slots
# up to HOT 16384, upstream's partitioned CLOCK above) against the tree (d46ca15: the oldest slots at
# every HOT, +16-17.5 us at hot 32768). Same call: the patched copy's multi-step + planned GPU tests
# first (nothing is timed on a kernel that fails them), head / patched alternated 3x on
# probe-switch.yaml, then the full validation of the patched tree (every GPU test, compute-sanitizer,
# the multi-step stress), so that it can land from this call.
# usage: bash run-switch.sh   (carry .whl; ~330 s)
set -uo pipefail
D=results/probes/oldest-victims-h200-20261201
G=results/probes/gather-groups-h200-20261201
L=/tmp/swlog; T=/tmp/sw-tree; rm -rf $L $T; mkdir -p $L
source scripts/gpu_node_setup.sh
mkdir $T && tar cf - --exclude=./.cache --exclude=./.whl --exclude=./.sgl . | tar xf - -C $T
ROOT=$PWD
patch -d $T -p1 < $D/hot-switch.patch > $L/patch.txt 2>&1 || { echo "patch failed"; exit 2; }
pk() { tar czf $OUT/switch.tgz -C $L .; }
t0=$SECONDS
for tree in $ROOT $T; do
  (cd $tree && PYTHONPATH=/tmp/site:$tree HISPARSE_CACHE_DIR=$tree/.cache/hisparse/jit python3 -m hisparse build configs/default.yaml -j 16) \
      > $L/build-$(basename $tree).txt 2>&1; echo "build $tree rc=$? $((SECONDS-t0))s"
done
inv() { (cd $T && PYTHONPATH=/tmp/site:$T HISPARSE_CACHE_DIR=$T/.cache/hisparse/jit "$@"); }
inv python3 -m pytest -q -m gpu -p no:cacheprovider tests/kernels/test_swap_multi_gpu.py tests/kernels/test_copy_planned_gpu.py > $L/tests-switch.txt 2>&1
rc=$?; echo "tests switch rc=$rc $(tail -1 $L/tests-switch.txt) $((SECONDS-t0))s"; pk
[ $rc -eq 0 ] || { echo "the patched copy fails its GPU tests: not timed"; exit 1; }
for rep in a b c; do
  for side in head switch; do
    tree=$ROOT; [ $side = switch ] && tree=$T
    (cd $tree && PYTHONPATH=/tmp/site:$tree HISPARSE_CACHE_DIR=$tree/.cache/hisparse/jit python3 -m hisparse run \
        $ROOT/$D/probe-switch.yaml --out $L/$side-$rep.json --no-plots) > $L/run-$side-$rep.txt 2>&1
    echo "run $side $rep rc=$? $((SECONDS-t0))s"; pk
  done
done
python3 $G/table.py --labels head-a,switch-a,head-b,switch-b,head-c,switch-c $L/head-a.json $L/switch-a.json \
    $L/head-b.json $L/switch-b.json $L/head-c.json $L/switch-c.json > $L/table.txt 2>&1; pk
(cd $T && OUT=$OUT HISPARSE_CACHE_DIR=$T/.cache/hisparse/jit PYTHONPATH=/tmp/site:$T bash scripts/gpu_session.sh node tests sanitize \
    stress:ours:-i,multi_step,-i,multi_step_planned) > $L/validation.txt 2>&1
echo "validation rc=$? $((SECONDS-t0))s"; tail -6 $L/validation.txt; pk
cat $L/table.txt
