# Sourced by the side-by-side GPU scripts (gpu_fix_check.sh, gpu_unmasked_check.sh): the output folder, the log, the
# carried wheels, env.json, then the runtime's exactness tests on CUDA in bfloat16. Expects SCRIPT (the caller's name).
# Sets DEST, PY, LOG and say().
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
DEST=${1:-${OUT:-benchmarks/gpu-check-out}}
mkdir -p "$DEST"; DEST=$(cd "$DEST" && pwd)
PY=${PYTHON:-python3}
LOG="$DEST/check.log"; : >"$LOG"
say() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$LOG"; }
SITE=/tmp/evolalloc-site
"$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl >>"$LOG" 2>&1 || say "wheel install FAILED"
export PYTHONPATH="$PWD:$SITE" PYTHONUNBUFFERED=1
"$PY" -c "import json,time,torch,transformers,platform; json.dump({'date': time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()), 'mode': 'gpu', 'test_device': 'cuda', 'dtype': 'bfloat16', 'python': platform.python_version(), 'torch': torch.__version__, 'transformers': transformers.__version__, 'device_name': torch.cuda.get_device_name(), 'command': 'benchmarks/$SCRIPT'}, open('$DEST/env.json', 'w'), indent=2)" >>"$LOG" 2>&1
say "exactness tests (cuda, bfloat16)"
EVOLALLOC_TEST_DEVICE=cuda EVOLALLOC_TEST_DTYPE=bfloat16 timeout 70 "$PY" -m pytest -q -p no:cacheprovider --junitxml="$DEST/exactness.xml" \
    tests/runtime/test_architectures.py::test_full_budgets_give_transformers_greedy_tokens_and_logits tests/runtime/test_equivalence.py \
    tests/runtime/test_generation_api.py::test_full_budgets_give_the_tokens_of_transformers_greedy_generate tests/runtime/test_hf_generate.py \
    tests/runtime/test_masked_sdpa.py >>"$LOG" 2>&1 || say "exactness tests FAILED or timed out"
