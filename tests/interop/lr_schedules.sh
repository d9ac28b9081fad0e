# Interop: mnddp's learning-rate schedules (warm-up, then constant, cosine, linear or step) equal
# PyTorch's schedulers from the venv at every step (lr_schedule_reference.py, check_lr_schedules).
# Expects MNDDP_PYTHON and MNDDP_LR_CHECK from CTest (tests/CMakeLists.txt).
set -euo pipefail
: "${MNDDP_PYTHON:?}" "${MNDDP_LR_CHECK:?}"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/mnddp-lr.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
"$MNDDP_PYTHON" "$(dirname "$0")/lr_schedule_reference.py" "$WORK/reference.json"
"$MNDDP_LR_CHECK" "$WORK/reference.json"
