#!/usr/bin/env bash
# kvpress decoding agreement: a uniform profile of the bundled model held while decoding, exported with
# `evolalloc export --format kvpress-decoding`, run in kvpress 0.5.5's DecodingPress (its own venv) and in
# evolalloc's runtime on N passkey prompts: prints whether the answers and the kept tokens are the same.
#     SCORERS="streaming knorm" N=3 bash benchmarks/kvpress_decoding_agreement.sh
# EVOLALLOC_PYTHON: evolalloc's python; KVPRESS_VENV: kvpress's venv (made once by kvpress_venv.sh).
set -euo pipefail
OUT="${OUT:-runs/kvpress-decoding-agreement}"
N="${N:-3}"
CONTEXT_TOKENS="${CONTEXT_TOKENS:-500}"
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/agreement_setup.sh"  # PY, HERE, KVPY, MODEL_DIR
BUDGET="${BUDGET:-64}" INTERVAL="${INTERVAL:-8}" NEW_TOKENS="${NEW_TOKENS:-96}"

"$PY" -m evolalloc tasks dump passkey -n "$N" --context-tokens "$CONTEXT_TOKENS" -o "$OUT/prompts.jsonl"
for scorer in ${SCORERS:-streaming knorm}; do
  profile="$OUT/$scorer-c$BUDGET.json"
  "$PY" "$HERE/kvpress_decoding_agreement.py" make-profile --scorer "$scorer" --budget "$BUDGET" \
      --interval "$INTERVAL" --out "$profile"
  "$PY" -m evolalloc export "$profile" --format kvpress-decoding -o "${profile%.json}.kvpress-decoding.json"
  "$PY" "$HERE/kvpress_decoding_agreement.py" evolalloc-side --allocation "$profile" --prompts "$OUT/prompts.jsonl" \
      --new-tokens "$NEW_TOKENS" --out "$OUT/$scorer-evolalloc.pt"
  "$KVPY" "$HERE/kvpress_decoding_agreement.py" kvpress-side --export "${profile%.json}.kvpress-decoding.json" \
      --evolalloc "$OUT/$scorer-evolalloc.pt" --model "$MODEL_DIR"
done
