#!/usr/bin/env bash
# Second call (README.md): the patched kernel's 4-step stress cells, and sglang_multi_step_planned's
# 2-step 576 B cells unpatched and patched.
set -uo pipefail
P=results/probes/sglang-commit-barrier-h200-20261201
L=/tmp/sglbar2; rm -rf $L; mkdir -p $L
source scripts/gpu_node_setup.sh
t0=$SECONDS
rm -rf /tmp/sglp && cp -r .sgl /tmp/sglp && patch -d /tmp/sglp -p1 < patches/sglang-0.5.23-commit-barrier.patch > $L/patch.txt 2>&1
echo "patched lines: $(grep -n 'hisparse-bench probe' /tmp/sglp/sglang/kernels/jit/csrc/kvcacheio/hisparse_spec.cuh)"
stress() {  # $1 label, $2 tree, $3 seconds, rest: check options
  local label=$1 tree=$2 secs=$3; shift 3
  SGLANG_JIT_CACHE_DIR=/tmp/sgl-jit-${label%%-*} HISPARSE_SGLANG_SRC=$tree timeout $secs python3 -m hisparse check "$@" \
      --json $L/stress-$label.json > $L/stress-$label.txt 2>&1
  echo "stress $label rc=$? $((SECONDS-t0))s: $(grep -c ': pass' $L/stress-$label.txt) pass, $(grep -c ': fail' $L/stress-$label.txt) fail, $(grep -c ': fault' $L/stress-$label.txt) fault"
}
stress patched-s4 /tmp/sglp 150 -i sglang_multi_step --steps 4 --item 576 --item 656 --item 584
stress unpatched-planned $PWD/.sgl 45 -i sglang_multi_step_planned --steps 2 --item 576
stress patched-planned /tmp/sglp 45 -i sglang_multi_step_planned --steps 2 --item 576
tar czf $OUT/sglbar2.tgz -C $L .
