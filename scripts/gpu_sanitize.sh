#!/usr/bin/env bash
# compute-sanitizer over our kernels, with planted-bug controls (docs/semantics.md §H7).
#
#   scripts/gpu_sanitize.sh            # on a GPU node, from anywhere; PYTHON=... to pick the interpreter
#
# Runs memcheck and racecheck, each on the real cases (scripts/gpu_sanitize.py real: must be clean)
# and on a planted bug (an out-of-bounds write for memcheck, a shared-memory race for racecheck: must
# be reported). A clean real run counts only if the planted bug of the same tool was caught. Prints
# a table (tool, case, exit code, errors reported, expected, verdict) and exits 0 only if all four rows
# are as expected. Full sanitizer logs: $SANITIZE_LOG_DIR (default /tmp/hisparse-sanitize).
# Extra compute-sanitizer options: SANITIZER_ARGS="...".
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
set -u
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
SANITIZER=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
LOG_DIR=${SANITIZE_LOG_DIR:-/tmp/hisparse-sanitize}
mkdir -p "$LOG_DIR"
# Every tensor its own cudaMalloc: with torch's caching allocator a planted out-of-bounds write stayed
# inside a larger cached segment and went unreported.
export PYTORCH_NO_CUDA_MEMORY_CACHING=1

if [ ! -x "$SANITIZER" ]; then
  echo "compute-sanitizer not found (set COMPUTE_SANITIZER=/path/to/compute-sanitizer)" >&2
  exit 2
fi

# Compile outside the sanitizer (nvcc under it is slow and pointless).
if ! "$PYTHON" scripts/gpu_sanitize.py build > "$LOG_DIR/build.log" 2>&1; then
  echo "build failed; see $LOG_DIR/build.log" >&2
  tail -40 "$LOG_DIR/build.log" >&2
  exit 2
fi

# errors reported in a sanitizer log: memcheck's "ERROR SUMMARY: N errors", else racecheck's
# "RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)".
count_errors() {
  local log=$1 n
  n=$(grep -oE 'ERROR SUMMARY: [0-9]+ error' "$log" | tail -1 | grep -oE '[0-9]+')
  if [ -z "$n" ]; then
    n=$(grep -oE 'RACECHECK SUMMARY: [0-9]+ hazard[^(]*\([0-9]+ error' "$log" | tail -1 | grep -oE '[0-9]+ error' | grep -oE '[0-9]+')
  fi
  echo "${n:-?}"
}

rows=()
all_ok=1
run_case() {  # tool case expected(clean|caught)
  local tool=$1 case=$2 expected=$3 log rc errors verdict
  log="$LOG_DIR/${tool}-${case}.log"
  # shellcheck disable=SC2086
  "$SANITIZER" --tool "$tool" --error-exitcode 9 ${SANITIZER_ARGS:-} "$PYTHON" scripts/gpu_sanitize.py "$case" > "$log" 2>&1
  rc=$?
  errors=$(count_errors "$log")
  if [ "$expected" = clean ]; then
    [ "$rc" = 0 ] && [ "$errors" = 0 ] && verdict=ok || verdict=FAIL
  else
    [ "$rc" = 9 ] && [ "$errors" != 0 ] && [ "$errors" != "?" ] && verdict=ok || verdict=FAIL
  fi
  [ "$verdict" = ok ] || all_ok=0
  rows+=("$(printf '%-10s %-13s %9s %8s  %-30s %s' "$tool" "$case" "$rc" "$errors" \
    "$([ "$expected" = clean ] && echo 'exit 0, 0 errors' || echo 'exit 9, >0 errors (control)')" "$verdict")")
}

run_case memcheck planted-oob caught
run_case memcheck real clean
run_case racecheck planted-race caught
run_case racecheck real clean

printf '%-10s %-13s %9s %8s  %-30s %s\n' tool case exit errors expected verdict
printf '%s\n' "${rows[@]}"
echo "logs: $LOG_DIR"
if [ "$all_ok" = 1 ]; then
  echo "sanitizer: clean on the real cases, planted bugs caught"
  exit 0
fi
echo "sanitizer: FAILED (see the logs above; a real case exiting 1 means a result differed from the reference)" >&2
exit 1
