#!/usr/bin/env bash
# Fetch and unpack the pinned sglang wheel (no dependencies) for the sglang_* implementations and
# tests/bench/test_sglang.py: its HiSparse kernels are loaded from the unpacked tree without
# `import sglang` (hisparse/bench/sglang.py), so the wheel's own CPython tag does not matter.
#
# usage: scripts/fetch_sglang.sh [VERSION] [DEST]     (default 0.5.23, /tmp/sglang-src)
#        export HISPARSE_SGLANG_SRC=DEST              (what the harness and the tests read)
# CI (.ci/run): scripts/fetch_sglang.sh && export HISPARSE_SGLANG_SRC=/tmp/sglang-src
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
set -euo pipefail
VERSION=${1:-0.5.23}
DEST=${2:-/tmp/sglang-src}
PYTHON=${PYTHON:-python3}
if [ -f "$DEST/sglang/kernels/ops/kvcache/hisparse.py" ] && ls "$DEST"/sglang-"$VERSION".dist-info >/dev/null 2>&1; then
  echo "$DEST already holds sglang $VERSION" >&2
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The wheels are built for one CPython (0.5.23: cp311, manylinux_2_34): ask for those tags, so this
# works from any interpreter.
for py in 3.11 3.12 3.10; do
  if "$PYTHON" -m pip download --no-deps --only-binary=:all: --python-version "$py" --implementation cp \
       --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
       -d "$tmp" "sglang==$VERSION" >&2; then
    break
  fi
done
wheel=$(ls "$tmp"/sglang-"$VERSION"-*.whl 2>/dev/null | head -1 || true)
if [ -z "$wheel" ]; then
  echo "fetch_sglang.sh: no wheel of sglang==$VERSION could be downloaded" >&2
  exit 1
fi
rm -rf "$DEST"
mkdir -p "$DEST"
"$PYTHON" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$wheel" "$DEST"
echo "$DEST"
