#!/usr/bin/env bash
# ncu source-level stall sampling of the multi-step gather and commit at `serving` batch 1 (README.md).
set -uo pipefail
L=/tmp/ncusrc; rm -rf $L; mkdir -p $L
source scripts/gpu_node_setup.sh
python3 -m hisparse build configs/default.yaml -j 16 > $L/build.txt 2>&1
ncu --help | grep -B1 -A4 -- "--print-source\|--page " > $L/ncu-help.txt 2>&1
CASE=${1:-multi_step/serving/b1/s4/k2048/h4096/i576/pdl1}
timeout 200 ncu --clock-control none --target-processes all -k "regex:spec_(gather|commit)_kernel" --launch-skip 8 --launch-count 2 \
  --section SourceCounters --section WarpStateStats --section SpeedOfLight --import-source yes -o $L/b1 \
  python3 scripts/ncu_case.py "$CASE" > $L/ncu-run.txt 2>&1; echo "ncu rc=$?"
for src in cuda sass; do
  timeout 60 ncu -i $L/b1.ncu-rep --page source --csv --print-source $src > $L/source-$src.csv 2> $L/source-$src.err; echo "source $src rc=$? $(wc -l < $L/source-$src.csv) lines"
done
timeout 60 ncu -i $L/b1.ncu-rep --page details --csv > $L/details.csv 2>&1
tar czf $OUT/ncusrc.tgz -C $L .
head -c 1500 $L/source-cuda.err; head -5 $L/source-cuda.csv | cut -c1-400
