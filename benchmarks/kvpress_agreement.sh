#!/usr/bin/env bash
# kvpress agreement: export a profile with `evolalloc export --format kvpress`, load it in kvpress
# (its own venv: kvpress pins an older transformers) and compare, on 20 passkey prompts of ~1k
# tokens written by `evolalloc tasks dump`, the tokens kept per layer and the answers with
# evolalloc's runtime. Prints the agreement. Run from the repository root:
#     bash benchmarks/kvpress_agreement.sh
# EVOLALLOC_PYTHON: the python of evolalloc's venv (default: python). OUT: where files go.
set -euo pipefail
OUT="${OUT:-runs/kvpress-agreement}"
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/agreement_setup.sh"  # PY, N, CONTEXT_TOKENS, HERE, KVPY, MODEL_DIR

"$PY" -m evolalloc tasks dump passkey -n "$N" --context-tokens "$CONTEXT_TOKENS" -o "$OUT/prompts.jsonl"
"$PY" "$HERE/kvpress_agreement.py" make-profile --out "$OUT/allocation-c128.json"
"$PY" -m evolalloc export "$OUT/allocation-c128.json" --format kvpress -o "$OUT/allocation-c128.kvpress.json"
"$PY" "$HERE/kvpress_agreement.py" evolalloc-side --allocation "$OUT/allocation-c128.json" --prompts "$OUT/prompts.jsonl" --out "$OUT/evolalloc.jsonl"
"$KVPY" "$HERE/kvpress_agreement.py" kvpress-side --export "$OUT/allocation-c128.kvpress.json" --evolalloc "$OUT/evolalloc.jsonl" \
    --model "$MODEL_DIR" --out "$OUT/kvpress.jsonl"
echo "kvpress $("$KVPY" -c 'import importlib.metadata as m; print(m.version("kvpress"), "/ transformers", m.version("transformers"))')"
"$PY" "$HERE/kvpress_agreement.py" compare "$OUT/evolalloc.jsonl" "$OUT/kvpress.jsonl"
