#!/usr/bin/env bash
# Create (once) the venv the kvpress agreement check runs in. kvpress pins an older
# transformers than evolalloc uses, so it cannot share evolalloc's venv.
# Usage: benchmarks/kvpress_venv.sh  -> prints the venv's python path.
set -euo pipefail
CACHE="${EVOLALLOC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/evolalloc}"
VENV="${KVPRESS_VENV:-$CACHE/kvpress-venv}"
KVPRESS_VERSION="${KVPRESS_VERSION:-0.5.5}"
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import kvpress" 2>/dev/null; then
  python3 -m venv "$VENV" >&2
  "$VENV/bin/pip" install -q --upgrade pip >&2
  # torch first and pinned: a looser spec can pull a multi-GB CUDA build.
  "$VENV/bin/pip" install -q "torch==2.13.0" numpy >&2
  "$VENV/bin/pip" install -q "kvpress==$KVPRESS_VERSION" >&2
fi
echo "$VENV/bin/python"
