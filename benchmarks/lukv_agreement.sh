#!/usr/bin/env bash
# LU-KV agreement: profile the `lukv` method's curves, export them with `evolalloc export --format
# lukv`, load the .npy into kvpress's LUKVPress (its own venv: kvpress pins an older transformers)
# and compare, on 20 passkey prompts at compression ratios 0.5, 0.75 and 0.9, the tokens kept per
# (layer, KV head) and the answers with evolalloc's runtime. Prints the agreement. From the repo root:
#     bash benchmarks/lukv_agreement.sh
# EVOLALLOC_PYTHON: the python of evolalloc's venv (default: python). OUT: where files go.
# KVPRESS_VENV / KVPRESS_VERSION: see kvpress_venv.sh (LUKVPress ships from kvpress 0.5.4).
set -euo pipefail
OUT="${OUT:-runs/lukv-agreement}"
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/agreement_setup.sh"  # PY, N, CONTEXT_TOKENS, HERE, KVPY, MODEL_DIR

"$PY" -m evolalloc tasks dump passkey -n "$N" --context-tokens "$CONTEXT_TOKENS" -o "$OUT/prompts.jsonl"
LENGTH="$("$PY" -c "
import json, sys
from transformers import AutoTokenizer
tok = AutoTokenizer.from_pretrained('$MODEL_DIR')
print(max(len(tok.encode(json.loads(l)['context'])) for l in open('$OUT/prompts.jsonl') if l.strip()))")"
[ -f "$OUT/lukv-curves.npz" ] || "$PY" "$HERE/lukv_agreement.py" profile --context-tokens "$CONTEXT_TOKENS" --out "$OUT"
"$PY" -m evolalloc export "$OUT/allocation-lukv-c128.json" --format lukv --context-length "$LENGTH" \
    --curves "$OUT/lukv-curves.npz" -o "$OUT/lukv.npy"
"$PY" "$HERE/lukv_agreement.py" evolalloc-side --dir "$OUT" --prompts "$OUT/prompts.jsonl" --out "$OUT/evolalloc.jsonl"
"$KVPY" "$HERE/lukv_agreement.py" kvpress-side --export "$OUT/lukv.npy" --evolalloc "$OUT/evolalloc.jsonl" \
    --model "$MODEL_DIR" --out "$OUT/kvpress.jsonl"
echo "kvpress $("$KVPY" -c 'import importlib.metadata as m; print(m.version("kvpress"), "/ transformers", m.version("transformers"))')"
"$PY" "$HERE/lukv_agreement.py" compare "$OUT/evolalloc.jsonl" "$OUT/kvpress.jsonl"
