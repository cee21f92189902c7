#!/usr/bin/env bash
# NOT RUN YET (prepared in the tenth session for the next one): a same-call A/B of the merged commit
# (merged-commit.patch: experiment.patch's spec_commit.cuh alone, against 281eae8's tree). The tree and a
# patched copy run probe-groups.yaml alternately, three times each, on one machine; then the multi-step
# GPU tests and the sanitizer on the patched copy. About 6 x 25 s + 2 builds + 60 s + 35 s.
set -uo pipefail
P=results/probes/gather-groups-h200-20261201
L=/tmp/ab; rm -rf $L /tmp/ab-tree; mkdir -p $L
source scripts/gpu_node_setup.sh
mkdir /tmp/ab-tree && tar cf - --exclude=./.cache --exclude=./.whl --exclude=./.sgl . | tar xf - -C /tmp/ab-tree
patch -d /tmp/ab-tree -p1 < $P/merged-commit.patch > $L/patch.txt 2>&1 || { echo "patch failed"; exit 2; }
t0=$SECONDS
for tree in $PWD /tmp/ab-tree; do
  (cd $tree && PYTHONPATH=/tmp/site:$tree HISPARSE_CACHE_DIR=$tree/.cache/hisparse/jit python3 -m hisparse build configs/default.yaml -j 16) \
      > $L/build-$(basename $tree).txt 2>&1; echo "build $tree rc=$? $((SECONDS-t0))s"
done
for rep in a b c; do
  for side in head merged; do
    tree=$PWD; [ $side = merged ] && tree=/tmp/ab-tree
    (cd $tree && PYTHONPATH=/tmp/site:$tree HISPARSE_CACHE_DIR=$tree/.cache/hisparse/jit python3 -m hisparse run \
        $P/probe-groups.yaml --filter implementation=multi_step --out $L/$side-$rep.json --no-plots) > $L/run-$side-$rep.txt 2>&1
    echo "run $side $rep rc=$? $((SECONDS-t0))s"
  done
done
(cd /tmp/ab-tree && PYTHONPATH=/tmp/site:/tmp/ab-tree HISPARSE_CACHE_DIR=/tmp/ab-tree/.cache/hisparse/jit \
    python3 -m pytest -q -m gpu -p no:cacheprovider tests/kernels/test_swap_multi_gpu.py) > $L/tests-merged.txt 2>&1
echo "tests merged rc=$? $(tail -1 $L/tests-merged.txt)"
tar czf $OUT/ab.tgz -C $L .
python3 $P/table.py --labels head-a,merged-a,head-b,merged-b,head-c,merged-c $L/head-a.json $L/merged-a.json \
    $L/head-b.json $L/merged-b.json $L/head-c.json $L/merged-c.json
