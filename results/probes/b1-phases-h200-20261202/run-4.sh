#!/usr/bin/env bash
# Sixteenth session, call 4, on the landed tree: the headline slice of configs/vs-sglang.yaml on
# `upstream` and `distinct` (4 steps, hot 4096, 576 B, b1-b64); ncu of the gather and commit at
# `serving` b1 and b64 (scripts/gpu_session.sh ncu:); the phase clocks of p5-phase-clock-v3.patch.
# usage: OUT=... bash run-4.sh   (carry .whl and .sgl; ~450 s)
set -uo pipefail
source scripts/gpu_node_setup.sh
export HISPARSE_SGLANG_SRC=$PWD/.sgl
D=results/probes/b1-phases-h200-20261202
L=/tmp/log4; T=/tmp/p5v3; rm -rf $L $T; mkdir -p $L $T; t0=$SECONDS
pk() { tar czf $OUT/call4.tgz -C $L .; }
tar cf - --exclude=./.cache --exclude=./.whl --exclude=./.sgl --exclude=./results . | tar xf - -C $T
patch -d $T -p1 < $D/p5-phase-clock-v3.patch > $L/patch.txt 2>&1 || { echo "patch failed"; exit 2; }
(cd $T && PYTHONPATH=/tmp/site:$T HISPARSE_CACHE_DIR=$T/.cache/hisparse/jit python3 -m hisparse build $OLDPWD/results/probes/b1-chain-h200-20261202/probe-p5.yaml -j 8 > $L/build-p5.txt 2>&1) &
timeout -s INT 210 python3 -m hisparse run vs-sglang --filter workload=upstream,distinct --filter batch=1,8,32,64 \
  --filter hot_buffer_size=4096 --filter steps=4 --filter item_size_bytes=576 --no-plots --out $L/vs-sglang-headline.json > $L/vs-sglang-headline.log 2>&1
echo "vs-sglang headline rc=$? $((SECONDS-t0))s"; pk; wait
(OUT=$L/ncu bash scripts/gpu_session.sh ncu:multi_step/serving/b1/s4/k2048/h4096/i576/pdl1 ncu:multi_step/serving/b64/s4/k2048/h4096/i576/pdl1) > $L/ncu.txt 2>&1
echo "ncu rc=$? $((SECONDS-t0))s"; pk
(cd $T && PYTHONPATH=/tmp/site:$T HISPARSE_CACHE_DIR=$T/.cache/hisparse/jit timeout 90 python3 -m hisparse run $OLDPWD/results/probes/b1-chain-h200-20261202/probe-p5.yaml \
    --out $L/p5.json --no-plots) > $L/run-p5.txt 2>&1
echo "p5 rc=$? $(grep -c PROBE $L/run-p5.txt) lines $((SECONDS-t0))s"; pk
python3 $D/clocks.py $L/run-p5.txt > $L/phase-clocks-medians.txt 2>&1; pk
grep -A40 "ours vs sglang" $L/vs-sglang-headline.log | head -40; cat $L/phase-clocks-medians.txt
