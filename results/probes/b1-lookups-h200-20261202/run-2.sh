#!/usr/bin/env bash
# Seventeenth session, call 3: (1) ../item-bytes-h200-20261202/probe_items.py, what a host row's size costs per
# byte in the bare gather (64 B blocks or 32 B sectors); (2) p-gather-clock.patch, per-thread clocks of the
# gather's lookups (state, occurrence, hit/miss decision, claim CAS, ordinal / publication, scratch row, end,
# barrier) per class, printed every 8th call for tiles 0 and last of request 0, on ../b1-chain-h200-20261202/
# probe-p5.yaml (serving b1 / b8 / b64, upstream b1); (3) the cases of configs/default.yaml that the sixteenth
# session's run of these kernels left out (`upstream`, `distinct`: its run file has the 47 `serving` cases), cut
# (SIGINT: finished cases kept) at CUT s into the call (default 430).  usage: OUT=... [CUT=S] bash run-2.sh   (carry .whl)
set -uo pipefail
source scripts/gpu_node_setup.sh
ROOT=$PWD; D=results/probes/b1-lookups-h200-20261202; I=results/probes/item-bytes-h200-20261202
L=/tmp/log3; T=/tmp/gclk; rm -rf $L $T; mkdir -p $L $T; t0=$SECONDS
pk() { tar czf $OUT/call3.tgz -C $L .; }
tar cf - --exclude=./.cache --exclude=./.whl --exclude=./.sgl --exclude=./results . | tar xf - -C $T
mkdir -p $T/results && cp -r results/probes $T/results/
patch -d $T -p1 < $D/p-gather-clock.patch > $L/patch.txt 2>&1 || { echo "patch failed"; cat $L/patch.txt; exit 2; }
(cd $T && PYTHONPATH=/tmp/site:$T HISPARSE_CACHE_DIR=$T/.cache/hisparse/jit python3 -m hisparse build \
   results/probes/b1-chain-h200-20261202/probe-p5.yaml -j 8 > $L/build-gclk.txt 2>&1; echo "build gclk rc=$? $((SECONDS-t0))s") &
(python3 -m hisparse build default -j 8 > $L/build-default.txt 2>&1; echo "build default rc=$? $((SECONDS-t0))s") &
timeout 150 python3 $I/probe_items.py > $L/items.txt 2>&1; echo "items rc=$? $((SECONDS-t0))s"; pk
wait
(cd $T && PYTHONPATH=/tmp/site:$T HISPARSE_CACHE_DIR=$T/.cache/hisparse/jit timeout 150 python3 -m hisparse run \
   results/probes/b1-chain-h200-20261202/probe-p5.yaml --out $L/gclk.json --no-plots) > $L/run-gclk.txt 2>&1
echo "gclk rc=$? $(grep -c 'PROBE gclk' $L/run-gclk.txt) lines $((SECONDS-t0))s"; pk
python3 $D/gclk.py $L/run-gclk.txt > $L/gclk-medians.txt 2>&1; pk
mkdir -p $L/runs
rem=$((${CUT:-430} - (SECONDS - t0)))  # (timeout 0 would mean no limit)
if [ $rem -gt 20 ]; then
  timeout -s INT $rem python3 -m hisparse run default --filter workload=upstream,distinct --no-plots --out $L/runs \
    > $L/default-rest.log 2>&1
  echo "default (upstream, distinct) rc=$? $(ls $L/runs) $((SECONDS-t0))s"; pk
fi
cat $L/items.txt; cat $L/gclk-medians.txt; grep -E '^\[[0-9]+/' $L/default-rest.log | tail -3
