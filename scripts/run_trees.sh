#!/usr/bin/env bash
# Measure exported commit trees where git is unavailable (an offline node without git): for each
# TREES/<sha>.tar, extract it, run its own harness on its regression set (configs/ci.yaml --ci) with
# the commit recorded through HISPARSE_GIT_COMMIT, and leave the run file in OUT/<sha>/.
# Record them afterwards on a machine with the repository:
#   python -c "from hisparse.track.history import record_run_dir as r; r('OUT/<sha>', '<sha>', 'results', 'h200-sxm')"
# usage: scripts/run_trees.sh TREES OUT     (TREES from scripts/pack_history.sh)
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
set -u
trees=$1; out=$2; rc=0
mkdir -p "$out"
for tar in "$trees"/*.tar; do
  sha=$(basename "$tar" .tar)
  dir=/tmp/hs-trees/$sha
  rm -rf "$dir"; mkdir -p "$dir" "$out/$sha"
  tar xf "$tar" -C "$dir"
  echo "== $sha"
  ( cd "$dir" && HISPARSE_GIT_COMMIT=$sha HISPARSE_GIT_DIRTY=0 PYTHONPATH=$dir:${SITE:-/tmp/site} \
      python3 -m hisparse run configs/ci.yaml --ci --out "$out/$sha" ) > "$out/$sha/log.txt" 2>&1 || { rc=1; echo "   failed"; }
  tail -3 "$out/$sha/log.txt"
done
exit $rc
