#!/usr/bin/env bash
# Prepared in the twelfth session, run in the thirteenth (../oldest-victims-h200-20261201/v1/): a same-call A/B of oldest-victims.patch (union-mode victims
# = the oldest unprotected slots) against the tree, then the patched copy's multi-step GPU tests and
# compute-sanitizer. The patch changes the policy in the reference and the kernel together, so the
# GPU tests compare the new kernel with the new reference.
# usage: bash run-oldest.sh   (carry .whl; ~2 builds + 6 x 30 s + LRU 30 s + tests 40 s + sanitizer 40 s)
set -uo pipefail
D=results/probes/victim-policy-cpu-20261201
G=results/probes/gather-groups-h200-20261201
L=/tmp/oldest; rm -rf $L /tmp/oldest-tree; mkdir -p $L
source scripts/gpu_node_setup.sh
mkdir /tmp/oldest-tree && tar cf - --exclude=./.cache --exclude=./.whl --exclude=./.sgl . | tar xf - -C /tmp/oldest-tree
ROOT=$PWD
patch -d /tmp/oldest-tree -p1 < $D/oldest-victims.patch > $L/patch.txt 2>&1 || { echo "patch failed"; exit 2; }
t0=$SECONDS
for tree in $ROOT /tmp/oldest-tree; do
  (cd $tree && PYTHONPATH=/tmp/site:$tree HISPARSE_CACHE_DIR=$tree/.cache/hisparse/jit python3 -m hisparse build configs/default.yaml -j 16) \
      > $L/build-$(basename $tree).txt 2>&1; echo "build $tree rc=$? $((SECONDS-t0))s"
done
# Correctness first: nothing is timed on a kernel that fails its tests.
(cd /tmp/oldest-tree && PYTHONPATH=/tmp/site:/tmp/oldest-tree HISPARSE_CACHE_DIR=/tmp/oldest-tree/.cache/hisparse/jit \
    python3 -m pytest -q -m gpu -p no:cacheprovider tests/kernels/test_swap_multi_gpu.py tests/kernels/test_copy_planned_gpu.py) > $L/tests-patched.txt 2>&1
rc=$?; echo "tests patched rc=$rc $(tail -1 $L/tests-patched.txt)"; tar czf $OUT/oldest.tgz -C $L .
[ $rc -eq 0 ] || { echo "patched copy fails its GPU tests: not timed"; exit 1; }
for rep in a b c; do
  for side in head patched; do
    tree=$ROOT; [ $side = patched ] && tree=/tmp/oldest-tree
    (cd $tree && PYTHONPATH=/tmp/site:$tree HISPARSE_CACHE_DIR=$tree/.cache/hisparse/jit python3 -m hisparse run \
        $ROOT/$D/probe-oldest.yaml --filter implementation=multi_step --out $L/$side-$rep.json --no-plots) > $L/run-$side-$rep.txt 2>&1
    echo "run $side $rep rc=$? $((SECONDS-t0))s"; tar czf $OUT/oldest.tgz -C $L .
  done
done
python3 -m hisparse run $D/probe-oldest.yaml --filter implementation=lru_sequential --out $L/lru.json --no-plots > $L/run-lru.txt 2>&1
echo "run lru rc=$? $((SECONDS-t0))s"
(cd /tmp/oldest-tree && PYTHONPATH=/tmp/site:/tmp/oldest-tree HISPARSE_CACHE_DIR=/tmp/oldest-tree/.cache/hisparse/jit \
    bash scripts/gpu_sanitize.sh) > $L/sanitize.txt 2>&1
echo "sanitize rc=$? $(tail -1 $L/sanitize.txt)"
tar czf $OUT/oldest.tgz -C $L .
python3 $G/table.py --labels head-a,patched-a,head-b,patched-b,head-c,patched-c,lru $L/head-a.json $L/patched-a.json \
    $L/head-b.json $L/patched-b.json $L/head-c.json $L/patched-c.json $L/lru.json | tee $L/table.txt
tar czf $OUT/oldest.tgz -C $L .
