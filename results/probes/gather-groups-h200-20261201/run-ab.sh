#!/usr/bin/env bash
# NOT RUN YET (prepared in the tenth session for the next one): a same-call A/B of one patch against the
# tree.   usage: bash run-ab.sh PATCH [CONFIG]   (PATCH: merged-commit.patch or small-pool.patch of this
# folder; CONFIG: default probe-groups.yaml). The tree and a patched copy run CONFIG (multi-step only)
# alternately, three times each, on one machine; then the multi-step GPU tests on the patched copy.
# About 6 x 25 s + 2 builds of ~20 s + 30 s of tests + the machine's start.
set -uo pipefail
P=results/probes/gather-groups-h200-20261201
L=/tmp/ab; rm -rf $L /tmp/ab-tree; mkdir -p $L
source scripts/gpu_node_setup.sh
mkdir /tmp/ab-tree && tar cf - --exclude=./.cache --exclude=./.whl --exclude=./.sgl . | tar xf - -C /tmp/ab-tree
ROOT=$PWD
PATCH=${1:?usage: run-ab.sh PATCH [CONFIG]}; CONFIG=${2:-$P/probe-groups.yaml}
case $CONFIG in /*) ;; *) CONFIG=$ROOT/$CONFIG ;; esac  # absolute: both trees read the same config file
patch -d /tmp/ab-tree -p1 < "$PATCH" > $L/patch.txt 2>&1 || { echo "patch failed"; exit 2; }
t0=$SECONDS
for tree in $ROOT /tmp/ab-tree; do
  (cd $tree && PYTHONPATH=/tmp/site:$tree HISPARSE_CACHE_DIR=$tree/.cache/hisparse/jit python3 -m hisparse build configs/default.yaml -j 16) \
      > $L/build-$(basename $tree).txt 2>&1; echo "build $tree rc=$? $((SECONDS-t0))s"
done
for rep in a b c; do
  for side in head patched; do
    tree=$ROOT; [ $side = patched ] && tree=/tmp/ab-tree
    (cd $tree && PYTHONPATH=/tmp/site:$tree HISPARSE_CACHE_DIR=$tree/.cache/hisparse/jit python3 -m hisparse run \
        $CONFIG --filter implementation=multi_step --out $L/$side-$rep.json --no-plots) > $L/run-$side-$rep.txt 2>&1
    echo "run $side $rep rc=$? $((SECONDS-t0))s"
  done
done
(cd /tmp/ab-tree && PYTHONPATH=/tmp/site:/tmp/ab-tree HISPARSE_CACHE_DIR=/tmp/ab-tree/.cache/hisparse/jit \
    python3 -m pytest -q -m gpu -p no:cacheprovider tests/kernels/test_swap_multi_gpu.py) > $L/tests-patched.txt 2>&1
echo "tests patched rc=$? $(tail -1 $L/tests-patched.txt)"
tar czf $OUT/ab.tgz -C $L .
python3 $P/table.py --labels head-a,patched-a,head-b,patched-b,head-c,patched-c $L/head-a.json $L/patched-a.json \
    $L/head-b.json $L/patched-b.json $L/head-c.json $L/patched-c.json
