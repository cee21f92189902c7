#!/usr/bin/env bash
# A/B of one kernel patch in one command on a GPU node: the working tree carries the patch (the tree under test),
# a copy with the patch reversed is the head; both are built, the tree's GPU tests and compute-sanitizer
# run, the two alternate on one config REPS times, a table of ratios of bests closes, and the CUPTI split
# of the given cases (scripts/probe_replay_modes.py --kernels) follows for each tree. Every step logs to
# its own file and the logs are packed into $OUT/ab.tgz after each step, so a call stopped at its time
# limit still returns what finished. The last lines printed are the table and the CUPTI medians.
#
# usage: git apply PATCH && OUT=... bash scripts/ab_patch.sh PATCH CONFIG [CASE_ID ...]
#   PATCH    the patch the working tree carries (reversed on the copy to rebuild the head)
#   CONFIG   the A/B's config (a path; both trees run this one file)
#   CASE_ID  cases of configs/default.yaml for the CUPTI split (GPU only), e.g.
#            multi_step/serving/b1/s4/k2048/h4096/i576/pdl1
# env: TREE=tree (the label of the patched tree), REPS="a b" (one alternation per word),
#      MORE="NAME=PATCH ..." (more trees in the same call: each is the head plus its own PATCH, built,
#      tested, sanitized, alternated and split like the first; one device start for several candidates),
#      TESTS="tests/kernels/test_swap_multi_gpu.py tests/kernels/test_copy_planned_gpu.py" (pytest -m gpu
#      files run on each patched tree; empty: none), SANITIZE=1 (0: skip compute-sanitizer),
#      RUN_ARGS="--no-plots" (more options of `hisparse run`, e.g. --backend reference for a CPU dry run),
#      BUILD=1 (0: no `hisparse build` first; the runs then build what they need, one case at a time).
# An offline node installs the wheelhouse in .whl (scripts/gpu_node_setup.sh).
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
set -uo pipefail
[ $# -ge 2 ] || { sed -n '2,22p' "$0" >&2; exit 2; }
ROOT=$PWD
PATCH=$(realpath "$1"); CONFIG=$(realpath "$2"); shift 2
CASES=("$@")
TREE=${TREE:-tree}; REPS=${REPS:-a b}; SANITIZE=${SANITIZE:-1}; RUN_ARGS=${RUN_ARGS:---no-plots}; BUILD=${BUILD:-1}
TESTS=${TESTS-tests/kernels/test_swap_multi_gpu.py tests/kernels/test_copy_planned_gpu.py}
OUT=${OUT:?set OUT to the folder that comes back}
[ -f "$PATCH" ] || { echo "ab_patch: no patch file $PATCH" >&2; exit 2; }
[ -f "$CONFIG" ] || { echo "ab_patch: no config file $CONFIG" >&2; exit 2; }
EXTRA=(); EXTRA_PATCH=()
for spec in ${MORE:-}; do
  name=${spec%%=*}; p=${spec#*=}
  [ "$name" != "$spec" ] && [ -n "$name" ] && [ "$name" != head ] && [ "$name" != "$TREE" ] ||
    { echo "ab_patch: MORE wants NAME=PATCH with a NAME other than head and $TREE, got '$spec'" >&2; exit 2; }
  [ -f "$p" ] || { echo "ab_patch: no patch file $p (MORE $name)" >&2; exit 2; }
  EXTRA+=("$name"); EXTRA_PATCH+=("$(realpath "$p")")
done
L=${AB_LOG:-/tmp/ab-log}; HEAD=${AB_HEAD:-/tmp/ab-head}
rm -rf "$L" "$HEAD"; mkdir -p "$L" "$HEAD" "$OUT"
source scripts/gpu_node_setup.sh || { echo "ab_patch: wheelhouse install failed" >&2; exit 2; }
t0=$SECONDS
pk() { tar czf "$OUT/ab.tgz" -C "$L" .; }
say() { echo "$* $((SECONDS - t0))s" | tee -a "$L/progress.txt"; }

# The head: the tree's files without the patch. Build outputs, carried wheels and run files stay behind
# (the config and the patch are read by absolute path).
if git rev-parse --git-dir >/dev/null 2>&1; then
  git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar xf - -C "$HEAD"
else
  tar cf - --exclude=./.git --exclude=./.cache --exclude=./.whl --exclude=./.sgl --exclude='./.venv*' \
      --exclude=./results . | tar xf - -C "$HEAD"
fi
patch -R -d "$HEAD" -p1 < "$PATCH" > "$L/patch.txt" 2>&1 || { cat "$L/patch.txt"; say "ab_patch: reversing the patch failed (does the working tree carry it?)"; pk; exit 2; }
for i in "${!EXTRA[@]}"; do  # each extra tree: a copy of the head with its own patch
  d="$HEAD-${EXTRA[$i]}"; rm -rf "$d"; cp -a "$HEAD" "$d"
  patch -d "$d" -p1 < "${EXTRA_PATCH[$i]}" > "$L/patch-${EXTRA[$i]}.txt" 2>&1 ||
    { cat "$L/patch-${EXTRA[$i]}.txt"; say "ab_patch: ${EXTRA_PATCH[$i]} does not apply to the head"; pk; exit 2; }
done
TREES=(head "$TREE" "${EXTRA[@]}")  # every tree, head first; the others carry a patch

dir() {
  if [ "$1" = "$TREE" ]; then echo "$ROOT"; elif [ "$1" = head ]; then echo "$HEAD"; else echo "$HEAD-$1"; fi
}
inv() {  # inv TREE CMD...: run CMD in that tree with its own package and JIT cache first on the path
  local d; d=$(dir "$1"); shift
  (cd "$d" && PYTHONPATH=/tmp/site:$d HISPARSE_CACHE_DIR=$d/.cache/hisparse/jit "$@")
}

if [ "$BUILD" = 1 ]; then
  for t in "${TREES[@]}"; do
    (inv "$t" python3 -m hisparse build "$CONFIG" -j 8 > "$L/build-$t.txt" 2>&1; echo $? > "$L/build-$t.rc") &
  done
  wait
  for t in "${TREES[@]}"; do say "build $t rc=$(cat "$L/build-$t.rc")"; done
  pk
fi
for t in "${TREES[@]:1}"; do  # the patched trees
  if [ -n "$TESTS" ]; then
    # shellcheck disable=SC2086  # TESTS is a list of files
    inv "$t" python3 -m pytest -q -m gpu -p no:cacheprovider $TESTS > "$L/tests-$t.txt" 2>&1
    say "tests $t rc=$? $(tail -1 "$L/tests-$t.txt")"; pk
  fi
  if [ "$SANITIZE" = 1 ]; then
    SANITIZE_LOG_DIR=$L/sanitize-$t inv "$t" bash scripts/gpu_sanitize.sh > "$L/sanitize-$t.txt" 2>&1
    say "sanitize $t rc=$? $(tail -1 "$L/sanitize-$t.txt")"; pk
  fi
done
labels=(); files=()
for rep in $REPS; do
  for t in "${TREES[@]}"; do
    # shellcheck disable=SC2086  # RUN_ARGS is a list of options
    inv "$t" python3 -m hisparse run "$CONFIG" --out "$L/$t-$rep.json" $RUN_ARGS > "$L/run-$t-$rep.txt" 2>&1
    say "run $t $rep rc=$?"
    [ -f "$L/$t-$rep.json" ] && { labels+=("$t-$rep"); files+=("$L/$t-$rep.json"); }
    pk
  done
done
if [ ${#files[@]} -gt 0 ]; then
  labs=$(IFS=,; echo "${labels[*]}")
  python3 "$ROOT/scripts/ab_table.py" --labels "$labs" "${files[@]}" > "$L/table.txt" 2>&1
fi
pk
for t in "${TREES[@]}"; do
  for c in "${CASES[@]}"; do
    n=$(echo "$c" | cut -d/ -f2,3,8 | tr / -)
    inv "$t" timeout 90 python3 scripts/probe_replay_modes.py --kernels "$L/kernels-$t" "$c" > "$L/kernels-$t-$n.txt" 2>&1
    say "kernels $t $n rc=$?"; rm -rf "$L/kernels-$t"; pk
  done
done
cat "$L/table.txt" 2>/dev/null
for f in "$L"/kernels-*.txt; do
  [ -f "$f" ] || continue
  echo "== $(basename "$f")"; grep -A1 "  low\|  high" "$f" | head -4
done
