#!/usr/bin/env bash
# Nineteenth session, second call: pF2 = pF with the found list resolved by the commit after phase D (the
# row D leaves in miss_vals, loaded in flight across phase E; the entry loaded with the counters), since
# pF (call1/) cut the gather by 0.5 us at b1 and cost the commit 1.1 us. Also the CUPTI split at b8,
# where pF cost 4%. The working tree carries pF2; `head` is the tree with it reversed.
# usage: OUT=... bash run2.sh   (carry .whl)
set -uo pipefail
D=results/probes/b1-found-h200-20261203
P=results/probes/b1-phases-h200-20261202
L=/tmp/logF2; rm -rf $L /tmp/head; mkdir -p $L
source scripts/gpu_node_setup.sh
ROOT=$PWD; t0=$SECONDS
pk() { tar czf $OUT/found2.tgz -C $L .; }
mkdir /tmp/head; tar cf - --exclude=./.cache --exclude=./.whl --exclude=./.sgl --exclude=./results . | tar xf - -C /tmp/head
mkdir -p /tmp/head/results && cp -r results/probes /tmp/head/results/
patch -R -d /tmp/head -p1 < $D/pF2-found-list-after-d.patch > $L/patch.txt 2>&1 || { echo "reverse patch failed"; cat $L/patch.txt; exit 2; }
tree() { [ $1 = tF2 ] && echo $ROOT || echo /tmp/$1; }
inv() { local T=$(tree $1); shift; (cd $T && PYTHONPATH=/tmp/site:$T HISPARSE_CACHE_DIR=$T/.cache/hisparse/jit "$@"); }
for t in head tF2; do (inv $t python3 -m hisparse build $ROOT/$P/probe-b1.yaml -j 8 > $L/build-$t.txt 2>&1; echo "build $t rc=$? $((SECONDS-t0))s") & done; wait
inv tF2 python3 -m pytest -q -m gpu -p no:cacheprovider tests/kernels/test_swap_multi_gpu.py tests/kernels/test_copy_planned_gpu.py > $L/tests-tF2.txt 2>&1
echo "tests tF2 rc=$? $(tail -1 $L/tests-tF2.txt) $((SECONDS-t0))s"; pk
SANITIZE_LOG_DIR=$L/sanitize-tF2 inv tF2 bash scripts/gpu_sanitize.sh > $L/sanitize-tF2.txt 2>&1
echo "sanitize tF2 rc=$? $(tail -1 $L/sanitize-tF2.txt) $((SECONDS-t0))s"; pk
labels=""; files=""
for rep in ${REPS:-a b}; do
  for side in head tF2; do
    inv $side python3 -m hisparse run $ROOT/$P/probe-b1.yaml --out $L/$side-$rep.json --no-plots > $L/run-$side-$rep.txt 2>&1
    echo "run $side $rep rc=$? $((SECONDS-t0))s"; labels+="$side-$rep,"; files+=" $L/$side-$rep.json"; pk
  done
done
python3 results/probes/b1-chain-h200-20261202/table.py --labels ${labels%,} $files > $L/table.txt 2>&1; pk
for side in head tF2; do
  for c in b1 b8; do
    inv $side timeout 60 python3 scripts/probe_replay_modes.py --kernels $L/kernels-$side multi_step/serving/$c/s4/k2048/h4096/i576/pdl1 \
        > $L/kernels-$side-$c.txt 2>&1; echo "kernels $side $c rc=$? $((SECONDS-t0))s"; rm -rf $L/kernels-$side; pk
  done
done
cat $L/table.txt
for f in $L/kernels-*.txt; do echo "== $(basename $f)"; grep -A1 "  low\|  high" $f | head -4; done
