#!/usr/bin/env bash
# Copy of an unpacked sglang tree cut to what the sglang_* implementations load: the HiSparse entry
# module, sglang's JIT loader with its headers and its kvcacheio kernels, the two modules they import,
# and the version. ~1 MiB against the whole tree's ~5.5 MiB (0.5.23), for a node that must receive
# little beside this repository and the wheelhouse.
#
# usage: scripts/sglang_kernels_tree.sh SRC DEST    (SRC: scripts/fetch_sglang.sh's output, or a tree
#        with sglang/ inside; DEST must not exist)   then on the node: HISPARSE_SGLANG_SRC=$PWD/DEST
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 SRC DEST" >&2
  exit 2
fi
SRC=$1
DEST=$2
jit=sglang/kernels/jit
entry=sglang/kernels/ops/kvcache/hisparse.py
for need in "$entry" "$jit/utils" "$jit/include" "$jit/csrc/kvcacheio" sglang/srt/environ.py sglang/_version.py; do
  if [ ! -e "$SRC/$need" ]; then
    echo "$0: $SRC/$need is missing: SRC must be an unpacked sglang with its HiSparse kernels" >&2
    exit 2
  fi
done
if [ -e "$DEST" ]; then
  echo "$0: $DEST exists: give a new directory" >&2
  exit 2
fi
mkdir -p "$DEST/$jit/csrc" "$DEST/sglang/kernels/ops/kvcache" "$DEST/sglang/srt"
# The loader's package files (jit/*.py, its utils and benchmark helpers), headers and the one kernel folder.
find "$SRC/$jit" -maxdepth 1 -type f -name '*.py' -exec cp {} "$DEST/$jit/" \;
for d in utils include benchmark; do
  [ -d "$SRC/$jit/$d" ] && cp -r "$SRC/$jit/$d" "$DEST/$jit/"
done
cp -r "$SRC/$jit/csrc/kvcacheio" "$DEST/$jit/csrc/"
cp "$SRC/$entry" "$DEST/$entry"
cp "$SRC/sglang/srt/environ.py" "$DEST/sglang/srt/"
cp "$SRC/sglang/_version.py" "$DEST/sglang/"
# The version comes from the dist-info's METADATA; its RECORD lists the whole wheel and is left out.
for info in "$SRC"/sglang-*.dist-info; do
  [ -d "$info" ] || continue
  mkdir -p "$DEST/$(basename "$info")"
  find "$info" -maxdepth 1 -type f ! -name RECORD -exec cp {} "$DEST/$(basename "$info")/" \;
done
du -sh "$DEST" >&2
