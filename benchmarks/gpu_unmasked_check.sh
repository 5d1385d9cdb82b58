#!/usr/bin/env bash
# The third GPU call of issue 36's follow-up: a decode step with no mask (a layer whose heads all keep the same
# count: per-layer profiles, uniform, full budgets) went to cuDNN's SDPA, which builds a plan for every new key
# length (27 s for generate on 2 whole 8k records at the Llama-3.1-8B shape, 24 s of it in cuDNN). The fix
# (runtime/masked_sdpa.decode_step_on_gpu) measured side by side with the old route on fresh allocations in one
# call, the exactness tests first (the attention changed), then (b) as bench gpu runs it.
# Device call: run(command="bash benchmarks/gpu_unmasked_check.sh", carry=[".whl"], timeout_s=200)
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
"$PY" -c "import json,time,torch,transformers,platform; json.dump({'date': time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()), 'python': platform.python_version(), 'torch': torch.__version__, 'transformers': transformers.__version__, 'device_name': torch.cuda.get_device_name(), 'command': 'benchmarks/gpu_unmasked_check.sh'}, open('$DEST/env.json', 'w'), indent=2)" >>"$LOG" 2>&1
say "exactness tests (cuda, bfloat16)"
EVOLALLOC_TEST_DEVICE=cuda EVOLALLOC_TEST_DTYPE=bfloat16 timeout 70 "$PY" -m pytest -q -p no:cacheprovider --junitxml="$DEST/exactness.xml" \
    tests/runtime/test_architectures.py::test_full_budgets_give_transformers_greedy_tokens_and_logits tests/runtime/test_equivalence.py \
    tests/runtime/test_generation_api.py::test_full_budgets_give_the_tokens_of_transformers_greedy_generate tests/runtime/test_hf_generate.py \
    tests/runtime/test_masked_sdpa.py >>"$LOG" 2>&1 || say "exactness tests FAILED or timed out"
say "side by side: the unmasked decode step, landed and old"
timeout 150 "$PY" benchmarks/gpu_reprefill_probe.py --shape llama-3.1-8b --context 8192 --prompts 2 --side-by-side \
    --no-profile --batch-sizes --out "$DEST" 2>>"$LOG" | tee -a "$LOG" || say "probe FAILED or timed out"
say "done; files in $DEST"
