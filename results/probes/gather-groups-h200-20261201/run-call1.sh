#!/usr/bin/env bash
# Call 1 of the copy-group probe (README.md): GPU tests of the multi-step swap at 2 and 4 groups, then
# the probe config at 1, 2 and 4 groups. Run from the repository root on the GPU node.
set -uo pipefail
P=results/probes/gather-groups-h200-20261201
L=/tmp/groups; rm -rf $L; mkdir -p $L
source scripts/gpu_node_setup.sh
t0=$SECONDS
python3 -m hisparse build configs/default.yaml -j 16 > $L/build.txt 2>&1; echo "build rc=$? $((SECONDS-t0))s"
for g in 4 2; do
  HISPARSE_PROBE_GATHER_GROUPS=$g python3 -m pytest -q -m gpu -p no:cacheprovider tests/kernels/test_swap_multi_gpu.py > $L/tests-g$g.txt 2>&1
  echo "tests g$g rc=$? $(tail -1 $L/tests-g$g.txt) $((SECONDS-t0))s"
done
python3 -m hisparse run $P/probe-groups.yaml --out $L/g1.json --no-plots > $L/run-g1.txt 2>&1; echo "run g1 rc=$? $((SECONDS-t0))s"
for g in 2 4; do
  HISPARSE_PROBE_GATHER_GROUPS=$g python3 -m hisparse run $P/probe-groups.yaml --filter implementation=multi_step --out $L/g$g.json --no-plots > $L/run-g$g.txt 2>&1
  echo "run g$g rc=$? $((SECONDS-t0))s"
done
tar czf $OUT/groups.tgz -C $L .
python3 $P/table.py $L/g1.json $L/g2.json $L/g4.json | tee $OUT/table.txt
