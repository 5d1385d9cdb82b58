#!/usr/bin/env bash
# A shipped profile inside kvpress, on the held-out prompts of its own study: export it with
# `evolalloc export --format kvpress`, load the export in kvpress (its own venv) and compare with
# evolalloc's runtime, prompt by prompt, the tokens kept per layer, the kept positions and the
# answers. Two comparisons, one kvpress run:
#   exact:   evolalloc ranking as kvpress's SnapKVPress does (average pooling over the prefix; the
#            profile's budgets, window and kernel): the mechanics must agree position for position;
#   shipped: the profile as shipped (evolalloc's SnapKV pools with max, over the window's votes
#            too; the export says so in press.differences): what a kvpress user gets instead.
# Run from the repository root, e.g. for the 4096-token study's number task:
#     PROFILE=RUNS/lc4k-number-cma-s0/allocation-c512.json TASK=niah_single \
#     DUMP="-p needle_type=number -p haystack=prose --split heldout --seed 35" CONTEXT_TOKENS=4096 N=10 \
#     bash benchmarks/kvpress_agreement_shipped.sh
# EVOLALLOC_PYTHON: the python of evolalloc's venv (default: python). OUT: where files go.
set -euo pipefail
OUT="${OUT:-runs/kvpress-shipped}"
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/agreement_setup.sh"  # PY, N, CONTEXT_TOKENS, HERE, KVPY, MODEL_DIR
: "${PROFILE:?set PROFILE to a shipped allocation-c*.json}" "${TASK:?set TASK to the task name of the study}"
MAX_NEW="${MAX_NEW_TOKENS:-12}"

# shellcheck disable=SC2086  # DUMP is a list of options
"$PY" -m evolalloc tasks dump "$TASK" -n "$N" --context-tokens "$CONTEXT_TOKENS" ${DUMP:-} -o "$OUT/prompts.jsonl"
cp "$PROFILE" "$OUT/shipped.json"
"$PY" -m evolalloc export "$OUT/shipped.json" --format kvpress -o "$OUT/shipped.kvpress.json"
"$PY" "$HERE/kvpress_agreement.py" kvpress-exact --allocation "$OUT/shipped.json" --out "$OUT/exact.json"
for side in exact shipped; do
  "$PY" "$HERE/kvpress_agreement.py" evolalloc-side --allocation "$OUT/$side.json" --prompts "$OUT/prompts.jsonl" \
      --max-new-tokens "$MAX_NEW" --out "$OUT/evolalloc-$side.jsonl"
done
"$KVPY" "$HERE/kvpress_agreement.py" kvpress-side --export "$OUT/shipped.kvpress.json" --evolalloc "$OUT/evolalloc-exact.jsonl" \
    --model "$MODEL_DIR" --max-new-tokens "$MAX_NEW" --out "$OUT/kvpress.jsonl"
echo "kvpress $("$KVPY" -c 'import importlib.metadata as m; print(m.version("kvpress"), "/ transformers", m.version("transformers"))')"
echo "== exact: evolalloc ranking as kvpress does, the shipped budgets"
"$PY" "$HERE/kvpress_agreement.py" compare "$OUT/evolalloc-exact.jsonl" "$OUT/kvpress.jsonl"
echo "== shipped: the profile as shipped in evolalloc vs its export in kvpress"
"$PY" "$HERE/kvpress_agreement.py" compare "$OUT/evolalloc-shipped.jsonl" "$OUT/kvpress.jsonl"
