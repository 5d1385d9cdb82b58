#!/usr/bin/env bash
# The third GPU call of issue 36's follow-up: a decode step with no mask (a layer whose heads all keep the same
# count: per-layer profiles, uniform, full budgets) went to cuDNN's SDPA, which builds a plan for every new key
# length (27 s for generate on 2 whole 8k records at the Llama-3.1-8B shape, 24 s of it in cuDNN). The fix
# (runtime/masked_sdpa.decode_step_on_gpu) measured side by side with the old route on fresh allocations in one
# call, the exactness tests first (the attention changed), then (b) as bench gpu runs it.
# Device call: run(command="bash benchmarks/gpu_unmasked_check.sh", carry=[".whl"], timeout_s=200)
SCRIPT=gpu_unmasked_check.sh
source "$(dirname "$0")/gpu_prelude.sh" "$@"  # output folder, wheels, env.json, exactness tests
say "side by side: the unmasked decode step, landed and old"
timeout 150 "$PY" benchmarks/gpu_reprefill_probe.py --shape llama-3.1-8b --context 8192 --prompts 2 --side-by-side \
    --no-profile --batch-sizes --out "$DEST" 2>>"$LOG" | tee -a "$LOG" || say "probe FAILED or timed out"
say "done; files in $DEST"
