#!/usr/bin/env bash
# Nineteenth session: the `found` lanes listed for the commit instead of waiting for their claimer's
# ordinal (pF-found-list.patch; the working tree carries it, `head` is the tree with it reversed).
#   Expected: at `serving` b1 the round's barrier ~1000-1500 cycles earlier (upstream, which has no found
#   lanes, reaches it at 8428-8820 against 9536-9726), so the copy and the count (the commit's start)
#   ~0.5 us earlier; the commit resolves the list with three loads overlapped with phases A-B.
# Steps: build both; the multi-step + planned GPU tests and compute-sanitizer of both (head's are the
# validation the eighteenth session left for a522641); head and tF alternated twice on
# ../b1-phases-h200-20261202/probe-b1.yaml; the CUPTI split of `serving` b1 for both.
# usage: OUT=... bash run.sh   (carry .whl)
set -uo pipefail
D=results/probes/b1-found-h200-20261203
P=results/probes/b1-phases-h200-20261202
L=/tmp/logF; rm -rf $L /tmp/head; mkdir -p $L
source scripts/gpu_node_setup.sh
ROOT=$PWD; t0=$SECONDS
pk() { tar czf $OUT/found.tgz -C $L .; }
mkdir /tmp/head; tar cf - --exclude=./.cache --exclude=./.whl --exclude=./.sgl --exclude=./results . | tar xf - -C /tmp/head
mkdir -p /tmp/head/results && cp -r results/probes /tmp/head/results/
patch -R -d /tmp/head -p1 < $D/pF-found-list.patch > $L/patch.txt 2>&1 || { echo "reverse patch failed"; cat $L/patch.txt; exit 2; }
tree() { [ $1 = tF ] && echo $ROOT || echo /tmp/$1; }
inv() { local T=$(tree $1); shift; (cd $T && PYTHONPATH=/tmp/site:$T HISPARSE_CACHE_DIR=$T/.cache/hisparse/jit "$@"); }
for t in head tF; do (inv $t python3 -m hisparse build $ROOT/$P/probe-b1.yaml -j 8 > $L/build-$t.txt 2>&1; echo "build $t rc=$? $((SECONDS-t0))s") & done; wait
for t in tF head; do
  inv $t python3 -m pytest -q -m gpu -p no:cacheprovider tests/kernels/test_swap_multi_gpu.py tests/kernels/test_copy_planned_gpu.py > $L/tests-$t.txt 2>&1
  echo "tests $t rc=$? $(tail -1 $L/tests-$t.txt) $((SECONDS-t0))s"; pk
  SANITIZE_LOG_DIR=$L/sanitize-$t inv $t bash scripts/gpu_sanitize.sh > $L/sanitize-$t.txt 2>&1
  echo "sanitize $t rc=$? $(tail -1 $L/sanitize-$t.txt) $((SECONDS-t0))s"; pk
done
labels=""; files=""
for rep in ${REPS:-a b}; do
  for side in head tF; do
    inv $side python3 -m hisparse run $ROOT/$P/probe-b1.yaml --out $L/$side-$rep.json --no-plots > $L/run-$side-$rep.txt 2>&1
    echo "run $side $rep rc=$? $((SECONDS-t0))s"; labels+="$side-$rep,"; files+=" $L/$side-$rep.json"; pk
  done
done
python3 results/probes/b1-chain-h200-20261202/table.py --labels ${labels%,} $files > $L/table.txt 2>&1; pk
for side in head tF; do
  inv $side timeout 60 python3 scripts/probe_replay_modes.py --kernels $L/kernels-$side multi_step/serving/b1/s4/k2048/h4096/i576/pdl1 \
      > $L/kernels-$side.txt 2>&1; echo "kernels $side rc=$? $((SECONDS-t0))s"; rm -rf $L/kernels-$side; pk
done
cat $L/table.txt
for s in head tF; do echo "== $s"; grep -A1 "  low\|  high" $L/kernels-$s.txt | head -4; done
