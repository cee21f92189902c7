#!/usr/bin/env bash
# Nightly regression check of the current commit on this machine.
#
#   1. run the regression set: `hisparse-bench run configs/ci.yaml --ci` -> results/runs/<run>.json
#   2. compare with the baseline: BASELINE (a run file or a commit), else the latest run of this
#      machine, backend and config at a different commit (`hisparse-bench gate`: the regression
#      policy of docs/regression.md, with this machine's history noise per case)
#   3. if a case fails the gate, re-run the regression set and gate again: only a CONFIRMED regression
#      (both runs fail) fails the night
#   4. always: write asv results (results/asv) and rebuild the dashboard (site/)
#
# Exit status: 0 ok (or no baseline yet); 1 confirmed regression; 3 a case failed its correctness
# check or could not run; 2 the harness itself failed.
#
# Environment:
#   HISPARSE_MACHINE            machine name recorded in results (default: hostname), e.g. h200-sxm
#   HISPARSE_NIGHTLY_CONFIG     config to run (default configs/ci.yaml; configs/cpu-small.yaml on a CPU)
#   HISPARSE_BACKEND            auto | cuda | reference (default auto)
#   HISPARSE_PYTHON             interpreter with hisparse installed (default python3)
#   HISPARSE_RESULTS            results root (default results)      HISPARSE_SITE  dashboard dir (default site)
#   BASELINE                    run file or commit to compare against (default: see step 2)
#   HISPARSE_NIGHTLY_MIN_EFFECT minimum relative change that can fail (default 0.005)
#   HISPARSE_INJECT_SLOWDOWN    TEST HOOK: e.g. 0.10 multiplies the head's samples by 1.10 in the
#                               compare step (recorded files untouched), to prove the gate fires.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here/.."

PY=${HISPARSE_PYTHON:-python3}
CONFIG=${HISPARSE_NIGHTLY_CONFIG:-configs/ci.yaml}
BACKEND=${HISPARSE_BACKEND:-auto}
RESULTS=${HISPARSE_RESULTS:-results}
SITE=${HISPARSE_SITE:-site}
export HISPARSE_MACHINE=${HISPARSE_MACHINE:-$(hostname)}

work=$(mktemp -d "${TMPDIR:-/tmp}/hisparse-nightly.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$RESULTS/runs" "$RESULTS/gates"

log() { printf '[nightly] %s\n' "$*" >&2; }
gate() { "$PY" -m hisparse gate "$@"; }

# run_once NAME: runs the config into $work/NAME, moves the run file (and its plots) to
# $RESULTS/runs, prints the run file's path. Returns the harness's exit status (1 = some case failed).
run_once() {
  local out="$work/$1" rc file
  mkdir -p "$out"
  "$PY" -m hisparse run "$CONFIG" --ci --backend "$BACKEND" --out "$out" >&2
  rc=$?
  file=$(ls "$out"/*.json 2>/dev/null | head -n 1)
  if [ -z "$file" ]; then
    log "the harness wrote no run file (exit $rc)"
    return 2
  fi
  mv "$file" "$RESULTS/runs/"
  if [ -d "${file%.json}" ]; then
    rm -rf "$RESULTS/runs/$(basename "${file%.json}")"
    mv "${file%.json}" "$RESULTS/runs/"
  fi
  echo "$RESULTS/runs/$(basename "$file")"
  return "$rc"
}

status=0
log "machine $HISPARSE_MACHINE, config $CONFIG, backend $BACKEND"
head=$(run_once head)
rc=$?
if [ -z "$head" ]; then
  exit 2
fi
[ "$rc" -eq 0 ] || { log "some case failed or could not run (run exit $rc): see $head"; status=3; }
runs=("$head")

base=$(gate baseline --results "$RESULTS" --head "$head") || exit 2
if [ -z "$base" ]; then
  log "no baseline for this machine/config yet: recorded $head, nothing to compare"
else
  log "baseline $base"
  gate --base "$base" --head "$head" --results "$RESULTS" --json "$RESULTS/gates/$(basename "${head%.json}").gate.json"
  rc=$?
  if [ "$rc" -eq 4 ]; then
    log "gate failed once: re-running the regression set to confirm"
    confirm=$(run_once confirm)
    rc=$?
    if [ -z "$confirm" ]; then
      exit 2
    fi
    runs+=("$confirm")
    gate --base "$base" --head "$head" --confirm "$confirm" --results "$RESULTS" \
      --json "$RESULTS/gates/$(basename "${confirm%.json}").gate.json"
    rc=$?
  fi
  case "$rc" in
    0) log "no confirmed regression" ;;
    1) log "CONFIRMED regression"; status=1 ;;
    *) log "compare step failed (exit $rc)"; exit 2 ;;
  esac
fi

gate asv --results "$RESULTS" "${runs[@]}" >&2 || log "asv conversion failed (not fatal)"
"$PY" -m hisparse dashboard --results "$RESULTS" --out "$SITE" --force >&2 || log "dashboard failed (not fatal)"
exit "$status"
