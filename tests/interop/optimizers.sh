# Interop: mnddp's LARS and LAMB follow the published rules, and its AdamW and SGD (with and without
# the no-decay param group) follow torch.optim, on the same fixed gradients (optimizer_reference.py
# from the venv, check_optimizers). Expects MNDDP_PYTHON and MNDDP_OPTIM_CHECK from CTest.
set -euo pipefail
: "${MNDDP_PYTHON:?}" "${MNDDP_OPTIM_CHECK:?}"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/mnddp-optim.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
"$MNDDP_PYTHON" "$(dirname "$0")/optimizer_reference.py" "$WORK/reference.json"
"$MNDDP_OPTIM_CHECK" "$WORK/reference.json"
