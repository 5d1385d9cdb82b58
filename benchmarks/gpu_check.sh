#!/usr/bin/env bash
# The GPU check of issue 36, in one call of at most 8 minutes:
#   1. install what the GPU image lacks from wheels carried in .whl/ (benchmarks/gpu_wheels.sh fetches them);
#   2. the runtime's exactness tests on the device in bfloat16, against HF generate (tiny models, seconds);
#   3. `evolalloc bench gpu` at the Llama-3.1-8B shape (random weights) at 8k and 32k tokens, and Qwen3-8B at 8k;
#      the 8k cell also profiles one batch of the cached path and of the floor (issue 36 item 4; the table rides
#      in its JSON and check.md, since the device tool brings back at most 8 files);
#   4. check.json + check.md (the table and the goals, judged only on what was measured) in the output folder.
#
# Usage:  benchmarks/gpu_check.sh [--cpu] [OUTPUT_FOLDER]
#   OUTPUT_FOLDER: default $OUT (the device tool's folder), else benchmarks/gpu-check-out.
#   --cpu (or no CUDA device): a tiny shape on the CPU, in seconds (what the test in tests/bench runs).
#   PYTHON: the interpreter (default python3).
#
# Expects the GPU image's python3 (3.12) with torch 2.11 and transformers 5.17 (what the device machine
# had; the versions that ran are written to env.json), pytest, click, numpy, pyyaml, tqdm, safetensors,
# attrs and typing-extensions. It lacks, and takes from .whl/ (carry it: `carry: [".whl"]`):
#   jsonschema 4.26.0, jsonschema-specifications 2025.9.1, referencing 0.37.0, rpds-py 2026.9.1 (cp312),
#   platformdirs 4.14.8, rapidfuzz 3.14.6 (cp312).
# evolalloc itself runs from this tree (PYTHONPATH), not installed.
#
# Device call (a session has 15 min of device time, a machine's start included; one call with this limit
# leaves room to rerun at once, while the machine is still warm):
#   run(command="bash benchmarks/gpu_check.sh", carry=[".whl"], timeout_s=420)
# Worst case: every step at its own limit (60 + 110 + 150 + 70 s) plus setup and the report, about 6.5 min.
# Each step writes its files as it ends: if the call is cut short, what came back still makes the summary
# here with `python -m evolalloc.bench.gpu_report FOLDER`.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

MODE=auto
if [ "${1:-}" = "--cpu" ]; then MODE=cpu; shift; fi
DEST=${1:-${OUT:-benchmarks/gpu-check-out}}
mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)
PY=${PYTHON:-python3}
LOG="$DEST/check.log"
: >"$LOG"
say() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$LOG"; }
STATUS=0

# 1. Wheels the image lacks (a CPU run in the project's own environment needs none: --cpu skips them).
SITE=""
if [ "$MODE" != cpu ] && ls .whl/*.whl >/dev/null 2>&1; then
    SITE=/tmp/evolalloc-site
    say "installing $(ls .whl/*.whl | wc -l) carried wheels into $SITE"
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl >>"$LOG" 2>&1 \
        || { say "wheel install FAILED"; STATUS=1; }
fi
export PYTHONPATH="$ROOT${SITE:+:$SITE}${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1

if [ "$MODE" = auto ]; then
    MODE=$("$PY" -c "import torch; print('gpu' if torch.cuda.is_available() else 'cpu')" 2>>"$LOG" || echo cpu)
fi
if [ "$MODE" = gpu ]; then DEVICE=cuda; else DEVICE=cpu; fi
DTYPE=bfloat16
say "mode $MODE: device $DEVICE, dtype $DTYPE, output $DEST"

"$PY" - "$DEST/env.json" "$MODE" "$DEVICE" "$DTYPE" "$*" <<'EOF' >>"$LOG" 2>&1 || STATUS=1
import json, platform, subprocess, sys, time
import torch, transformers
path, mode, device, dtype, args = sys.argv[1:]
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip() or "?"
env = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "mode": mode, "test_device": device, "dtype": dtype,
       "python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
       "device_name": torch.cuda.get_device_name() if device == "cuda" else platform.machine(), "commit": commit,
       "command": ("benchmarks/gpu_check.sh " + args).strip()}
json.dump(env, open(path, "w"), indent=2)
print(env)
EOF

# 2. Exactness on the device: the runtime's own tests, their models and prompts moved by the env vars
#    (test_architectures: every architecture the runtime accepts, in float32 and bfloat16, against the eager model).
TESTS=(tests/runtime/test_architectures.py::test_full_budgets_give_transformers_greedy_tokens_and_logits
       tests/runtime/test_equivalence.py
       tests/runtime/test_generation_api.py::test_full_budgets_give_the_tokens_of_transformers_greedy_generate
       tests/runtime/test_hf_generate.py)
[ "$MODE" = cpu ] && TESTS=(tests/runtime/test_equivalence.py)  # seconds: the CPU mode checks the script, not the GPU
say "exactness tests: ${TESTS[*]}"
EVOLALLOC_TEST_DEVICE=$DEVICE EVOLALLOC_TEST_DTYPE=$DTYPE timeout 60 "$PY" -m pytest -q -p no:cacheprovider \
    --junitxml="$DEST/exactness.xml" "${TESTS[@]}" >>"$LOG" 2>&1 || { say "exactness tests FAILED or timed out (see check.log)"; STATUS=1; }

# 3. The bench cells: NAME SECONDS ARGS...; a cell that fails or times out is reported as unmeasured.
bench() {
    local name=$1 limit=$2; shift 2
    say "bench $name: $*"
    timeout "$limit" "$PY" -m evolalloc bench gpu --device "$DEVICE" --dtype "$DTYPE" --json "$DEST/bench-$name.json" "$@" >>"$LOG" 2>&1 \
        || { say "bench $name FAILED or timed out after ${limit}s (see check.log)"; rm -f "$DEST/bench-$name.json"; STATUS=1; }
}
if [ "$MODE" = gpu ]; then
    bench llama8b-8k 110 --shape llama-3.1-8b --context 8192 --budget 512 --prompts 4 --candidates 8 --batch-size 16 \
        --profile /tmp/evolalloc-profile-8k.txt
    bench llama8b-32k 150 --shape llama-3.1-8b --context 32768 --budget 512 --prompts 2 --candidates 4 --batch-size 8
    bench qwen3-8b-8k 70 --shape qwen3-8b --context 8192 --budget 512 --prompts 4 --candidates 8 --batch-size 16
else
    bench tiny-512 60 --shape tiny-llama --context 512 --budget 40 --prompts 2 --candidates 2 --new-tokens 4 --threads 1 \
        --profile "${TMPDIR:-/tmp}/evolalloc-profile-tiny.txt"
    bench tiny-1k 60 --shape tiny-llama --context 1024 --budget 40 --prompts 2 --candidates 2 --new-tokens 4 --threads 1
fi

# 4. The summary: check.json and check.md.
"$PY" -m evolalloc.bench.gpu_report "$DEST" 2>>"$LOG" | tee -a "$LOG" || STATUS=1
say "done (status $STATUS); files in $DEST"
exit $STATUS
