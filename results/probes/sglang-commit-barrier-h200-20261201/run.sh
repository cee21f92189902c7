#!/usr/bin/env bash
# One device call (README.md): sglang's multi-step swap patched with patches/sglang-0.5.23-commit-barrier.patch, checked and timed
# (probe-sglang.yaml) and stressed (hisparse check); then the unpatched kernel on the same cases.
set -uo pipefail
P=results/probes/sglang-commit-barrier-h200-20261201
L=/tmp/sglbar; rm -rf $L; mkdir -p $L
source scripts/gpu_node_setup.sh
t0=$SECONDS
rm -rf /tmp/sglp && cp -r .sgl /tmp/sglp
F=/tmp/sglp/sglang/kernels/jit/csrc/kvcacheio/hisparse_spec.cuh
patch -d /tmp/sglp -p1 < patches/sglang-0.5.23-commit-barrier.patch > $L/patch.txt 2>&1 || sed -i '881i\    __syncthreads();  // hisparse-bench probe: a barrier between the victim loop'"'"'s iterations' $F
echo "patched lines: $(grep -n 'hisparse-bench probe' $F)"
python3 -m hisparse build configs/default.yaml -j 16 > $L/build.txt 2>&1; echo "build rc=$? $((SECONDS-t0))s"
run_pair() {  # $1 label, $2 sglang tree
  SGLANG_JIT_CACHE_DIR=/tmp/sgl-jit-$1 HISPARSE_SGLANG_SRC=$2 python3 -m hisparse run $P/probe-sglang.yaml \
      --out $L/run-$1.json --no-plots > $L/run-$1.txt 2>&1; echo "run $1 rc=$? $((SECONDS-t0))s"
  SGLANG_JIT_CACHE_DIR=/tmp/sgl-jit-$1 HISPARSE_SGLANG_SRC=$2 timeout 150 python3 -m hisparse check -i sglang_multi_step \
      --item 576 --item 656 --item 584 --json $L/stress-$1.json > $L/stress-$1.txt 2>&1; echo "stress $1 rc=$? $((SECONDS-t0))s"; tail -2 $L/stress-$1.txt
}
run_pair patched /tmp/sglp
run_pair unpatched $PWD/.sgl
tar czf $OUT/sglbar.tgz -C $L .
python3 $P/table.py $L/run-unpatched.json $L/run-patched.json
