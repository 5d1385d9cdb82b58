#!/usr/bin/env bash
# The second GPU call of issue 36 (item 4): the fix to masked attention (runtime/masked_sdpa.py: cuDNN's
# SDPA off for masked calls, GQA folded for one query token) measured side by side with the old path
# (EVOLALLOC_SDPA_CUDNN=1) on the same card in one call, the exactness tests again (the attention
# changed), the 32k and Qwen3 cells with the fix, and the memory probe (benchmarks/gpu_memory_probe.py).
# Writes at most 8 files (what the device tool brings back); summarise here with
#   python -m evolalloc.bench.gpu_report FOLDER   (the bench-*.json cells; baseline-*.json is the old path).
# Device call: run(command="bash benchmarks/gpu_fix_check.sh", carry=[".whl"], timeout_s=450)
SCRIPT=gpu_fix_check.sh
source "$(dirname "$0")/gpu_prelude.sh" "$@"  # output folder, wheels, env.json, exactness tests
cell() {  # FILE LIMIT ARGS...
    local file=$1 limit=$2; shift 2
    say "cell $file: $*"
    timeout "$limit" "$PY" -m evolalloc bench gpu --device cuda --dtype bfloat16 --json "$DEST/$file" "$@" >>"$LOG" 2>&1 \
        || { say "cell $file FAILED or timed out after ${limit}s"; rm -f "$DEST/$file"; }
}
EIGHT_K=(--shape llama-3.1-8b --context 8192 --budget 512 --prompts 4 --candidates 8 --batch-size 16)
cell bench-llama8b-8k.json 100 "${EIGHT_K[@]}" --profile /tmp/evolalloc-profile-8k.txt
EVOLALLOC_SDPA_CUDNN=1 cell baseline-llama8b-8k.json 120 "${EIGHT_K[@]}"
cell bench-llama8b-32k.json 110 --shape llama-3.1-8b --context 32768 --budget 512 --prompts 2 --candidates 4 --batch-size 8
say "memory probe"
timeout 60 "$PY" benchmarks/gpu_memory_probe.py --shape llama-3.1-8b --context 8192 --prompts 2 >"$DEST/probe.jsonl" 2>>"$LOG" || say "probe FAILED or timed out"
cell bench-qwen3-8b-8k.json 80 --shape qwen3-8b --context 8192 --budget 512 --prompts 4 --candidates 8 --batch-size 16
say "done; files in $DEST"
