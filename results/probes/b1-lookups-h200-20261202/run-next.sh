#!/usr/bin/env bash
# Prepared in the seventeenth session after its device time was spent, run in the eighteenth session (next/; tH landed as e5be9c0): the next step on the gather's
# path at `serving` b1, from the per-lane clocks (README.md, call 3). There a warp holding both hit and miss
# lanes ran the hit branch's round trips (its row, its ref exchange: ~1200 cycles) before the miss branch
# issued its claim CAS, so a claimed miss ended ~3500 cycles after its hit/miss decision.
#   tH = tree + pH-hit-miss-atomics-together.patch: hot_find (a hit's row loaded with the check that confirms
#        its slot, as tG) and the hit's ref exchange and the miss's first claim CAS issued before either result
#        is used; miss_claim takes the pre-issued CAS's result. Expected: the claimers end ~1000-1500 cycles
#        earlier at b1, the `found` lanes with them, so the round's barrier, the copy's start and the count
#        (the commit's start) ~0.5-0.7 us earlier; both paths of the call move, so b1 should too.
#   tH2 = tree + pH2-early-claim-cas.patch (pH, and more): the lookup split in two stages (hot_probe, hot_confirm);
#        a token with no candidate slot in an exact index is a miss whatever the other lanes find, so its
#        claim CAS goes out before the candidates' token loads return (~-700 more cycles on a miss's path).
# Steps: build the three trees; tH2's and tH's multi-step + planned GPU tests; compute-sanitizer of both (logs
# packed); head, tH and tH2 alternated twice on ../b1-phases-h200-20261202/probe-b1.yaml; the CUPTI split of
# the three.   usage: OUT=... [REPS="a b"] bash run-next.sh   (carry .whl; ~450 s on a fresh machine)
set -uo pipefail
D=results/probes/b1-lookups-h200-20261202
P=results/probes/b1-phases-h200-20261202
L=/tmp/lognext; rm -rf $L /tmp/tH /tmp/tH2; mkdir -p $L
source scripts/gpu_node_setup.sh
ROOT=$PWD; t0=$SECONDS
pk() { tar czf $OUT/next.tgz -C $L .; }
for t in tH tH2; do
  mkdir /tmp/$t; tar cf - --exclude=./.cache --exclude=./.whl --exclude=./.sgl --exclude=./results . | tar xf - -C /tmp/$t
  mkdir -p /tmp/$t/results && cp -r results/probes /tmp/$t/results/
done
patch -d /tmp/tH -p1 < $D/pH-hit-miss-atomics-together.patch > $L/patch.txt 2>&1 || { echo "pH failed"; cat $L/patch.txt; exit 2; }
patch -d /tmp/tH2 -p1 < $D/pH2-early-claim-cas.patch >> $L/patch.txt 2>&1 || { echo "pH2 failed"; cat $L/patch.txt; exit 2; }
tree() { [ $1 = head ] && echo $ROOT || echo /tmp/$1; }
inv() { local T=$(tree $1); shift; (cd $T && PYTHONPATH=/tmp/site:$T HISPARSE_CACHE_DIR=$T/.cache/hisparse/jit "$@"); }
for t in head tH tH2; do (inv $t python3 -m hisparse build $ROOT/$P/probe-b1.yaml -j 8 > $L/build-$t.txt 2>&1; echo "build $t rc=$? $((SECONDS-t0))s") & done; wait
for t in tH2 tH; do
  inv $t python3 -m pytest -q -m gpu -p no:cacheprovider tests/kernels/test_swap_multi_gpu.py tests/kernels/test_copy_planned_gpu.py > $L/tests-$t.txt 2>&1
  echo "tests $t rc=$? $(tail -1 $L/tests-$t.txt) $((SECONDS-t0))s"; pk
  SANITIZE_LOG_DIR=$L/sanitize-$t inv $t bash scripts/gpu_sanitize.sh > $L/sanitize-$t.txt 2>&1
  echo "sanitize $t rc=$? $(tail -1 $L/sanitize-$t.txt) $((SECONDS-t0))s"; pk
done
labels=""; files=""
for rep in ${REPS:-a b}; do
  for side in head tH tH2; do
    inv $side python3 -m hisparse run $ROOT/$P/probe-b1.yaml --out $L/$side-$rep.json --no-plots > $L/run-$side-$rep.txt 2>&1
    echo "run $side $rep rc=$? $((SECONDS-t0))s"; labels+="$side-$rep,"; files+=" $L/$side-$rep.json"; pk
  done
done
python3 results/probes/b1-chain-h200-20261202/table.py --labels ${labels%,} $files > $L/table.txt 2>&1; pk
for side in head tH tH2; do
  inv $side timeout 60 python3 scripts/probe_replay_modes.py --kernels $L/kernels-$side multi_step/serving/b1/s4/k2048/h4096/i576/pdl1 \
      > $L/kernels-$side.txt 2>&1; echo "kernels $side rc=$? $((SECONDS-t0))s"; rm -rf $L/kernels-$side; pk
done
cat $L/table.txt
for s in head tH tH2; do echo "== $s"; grep -A1 "  low\|  high" $L/kernels-$s.txt | head -4; done
