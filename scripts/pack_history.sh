#!/usr/bin/env bash
# Pack the last N commits of a branch for a GPU node reached without .git (a device copy of the tree):
# .bundle/main.bundle for `hisparse-bench history` where the node has git, and .bundle/trees/<sha>.tar
# (git archive) for scripts/run_trees.sh where it does not. Both are git-ignored.
# usage: scripts/pack_history.sh N [BRANCH]
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
set -eu
n=$1; branch=${2:-main}
rm -rf .bundle; mkdir -p .bundle/trees
git bundle create .bundle/main.bundle "$branch"
for sha in $(git rev-list -n "$n" "$branch"); do
  git archive --format=tar -o ".bundle/trees/$sha.tar" "$sha"
done
du -sh .bundle
