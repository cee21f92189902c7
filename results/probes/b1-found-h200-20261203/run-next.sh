#!/usr/bin/env bash
# Prepared in the nineteenth session after its device time was spent; run as call 5 of the twentieth (README, "Calls 5-6"). pV = phase D writes
# miss_vals only when phase G will read it (overflow or a pending output): one store fewer per miss in D,
# where call 3 found each store or atomic costs the warp ~one round trip. tF3 (call 4) carried this
# with the found list and gave `upstream` / `distinct` b1 0.976 / 0.974, where no found lanes exist, so
# the store is the likely cause; this A/B measures it alone. Expected: the commit ~0.3 us shorter (PDL
# off shows it), `upstream` / `distinct` b1 -2%, `serving` b1 unchanged (its gather path ends with the
# commit), b8-b64 unchanged. Land it if so (after the tests and the sanitizer below pass).
# The working tree must carry pV (git apply); `head` is the tree with it reversed.
# usage: git apply results/probes/b1-found-h200-20261203/pV-vals-when-read.patch && OUT=... bash run-next.sh   (carry .whl; ~320 s on a fresh machine). If it lands, validate the
# landed tree in full (results/probes/landed-h200-20261202/run.sh PART=1: all GPU tests, sanitizer, stress).
set -uo pipefail
D=results/probes/b1-found-h200-20261203
P=results/probes/b1-phases-h200-20261202
L=/tmp/logV; rm -rf $L /tmp/head; mkdir -p $L
source scripts/gpu_node_setup.sh
ROOT=$PWD; t0=$SECONDS
pk() { tar czf $OUT/next.tgz -C $L .; }
mkdir /tmp/head; tar cf - --exclude=./.cache --exclude=./.whl --exclude=./.sgl --exclude=./results . | tar xf - -C /tmp/head
mkdir -p /tmp/head/results && cp -r results/probes /tmp/head/results/
patch -R -d /tmp/head -p1 < $D/pV-vals-when-read.patch > $L/patch.txt 2>&1 || { echo "reverse patch failed"; cat $L/patch.txt; exit 2; }
tree() { [ $1 = tV ] && echo $ROOT || echo /tmp/$1; }
inv() { local T=$(tree $1); shift; (cd $T && PYTHONPATH=/tmp/site:$T HISPARSE_CACHE_DIR=$T/.cache/hisparse/jit "$@"); }
for t in head tV; do (inv $t python3 -m hisparse build $ROOT/$P/probe-b1.yaml -j 8 > $L/build-$t.txt 2>&1; echo "build $t rc=$? $((SECONDS-t0))s") & done; wait
inv tV python3 -m pytest -q -m gpu -p no:cacheprovider tests/kernels/test_swap_multi_gpu.py tests/kernels/test_copy_planned_gpu.py > $L/tests-tV.txt 2>&1
echo "tests tV rc=$? $(tail -1 $L/tests-tV.txt) $((SECONDS-t0))s"; pk
SANITIZE_LOG_DIR=$L/sanitize-tV inv tV bash scripts/gpu_sanitize.sh > $L/sanitize-tV.txt 2>&1
echo "sanitize tV rc=$? $(tail -1 $L/sanitize-tV.txt) $((SECONDS-t0))s"; pk
labels=""; files=""
for rep in ${REPS:-a b}; do
  for side in head tV; do
    inv $side python3 -m hisparse run $ROOT/$P/probe-b1.yaml --out $L/$side-$rep.json --no-plots > $L/run-$side-$rep.txt 2>&1
    echo "run $side $rep rc=$? $((SECONDS-t0))s"; labels+="$side-$rep,"; files+=" $L/$side-$rep.json"; pk
  done
done
python3 results/probes/b1-chain-h200-20261202/table.py --labels ${labels%,} $files > $L/table.txt 2>&1; pk
for side in head tV; do
  for c in serving/b1/s4/k2048/h4096/i576/pdl1 serving/b1/s4/k2048/h4096/i576/pdl0 upstream/b1/s4/k2048/h4096/i576/pdl1; do
    n=$(echo $c | cut -d/ -f1)-$(basename $c)
    inv $side timeout 60 python3 scripts/probe_replay_modes.py --kernels $L/kernels-$side multi_step/$c \
        > $L/kernels-$side-$n.txt 2>&1; echo "kernels $side $n rc=$? $((SECONDS-t0))s"; rm -rf $L/kernels-$side; pk
  done
done
cat $L/table.txt
for f in $L/kernels-*.txt; do echo "== $(basename $f)"; grep -A1 "  low\|  high" $f | head -4; done
