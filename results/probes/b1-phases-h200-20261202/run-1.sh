#!/usr/bin/env bash
# Sixteenth session, call 1: the per-phase account of batch 1 (the fifteenth session's run-next.sh,
# with the gather's source counters added and known issue 18's fix in the tree).
#   1. p5-phase-clock-v2.patch (../b1-chain-h200-20261202/) on the tree: clock64 at each phase
#      boundary of the commit and the gather, printed for request 0 on every 8th epoch;
#   2. ncu source counters + warp states of the commit and of the gather at `serving` b1, finest
#      warp-sampling interval, exported as per-SASS-line CSV.
# usage: OUT=... bash run-1.sh   (carry .whl)
set -uo pipefail
P=results/probes/b1-chain-h200-20261202
L=/tmp/log1; T=/tmp/p5v2; rm -rf $L $T; mkdir -p $L $T
source scripts/gpu_node_setup.sh
pk() { tar czf $OUT/call1.tgz -C $L .; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/node.txt 2>&1
tar cf - --exclude=./.cache --exclude=./.whl --exclude=./.sgl . | tar xf - -C $T
patch -d $T -p1 < $P/p5-phase-clock-v2.patch > $L/patch.txt 2>&1 || { echo "patch failed"; exit 2; }
t0=$SECONDS
(cd $T && PYTHONPATH=/tmp/site:$T HISPARSE_CACHE_DIR=$T/.cache/hisparse/jit python3 -m hisparse run $PWD/$P/probe-p5.yaml \
    --out $L/p5.json --no-plots) > $L/run-p5.txt 2>&1
echo "p5 rc=$? $(grep -c PROBE $L/run-p5.txt) lines $((SECONDS-t0)) s"; pk
ncu --help > $L/ncu-help.txt 2>&1
opt=$(grep -o -- "--warp-sampling-interval" $L/ncu-help.txt | head -1); echo "ncu option: '$opt'"
for k in commit gather; do
  timeout 100 ncu --clock-control none --target-processes all -k "regex:spec_${k}_kernel" --launch-skip 4 --launch-count 1 \
    --section SourceCounters --section WarpStateStats ${opt:+$opt 0} -o $L/ncu-$k-b1 \
    python3 scripts/ncu_case.py multi_step/serving/b1/s4/k2048/h4096/i576/pdl1 > $L/ncu-$k-b1.log 2>&1
  echo "ncu $k rc=$?"
  ncu --import $L/ncu-$k-b1.ncu-rep --csv --page source --print-source sass > $L/ncu-$k-b1-sass.csv 2>&1
  ncu --import $L/ncu-$k-b1.ncu-rep --csv --page details > $L/ncu-$k-b1-details.csv 2>&1
  rm -f $L/*.ncu-rep; pk
done
grep PROBE $L/run-p5.txt | sort | uniq -c | sort -rn | head -5 >/dev/null
grep PROBE $L/run-p5.txt | awk '{print $2, $4, $5}' | sort | uniq -c | head -20
grep "PROBE commit" $L/run-p5.txt | head -12
grep "PROBE gather" $L/run-p5.txt | head -6
