#!/usr/bin/env bash
# One command that validates and measures everything, for a GPU node reached through a
# one-shot command (no network). Usage:  OUT=/some/dir bash scripts/gpu_session.sh STEP...
# Environment: BENCH_DEADLINE (s after start: SIGINT to a bench step still running), BENCH_RESUME (a run
# file the bench step resumes).
# Steps: node build tests tests:<files> sanitize bench:<config>[:--ci] history:<N commits> replay:<commit> cache
#        stress:<name>:<check options, commas for spaces> (hisparse-bench check --json <name>.json --resume ...)
#        ncu:<case id of configs/default.yaml> (the multi-step swap's gather and commit kernels of one call, after 4 calls;
#        --clock-control none: the GPU's clocks stay as the node set them, as in the timed runs)
# Every step logs to $OUT/<step>.txt; a summary table is printed last.
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
set -uo pipefail
FINAL=${OUT:-/tmp/hisparse-out}   # one archive to fetch back: everything is packed after each step
OUT=/tmp/hisparse-session
rm -rf "$OUT"; mkdir -p "$OUT" "$FINAL"
source scripts/gpu_node_setup.sh || { echo "wheelhouse install failed"; exit 2; }
summary=()
step() {  # step NAME CMD...: run, log, remember the exit code and wall time
  local name=$1; shift
  local t0=$SECONDS
  "$@" > "$OUT/$name.txt" 2>&1
  local rc=$?
  summary+=("$(printf '%-28s rc=%-3s %4ss  %s' "$name" "$rc" "$((SECONDS - t0))" "$(tail -1 "$OUT/$name.txt" | cut -c1-90)")")
  pack
  return $rc
}
pack() {  # after every step, so a command killed at its time limit still returns what finished
  printf '%s\n' "${summary[@]}" > "$OUT/summary.txt"
  [ -f "$OUT/jit-cache.tgz" ] && mv "$OUT/jit-cache.tgz" "$FINAL/"
  tar czf "$FINAL/session.tgz" -C "$OUT" . 2>/dev/null
  cp "$OUT/summary.txt" "$FINAL/"
}
node_info() {
  nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current,clocks.sm,clocks.mem --format=csv
  python3 -c "import torch, tvm_ffi; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'tvm_ffi', tvm_ffi.__version__)"
  nvcc --version | tail -2
  git --version || echo "no git on this node"
  python3 -m hisparse env
}
for s in "$@"; do
  case $s in
    node) step node node_info ;;
    build) step build python3 -m hisparse build configs/default.yaml -j 16 ;;
    tests) step gpu-tests python3 -m pytest -q -m gpu -p no:cacheprovider tests/ ;;
    tests:*) files=${s#tests:}
             step "gpu-tests-$(echo "$files" | tr -c 'A-Za-z0-9_\n' '_' | cut -c1-60)" \
               python3 -m pytest -q -m gpu -p no:cacheprovider $files ;;
    sanitize) step sanitize bash scripts/gpu_sanitize.sh ;;
    bench:*) IFS=: read -r _ cfg flag <<< "$s"
             n_bench=$(( ${n_bench:-0} + 1 ))  # a config may run several times (re-run agreement)
             # BENCH_DEADLINE (seconds since this script started): end the run with SIGINT then, so it
             # keeps its finished cases and prints the --resume command (unset: no limit)
             limit=0; [ -n "${BENCH_DEADLINE:-}" ] && limit=$(( BENCH_DEADLINE > SECONDS + 5 ? BENCH_DEADLINE - SECONDS : 5 ))
             step "bench-$cfg-$n_bench" timeout -s INT "$limit" \
               python3 -m hisparse run "configs/$cfg.yaml" ${flag:-} ${BENCH_RESUME:+--resume "$BENCH_RESUME"} --out "$OUT"
             # a resumed run grows the file it resumes, wherever that is: bring it back with the rest
             [ -n "${BENCH_RESUME:-}" ] && cp "$BENCH_RESUME" "$OUT/" && pack ;;
    history:*) # the device copy has no .git: carry a bundle (scripts/pack_history.sh N makes it, and
             # the per-commit trees for a node without git: runs then go to history-trees/, recorded later)
             n=${s#history:}
             if command -v git >/dev/null; then
               step history bash -c "rm -rf /tmp/hs-repo && git clone -q -b main .bundle/main.bundle /tmp/hs-repo && cd /tmp/hs-repo && python3 -m hisparse history HEAD~$n..HEAD --results $OUT/history-results --python python3"
             else
               step history-trees bash scripts/run_trees.sh .bundle/trees "$OUT/history-trees"
             fi ;;
    replay:*) # one commit (e.g. from before the re-housing) measured by `history` and by asv, from a clone
             # of the carried bundle (scripts/pack_history.sh); the asv suite of HEAD measures the old tree
             sha=${s#replay:}
             step clone bash -c "rm -rf /tmp/hs-repo && git clone -q -b main .bundle/main.bundle /tmp/hs-repo"
             step "history-$sha" bash -c "cd /tmp/hs-repo && python3 -m hisparse history $sha --results $OUT/history-results --python python3"
             step "asv-$sha" bash -c "cd /tmp/hs-repo && full=\$(git rev-parse $sha) && rm -rf /tmp/asv-old && git worktree add -q --detach /tmp/asv-old \$full && export HOME=/tmp/asv-home PYTHONPATH=\$PWD/plugins/asv_bench_hisparse:\$PYTHONPATH HISPARSE_ASV_PATH=/tmp/asv-old:/tmp/site && mkdir -p \$HOME && python3 -m asv machine --yes --machine \${HISPARSE_MACHINE:-\$(hostname)} >/dev/null && python3 -m asv run -E existing:\$(command -v python3) --set-commit-hash \$full --machine \${HISPARSE_MACHINE:-\$(hostname)} --record-samples --show-stderr --bench MultiStep.gpu_time_swap && cp -r results/asv $OUT/asv-results" ;;
    ncu:*) case_id=${s#ncu:}
           step "ncu-$(echo "$case_id" | tr -c 'A-Za-z0-9_\n' '_' | cut -c1-60)" \
             timeout 240 ncu --clock-control none --target-processes all -k "regex:spec_(gather|commit)_kernel" --launch-skip 8 --launch-count 2 \
               --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats \
               --csv --page details python3 scripts/ncu_case.py "$case_id" ;;
    stress:*) IFS=: read -r _ name args <<< "$s"
              step "stress-$name" python3 -m hisparse check --json "$OUT/$name.json" --resume ${args//,/ } ;;
    cache) step cache tar czf "$OUT/jit-cache.tgz" -C "$HISPARSE_CACHE_DIR/.." "$(basename "$HISPARSE_CACHE_DIR")" ;;
    *) echo "unknown step $s"; exit 2 ;;
  esac
done
pack
cat "$OUT/summary.txt"
