#!/usr/bin/env bash
# Prepared in the fifteenth session, NOT RUN (its device time was spent): the per-phase account of the
# batch-1 commit that the session could not get.
#   1. p5-phase-clock-v2.patch on the tree (6a19ee3's kernels): clock64 at each phase boundary of the
#      commit and at the gather's state / lookups / copy, printed for request 0 on every 8th epoch
#      (v1 printed on every 64th, which the engine's 20-call replays of a reset state never reach);
#   2. ncu source counters of the commit at `serving` b1 at the finest warp-sampling period, after
#      `ncu --help` shows the option's name in this ncu (`--sampling-interval` does not exist in 2025.3).
# usage: OUT=... bash run-next.sh   (carry .whl; ~150 s on a warm JIT cache)
set -uo pipefail
D=results/probes/b1-chain-h200-20261202
L=/tmp/nextlog; T=/tmp/p5v2; rm -rf $L $T; mkdir -p $L $T
source scripts/gpu_node_setup.sh
pk() { tar czf $OUT/next.tgz -C $L .; }
tar cf - --exclude=./.cache --exclude=./.whl --exclude=./.sgl . | tar xf - -C $T
patch -d $T -p1 < $D/p5-phase-clock-v2.patch > $L/patch.txt 2>&1 || { echo "patch failed"; exit 2; }
(cd $T && PYTHONPATH=/tmp/site:$T HISPARSE_CACHE_DIR=$T/.cache/hisparse/jit python3 -m hisparse run $PWD/$D/probe-p5.yaml \
    --out $L/p5.json --no-plots) > $L/run-p5.txt 2>&1
echo "p5 rc=$? $(grep -c PROBE $L/run-p5.txt) lines"; pk
ncu --help > $L/ncu-help.txt 2>&1; grep -i -A2 "sampling-interval" $L/ncu-help.txt | head -12
opt=$(grep -o -- "--warp-sampling-interval" $L/ncu-help.txt | head -1)
timeout 120 ncu --clock-control none --target-processes all -k "regex:spec_commit_kernel" --launch-skip 4 --launch-count 1 \
  --section SourceCounters --section WarpStateStats ${opt:+$opt 0} -o $L/ncu-commit-b1 \
  python3 scripts/ncu_case.py multi_step/serving/b1/s4/k2048/h4096/i576/pdl1 > $L/ncu-commit-b1.log 2>&1
echo "ncu rc=$?"
ncu --import $L/ncu-commit-b1.ncu-rep --csv --page source --print-source sass > $L/ncu-commit-b1-sass.csv 2>&1
rm -f $L/*.ncu-rep; pk
grep PROBE $L/run-p5.txt | head -40
