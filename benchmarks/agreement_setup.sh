# Sourced by the agreement scripts (kvpress_agreement.sh, lukv_agreement.sh) after they set OUT:
# the shared settings, this checkout's evolalloc on PYTHONPATH, kvpress's own venv (KVPY) and the
# bundled model's folder (MODEL_DIR).
set -euo pipefail
export OMP_NUM_THREADS=1
PY="${EVOLALLOC_PYTHON:-python}"
N="${N:-20}"
CONTEXT_TOKENS="${CONTEXT_TOKENS:-1000}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export PYTHONPATH="$(dirname "$HERE")${PYTHONPATH:+:$PYTHONPATH}"  # this checkout's evolalloc
mkdir -p "$OUT"

KVPY="$(bash "$HERE/kvpress_venv.sh")"
MODEL_DIR="$("$PY" -c 'from evolalloc.runtime.model import resolve_model_folder, DEFAULT_MODEL; print(resolve_model_folder(DEFAULT_MODEL))')"
