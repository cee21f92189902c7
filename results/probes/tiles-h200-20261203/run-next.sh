#!/usr/bin/env bash
# Prepared for the next session's first device call (not run). Carry .whl and .sgl.
# (Ran in the twenty-fourth session's call 1, results/probes/commit-stalls-h200-20261203/, without
# `--clock-control none`, since added here.)
#   bash results/probes/tiles-h200-20261203/run-next.sh SHA
# 1. ncu's stall reasons of the b1 commit (PDL off: the commit alone), ~60 s: what bounds its ~10.6 us.
# 2. vs-sglang's headline view (56 cases) on the tree, for the side-by-side figures of the landed gather
#    spread (0a5ccbb changed b1-b2 only on the H200), interrupted at the call's limit (the log prints the
#    resume command).
set -uo pipefail
SHA=${1:?the commit of the tree}
export HISPARSE_SGLANG_SRC=$PWD/.sgl HISPARSE_MACHINE=h200-sxm
source scripts/gpu_node_setup.sh
python3 -m hisparse build vs-sglang -j 8 > $OUT/build.txt 2>&1
timeout 240 ncu --clock-control none --target-processes all -k regex:spec_commit_kernel --launch-skip 8 --launch-count 2 \
  --section WarpStateStats --section SchedulerStats --section LaunchStats --csv --page raw \
  python3 scripts/ncu_case.py multi_step/serving/b1/s4/k2048/h4096/i576/pdl0 > $OUT/commit-b1-stalls.csv 2> $OUT/ncu-err.txt
echo "ncu rc=$? $SECONDS s"
left=$((560 - SECONDS))
HISPARSE_GIT_COMMIT=$SHA HISPARSE_GIT_DIRTY=0 timeout -s INT $left python3 -m hisparse run vs-sglang --view headline \
  --no-plots --out $OUT/vs-sglang.json > $OUT/vs-sglang-log.txt 2>&1
tail -8 $OUT/vs-sglang-log.txt
python3 - "$OUT/commit-b1-stalls.csv" <<'PY'
import csv, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
if len(rows) > 2:
    head, units, vals = rows[0], rows[1], rows[2:]
    for i, name in enumerate(head):
        if "issue_stalled" in name and "per_issue_active" in name:
            print(f"{name:90s} {vals[-1][i]}")
PY
