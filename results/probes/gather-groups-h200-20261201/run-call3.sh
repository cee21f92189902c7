#!/usr/bin/env bash
# Call 3 (README.md): the gather's PDL trigger at its first instruction (HISPARSE_PROBE_FLAGS bit 1;
# the commit launches at once and polls its request's lookup count), on top of call 2's tree.
set -uo pipefail
P=results/probes/gather-groups-h200-20261201
L=/tmp/call3; rm -rf $L; mkdir -p $L
source scripts/gpu_node_setup.sh
t0=$SECONDS
python3 -m hisparse build configs/default.yaml -j 16 > $L/build.txt 2>&1; echo "build rc=$? $((SECONDS-t0))s"
HISPARSE_PROBE_FLAGS=2 python3 -m pytest -q -m gpu -p no:cacheprovider tests/kernels/test_swap_multi_gpu.py > $L/tests-f2.txt 2>&1
echo "tests flags=2 rc=$? $(tail -1 $L/tests-f2.txt) $((SECONDS-t0))s"
for rep in a b; do
  for f in 0 2 3; do
    HISPARSE_PROBE_FLAGS=$f python3 -m hisparse run $P/probe-groups.yaml --filter implementation=multi_step --out $L/c3-f$f$rep.json --no-plots > $L/run-f$f$rep.txt 2>&1
    echo "run flags=$f $rep rc=$? $((SECONDS-t0))s"
  done
done
HISPARSE_PROBE_FLAGS=2 timeout 120 python3 scripts/probe_replay_modes.py --kernels $L/k multi_step/serving/b1/s4/k2048/h4096/i576/pdl1 > $L/kernels-f2.txt 2>&1
echo "kernels rc=$? $((SECONDS-t0))s"; grep -v "^    [0-9 .-]*$" $L/kernels-f2.txt | tail -4
tar czf $OUT/call3.tgz -C $L .
echo "columns: flags 0a 2a 3a 0b 2b 3b"
python3 $P/table.py $L/c3-f0a.json $L/c3-f2a.json $L/c3-f3a.json $L/c3-f0b.json $L/c3-f2b.json $L/c3-f3b.json
