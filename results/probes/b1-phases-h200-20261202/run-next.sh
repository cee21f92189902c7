#!/usr/bin/env bash
# Prepared in the sixteenth session after its device time was spent, NOT RUN: the next two steps toward
# issue 13's 15 us at `serving` b1, where the gather (17.9 us) and the commit (12.0 us from 6.5 us in)
# end together, so each path must shrink (README.md, "What this shows").
#   tC = tree + pC-erase-store.patch: the commit's erase as two loads and one plain store (phase D is the
#        table's only writer, each erase names its own exact entry), not two CASes. Tells whether phase D
#        (~6000 cycles at b1 whatever its round trips) is bound by the one SM's atomics.
#   tD = tree + pD-warp-copy.patch: each gather warp copies its own claims as soon as its lookups end
#        (group_copy_rows over the warp, no CTA barrier; per-warp release, the CTA's last warp counts
#        and triggers). Risk to read in the A/B: a warp with more than 3 claims (b1: ~3 on average)
#        takes a second pass of host round trips, where the CTA-wide copy took one.
#   tCD = both.
# Steps: build the four trees; the GPU tests of tCD (multi-step + planned copy); compute-sanitizer of
# tCD; head, tC, tD, tCD alternated twice on ../b1-phases-h200-20261202/probe-b1.yaml; the CUPTI split of
# head and tCD.  usage: OUT=... bash run-next.sh   (carry .whl; ~500 s on a fresh machine)
set -uo pipefail
D=results/probes/b1-phases-h200-20261202
L=/tmp/lognext; rm -rf $L /tmp/tC /tmp/tD /tmp/tCD; mkdir -p $L
source scripts/gpu_node_setup.sh
ROOT=$PWD; t0=$SECONDS
pk() { tar czf $OUT/next.tgz -C $L .; }
for t in tC tD tCD; do
  mkdir /tmp/$t; tar cf - --exclude=./.cache --exclude=./.whl --exclude=./.sgl --exclude=./results . | tar xf - -C /tmp/$t
  mkdir -p /tmp/$t/results && cp -r results/probes /tmp/$t/results/
done
for t in tC tCD; do patch -d /tmp/$t -p1 < $D/pC-erase-store.patch >> $L/patch.txt 2>&1 || { echo "pC on $t failed"; exit 2; }; done
for t in tD tCD; do patch -d /tmp/$t -p1 < $D/pD-warp-copy.patch >> $L/patch.txt 2>&1 || { echo "pD on $t failed"; exit 2; }; done
tree() { [ $1 = head ] && echo $ROOT || echo /tmp/$1; }
inv() { local T=$(tree $1); shift; (cd $T && PYTHONPATH=/tmp/site:$T HISPARSE_CACHE_DIR=$T/.cache/hisparse/jit "$@"); }
for t in head tC tD tCD; do (inv $t python3 -m hisparse build $ROOT/$D/probe-b1.yaml -j 8 > $L/build-$t.txt 2>&1; echo "build $t rc=$? $((SECONDS-t0))s") & done; wait
inv tCD python3 -m pytest -q -m gpu -p no:cacheprovider tests/kernels/test_swap_multi_gpu.py tests/kernels/test_copy_planned_gpu.py > $L/tests-tCD.txt 2>&1
echo "tests tCD rc=$? $(tail -1 $L/tests-tCD.txt) $((SECONDS-t0))s"; pk
inv tCD bash scripts/gpu_sanitize.sh > $L/sanitize-tCD.txt 2>&1
echo "sanitize tCD rc=$? $(tail -1 $L/sanitize-tCD.txt) $((SECONDS-t0))s"; pk
labels=""; files=""
for rep in a b; do
  for side in head tC tD tCD; do
    inv $side python3 -m hisparse run $ROOT/$D/probe-b1.yaml --out $L/$side-$rep.json --no-plots > $L/run-$side-$rep.txt 2>&1
    echo "run $side $rep rc=$? $((SECONDS-t0))s"; labels+="$side-$rep,"; files+=" $L/$side-$rep.json"; pk
  done
done
python3 results/probes/b1-chain-h200-20261202/table.py --labels ${labels%,} $files > $L/table.txt 2>&1; pk
for side in head tCD; do
  inv $side timeout 100 python3 scripts/probe_replay_modes.py --kernels $L/kernels-$side multi_step/serving/b1/s4/k2048/h4096/i576/pdl1 \
      > $L/kernels-$side.txt 2>&1; echo "kernels $side rc=$? $((SECONDS-t0))s"; pk
done
rm -rf $L/kernels-head $L/kernels-tCD; pk
cat $L/table.txt
for s in head tCD; do echo "== $s"; grep -A1 "  low\|  high" $L/kernels-$s.txt | head -8; done
