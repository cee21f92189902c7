#!/usr/bin/env bash
# Call 2 (README.md): the commit's phases B and D merged (a miss is applied as soon as it has a
# victim) and, behind HISPARSE_PROBE_FLAGS=1, the gather's host-row load issued with the hot lookup.
# GPU tests of the multi-step swap with both, compute-sanitizer, then the probe config twice each.
set -uo pipefail
P=results/probes/gather-groups-h200-20261201
L=/tmp/call2; rm -rf $L; mkdir -p $L
source scripts/gpu_node_setup.sh
t0=$SECONDS
python3 -m hisparse build configs/default.yaml -j 16 > $L/build.txt 2>&1; echo "build rc=$? $((SECONDS-t0))s"
for f in 0 1; do
  HISPARSE_PROBE_FLAGS=$f python3 -m pytest -q -m gpu -p no:cacheprovider tests/kernels/test_swap_multi_gpu.py > $L/tests-f$f.txt 2>&1
  echo "tests flags=$f rc=$? $(tail -1 $L/tests-f$f.txt) $((SECONDS-t0))s"
done
bash scripts/gpu_sanitize.sh > $L/sanitize.txt 2>&1; echo "sanitize rc=$? $((SECONDS-t0))s"; tail -8 $L/sanitize.txt
for rep in a b; do
  for f in 0 1; do
    HISPARSE_PROBE_FLAGS=$f python3 -m hisparse run $P/probe-groups.yaml --filter implementation=multi_step --out $L/c2-f$f$rep.json --no-plots > $L/run-f$f$rep.txt 2>&1
    echo "run flags=$f $rep rc=$? $((SECONDS-t0))s"
  done
done
tar czf $OUT/call2.tgz -C $L .
echo "columns: call-1 baseline (G1), new commit a, new commit + early host row a, then b b"
python3 $P/table.py /tmp/groups/g1.json $L/c2-f0a.json $L/c2-f1a.json $L/c2-f0b.json $L/c2-f1b.json 2>/dev/null || \
  python3 $P/table.py $L/c2-f0a.json $L/c2-f1a.json $L/c2-f0b.json $L/c2-f1b.json
