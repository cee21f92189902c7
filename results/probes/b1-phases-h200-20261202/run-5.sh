#!/usr/bin/env bash
# Sixteenth session, call 5 (the last ~170 s of device time): is phase D bound by its atomics? tC = the
# tree + pC-erase-store.patch (the erase as two loads and one plain store instead of two CASes), against
# the tree, alternated twice on probe-c.yaml (every case checked against the reference before it is
# timed); then tC's multi-step GPU tests, if the time is left.  usage: OUT=... bash run-5.sh (carry .whl)
set -uo pipefail
D=results/probes/b1-phases-h200-20261202
L=/tmp/log5; T=/tmp/tC; rm -rf $L $T; mkdir -p $L $T
source scripts/gpu_node_setup.sh
ROOT=$PWD; t0=$SECONDS
pk() { tar czf $OUT/call5.tgz -C $L .; }
tar cf - --exclude=./.cache --exclude=./.whl --exclude=./.sgl --exclude=./results . | tar xf - -C $T
patch -d $T -p1 < $D/pC-erase-store.patch > $L/patch.txt 2>&1 || { echo "patch failed"; exit 2; }
tree() { [ $1 = head ] && echo $ROOT || echo $T; }
inv() { local X=$(tree $1); shift; (cd $X && PYTHONPATH=/tmp/site:$X HISPARSE_CACHE_DIR=$X/.cache/hisparse/jit "$@"); }
for t in head tC; do (inv $t python3 -m hisparse build $ROOT/$D/probe-c.yaml -j 8 > $L/build-$t.txt 2>&1; echo "build $t rc=$? $((SECONDS-t0))s") & done; wait
labels=""; files=""
for rep in a b; do
  for side in head tC; do
    inv $side python3 -m hisparse run $ROOT/$D/probe-c.yaml --out $L/$side-$rep.json --no-plots > $L/run-$side-$rep.txt 2>&1
    echo "run $side $rep rc=$? $((SECONDS-t0))s"; labels+="$side-$rep,"; files+=" $L/$side-$rep.json"; pk
  done
done
python3 results/probes/b1-chain-h200-20261202/table.py --labels ${labels%,} $files > $L/table.txt 2>&1; pk
cat $L/table.txt
inv tC python3 -m pytest -q -x -m gpu -p no:cacheprovider tests/kernels/test_swap_multi_gpu.py > $L/tests-tC.txt 2>&1
echo "tests tC rc=$? $(tail -1 $L/tests-tC.txt) $((SECONDS-t0))s"; pk
