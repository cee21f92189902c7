#!/usr/bin/env bash
# Build the wheelhouse for offline GPU nodes: a thin wrapper over `hisparse-bench wheelhouse`.
# usage: scripts/build_wheelhouse.sh [DIR] [--python-version 3.12] [--platform TAG ...] [--no-self]
# DIR defaults to .whl/ in the checkout, where scripts/gpu_node_setup.sh looks on the node.
# PYTHON picks the interpreter that runs it (default: python3); hisparse need not be installed in it.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ $# -eq 0 ] || [[ $1 == -* && $1 != -h && $1 != --help ]]; then
  set -- "$root/.whl" "$@"
fi
PYTHONPATH=$root${PYTHONPATH:+:$PYTHONPATH} exec "${PYTHON:-python3}" -m hisparse wheelhouse "$@"
