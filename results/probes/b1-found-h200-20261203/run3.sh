#!/usr/bin/env bash
# Nineteenth session, third call: what bounds the commit's phase D at `serving` b1 (5400-6700 cycles for
# ~800 misses, one per thread; loads issued together since d03d3b8, which did not shorten it; nor did
# the erase as plain stores (pC) or four SMs (tK)). pX-phase-d-diag.patch = the phase clocks of
# ../b1-phases-h200-20261202/p5-phase-clock-v3.patch + thread 0's own view inside D + HISPARSE_DIAG_D:
#   0 as landed; 1 no erase CASes; 2 no scattered stores (slot token, slot row, miss_vals); 3 loads only;
#   4 coalesced victims (slot c instead of the picked one: D's slot loads and stores coalesce).
# Variants 1-4 are wrong kernels on purpose: they run only as eager calls (scripts/ncu_case.py, no check, no
# timing), and their phase clocks are the measurement. usage: OUT=... bash run3.sh  (carry .whl)
set -uo pipefail
D=results/probes/b1-found-h200-20261203
CFG=$PWD/results/probes/b1-chain-h200-20261202/probe-p5.yaml
L=/tmp/logX; rm -rf $L; mkdir -p $L
source scripts/gpu_node_setup.sh
ROOT=$PWD; t0=$SECONDS
pk() { tar czf $OUT/diag.tgz -C $L .; }
for v in 0 1 2 3 4; do
  T=/tmp/d$v; rm -rf $T; mkdir $T
  tar cf - --exclude=./.cache --exclude=./.whl --exclude=./.sgl --exclude=./results . | tar xf - -C $T
  patch -d $T -p1 -s < $D/pX-phase-d-diag.patch || { echo "patch failed"; exit 2; }
  sed -i "s/^#define HISPARSE_DIAG_D 0 /#define HISPARSE_DIAG_D $v /" $T/csrc/include/hisparse/spec_commit.cuh
  grep -q "^#define HISPARSE_DIAG_D $v " $T/csrc/include/hisparse/spec_commit.cuh || { echo "sed failed for $v"; exit 2; }
  (cd $T && PYTHONPATH=/tmp/site:$T HISPARSE_CACHE_DIR=$T/.cache/hisparse/jit python3 -m hisparse build $CFG -j 4 > $L/build-$v.txt 2>&1; echo "build $v rc=$? $((SECONDS-t0))s") &
done; wait
for rep in a b; do
  for v in 0 1 2 3 4; do
    T=/tmp/d$v
    (cd $T && PYTHONPATH=/tmp/site:$T HISPARSE_CACHE_DIR=$T/.cache/hisparse/jit timeout 60 python3 scripts/ncu_case.py \
        multi_step/serving/b1/s4/k2048/h4096/i576/pdl1 --config $CFG --calls 96) > $L/d$v-$rep.txt 2>&1
    echo "d$v $rep rc=$? $(grep -c 'PROBE commit' $L/d$v-$rep.txt) lines $((SECONDS-t0))s"; pk
  done
done
python3 $D/diag.py $L/d?-?.txt > $L/diag.txt 2>&1; pk
cat $L/diag.txt
