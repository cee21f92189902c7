#!/usr/bin/env bash
# Prepared in the thirteenth session, NOT RUN: hot-switch.patch (union-mode victims = the oldest slots
# up to HOT 16384, upstream's partitioned CLOCK above) against the tree (d46ca15: the oldest slots at
# every HOT, +16-17.5 us at hot 32768), by run-v2.sh's steps: the patched copy's multi-step + planned
# GPU tests first (nothing is timed on a kernel that fails them), head / patched alternated 3x on
# probe-switch.yaml, then the full validation of the patched tree, so that it can land from this call.
# usage: bash run-switch.sh   (carry .whl; ~330 s)
D=results/probes/oldest-victims-h200-20261201
PATCH=hot-switch.patch PROBE=$D/probe-switch.yaml SIDE=switch LRU=0 exec bash $D/run-v2.sh
