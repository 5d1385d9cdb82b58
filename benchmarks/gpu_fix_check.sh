#!/usr/bin/env bash
# The second GPU call of issue 36 (item 4): the fix to masked attention (runtime/masked_sdpa.py: cuDNN's
# SDPA off for masked calls, GQA folded for one query token) measured side by side with the old path
# (EVOLALLOC_SDPA_CUDNN=1) on the same card in one call, the exactness tests again (the attention
# changed), the 32k and Qwen3 cells with the fix, and the memory probe (benchmarks/gpu_memory_probe.py).
# Writes at most 8 files (what the device tool brings back); summarise here with
#   python -m evolalloc.bench.gpu_report FOLDER   (the bench-*.json cells; baseline-*.json is the old path).
# Device call: run(command="bash benchmarks/gpu_fix_check.sh", carry=[".whl"], timeout_s=450)
set -uo pipefail
cd "$(dirname "$0")/.."
DEST=${1:-${OUT:-benchmarks/gpu-check-out}}
mkdir -p "$DEST"; DEST=$(cd "$DEST" && pwd)
PY=${PYTHON:-python3}
LOG="$DEST/check.log"; : >"$LOG"
say() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$LOG"; }
SITE=/tmp/evolalloc-site
"$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl >>"$LOG" 2>&1 || say "wheel install FAILED"
export PYTHONPATH="$PWD:$SITE" PYTHONUNBUFFERED=1
"$PY" -c "import json,time,torch,transformers,subprocess; json.dump({'date': time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()), 'mode': 'gpu', 'test_device': 'cuda', 'dtype': 'bfloat16', 'python': __import__('platform').python_version(), 'torch': torch.__version__, 'transformers': transformers.__version__, 'device_name': torch.cuda.get_device_name(), 'commit': 'see results/gpu-check', 'command': 'benchmarks/gpu_fix_check.sh'}, open('$DEST/env.json', 'w'), indent=2)" >>"$LOG" 2>&1
say "exactness tests (cuda, bfloat16)"
EVOLALLOC_TEST_DEVICE=cuda EVOLALLOC_TEST_DTYPE=bfloat16 timeout 70 "$PY" -m pytest -q -p no:cacheprovider --junitxml="$DEST/exactness.xml" \
    tests/runtime/test_architectures.py::test_full_budgets_give_transformers_greedy_tokens_and_logits tests/runtime/test_equivalence.py \
    tests/runtime/test_generation_api.py::test_full_budgets_give_the_tokens_of_transformers_greedy_generate tests/runtime/test_hf_generate.py \
    tests/runtime/test_masked_sdpa.py >>"$LOG" 2>&1 || say "exactness tests FAILED or timed out"
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
