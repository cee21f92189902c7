#!/usr/bin/env bash
# Source this on an offline GPU node: installs the carried wheelhouse (.whl/ or $HISPARSE_WHEELHOUSE)
# into /tmp/site without network, puts it and the tree on PYTHONPATH, and points the JIT cache at a
# carried directory so kernels built in an earlier run are reused.
# usage: source scripts/gpu_node_setup.sh
if [ "${BASH_SOURCE[0]}" = "$0" ]; then sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0; fi  # run, not sourced: help
wh=${HISPARSE_WHEELHOUSE:-.whl}
if ls "$wh"/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$wh"/*.whl || return 1
  export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
  export PATH=/tmp/site/bin:$PATH
else
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
# Run files name the machine they ran on: unless the caller named it, derive it from the GPU (the node's
# hostname says nothing about the card, and one name for every card would mix H100 and H200 runs).
if [ -z "${HISPARSE_MACHINE:-}" ] && command -v nvidia-smi >/dev/null; then
  case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
    *H200*) HISPARSE_MACHINE=h200-sxm ;;
    *H100*PCIe*) HISPARSE_MACHINE=h100-pcie ;;
    *H100*) HISPARSE_MACHINE=h100-sxm ;;
    *H20*) HISPARSE_MACHINE=h20 ;;
  esac
  [ -n "${HISPARSE_MACHINE:-}" ] && export HISPARSE_MACHINE
fi
export HISPARSE_CACHE_DIR=${HISPARSE_CACHE_DIR:-$PWD/.cache/hisparse/jit}
export PYTHONUNBUFFERED=1
hisparse_bench() { python3 -m hisparse "$@"; }
