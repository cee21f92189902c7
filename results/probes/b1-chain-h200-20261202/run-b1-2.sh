#!/usr/bin/env bash
# Fifteenth session, call 2 (README.md): p2 alone (the commit's prefetches and one-warp threshold, the
# one change of call 1 that moved anything) A/B'd against the tree twice and fully validated, so that
# it can land from this call; then the phase clocks of the tree (p5) and ncu of the tree's gather and
# commit on `serving` b1 (with source counters) and b64.  usage: OUT=... bash run-b1-2.sh (carry .whl)
set -uo pipefail
D=results/probes/b1-chain-h200-20261202
L=/tmp/b1log2; rm -rf $L /tmp/p2 /tmp/p5; mkdir -p $L
source scripts/gpu_node_setup.sh
ROOT=$PWD
pk() { tar czf $OUT/b1-2.tgz -C $L .; }
for t in p2:p2only-commit p5:p5-phase-clock; do
  T=/tmp/${t%%:*}; mkdir $T; tar cf - --exclude=./.cache --exclude=./.whl --exclude=./.sgl . | tar xf - -C $T
  patch -d $T -p1 < $D/${t#*:}.patch > $L/patch-${t%%:*}.txt 2>&1 || { echo "patch $t failed"; exit 2; }
done
t0=$SECONDS
build() { (cd $1 && PYTHONPATH=/tmp/site:$1 HISPARSE_CACHE_DIR=$1/.cache/hisparse/jit python3 -m hisparse build configs/default.yaml -j 16) > $L/build-$2.txt 2>&1; echo "build $2 rc=$? $((SECONDS-t0))s"; }
build $ROOT head & build /tmp/p2 p2 & build /tmp/p5 p5 & wait
inv() { local T=$1; shift; (cd $T && PYTHONPATH=/tmp/site:$T HISPARSE_CACHE_DIR=$T/.cache/hisparse/jit "$@"); }
labels=""; files=""
for rep in a b; do
  for side in head p2; do
    tree=$ROOT; [ $side != head ] && tree=/tmp/$side
    inv $tree python3 -m hisparse run $ROOT/$D/probe-b1.yaml --out $L/$side-$rep.json --no-plots > $L/run-$side-$rep.txt 2>&1
    echo "run $side $rep rc=$? $((SECONDS-t0))s"; labels+="$side-$rep,"; files+=" $L/$side-$rep.json"; pk
  done
done
python3 $D/table.py --labels ${labels%,} $files > $L/table.txt 2>&1; pk
(cd /tmp/p2 && OUT=$L/validation HISPARSE_CACHE_DIR=/tmp/p2/.cache/hisparse/jit PYTHONPATH=/tmp/site:/tmp/p2 bash scripts/gpu_session.sh node tests sanitize \
    stress:ours:-i,multi_step,-i,multi_step_planned) > $L/validation.txt 2>&1
echo "validation rc=$? $((SECONDS-t0))s"; tail -5 $L/validation.txt; pk
inv /tmp/p5 python3 -m hisparse run $ROOT/$D/probe-p5.yaml --out $L/p5.json --no-plots > $L/run-p5.txt 2>&1
echo "p5 rc=$? $(grep -c PROBE $L/run-p5.txt) lines $((SECONDS-t0))s"; pk
for b in 1 64; do
  c=multi_step/serving/b$b/s4/k2048/h4096/i576/pdl1
  timeout 150 ncu --clock-control none --target-processes all -k "regex:spec_(gather|commit)_kernel" --launch-skip 8 --launch-count 2 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats \
    --section SchedulerStats --section SourceCounters -o $L/ncu-b$b python3 scripts/ncu_case.py $c > $L/ncu-b$b.log 2>&1
  echo "ncu b$b rc=$? $((SECONDS-t0))s"
  ncu --import $L/ncu-b$b.ncu-rep --csv --page details > $L/ncu-b$b-details.csv 2>&1
  [ $b = 1 ] && ncu --import $L/ncu-b$b.ncu-rep --csv --page source --print-source sass > $L/ncu-b1-sass.csv 2>&1
  [ $b = 1 ] && ncu --import $L/ncu-b$b.ncu-rep --csv --page source --print-source cuda > $L/ncu-b1-cuda.csv 2>&1
  pk
done
rm -f $L/*.ncu-rep; pk
grep PROBE $L/run-p5.txt | head -40
cat $L/table.txt
