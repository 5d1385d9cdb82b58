#!/usr/bin/env bash
# Fetch (here, with network) the wheels benchmarks/gpu_check.sh installs on the GPU machine, into .whl/
# (git-ignored through .git/info/exclude; carry it with the device call: carry: [".whl"]). About 4 MB.
# The GPU image runs CPython 3.12 on x86-64 and has torch, transformers, pytest, click, numpy, pyyaml,
# tqdm, safetensors, attrs and typing-extensions; these are what evolalloc's runtime tests need beyond them.
set -euo pipefail
cd "$(dirname "$0")/.."
EXCLUDE="$(git rev-parse --git-common-dir)/info/exclude"
grep -qx '/.whl/' "$EXCLUDE" 2>/dev/null || echo '/.whl/' >>"$EXCLUDE"
python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl \
    jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1 \
    platformdirs==4.14.8 rapidfuzz==3.14.6
ls -la .whl
