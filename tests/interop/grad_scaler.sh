# Interop: mnddp's fp16 loss scaler makes PyTorch's decisions. torch.amp.GradScaler from the venv
# runs a sequence of gradients with overflows and a NaN (grad_scaler_reference.py); check_grad_scaler
# replays it through LossScaler and compares every step.
# Expects MNDDP_PYTHON and MNDDP_GRADSCALER_CHECK from CTest (tests/CMakeLists.txt).
set -euo pipefail
: "${MNDDP_PYTHON:?}" "${MNDDP_GRADSCALER_CHECK:?}"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/mnddp-scaler.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
"$MNDDP_PYTHON" "$(dirname "$0")/grad_scaler_reference.py" "$WORK/reference.json"
"$MNDDP_GRADSCALER_CHECK" "$WORK/reference.json"
