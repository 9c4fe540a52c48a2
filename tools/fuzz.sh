#!/bin/bash
# Fuzzes one harness of fuzz/ with libFuzzer for a given time (clang, AddressSanitizer and
# UndefinedBehaviorSanitizer), starting from its committed corpus.
#
# usage: tools/fuzz.sh HARNESS SECONDS [libFuzzer options...]
#   HARNESS  safetensors, npy, model, request, gguf, chat_template or chat_request
#            (fuzz/fuzz_HARNESS.c)
#   SECONDS  how long to fuzz (libFuzzer's -max_total_time)
# Environment:
#   FUZZ_BUILD_DIR  build directory (default build-fuzz), configured with CC=clang
#                   -Dfuzzing=true and the sanitizers on first use
#   FUZZ_WORK_DIR   where new inputs and crashes go (default: a new temporary directory, kept)
#   FUZZ_MERGE=1    afterwards, merge the new inputs that add coverage into fuzz/corpus/HARNESS
#                   (libFuzzer's -merge=1 keeps only those; commit them)
#   CLANG           the compiler (default: clang, else clang-14)
#   OCL_ICD_VENDORS the OpenCL drivers to load (default: PoCL's alone, when installed)
# Exit status: 0 when the time ran out without a finding, 1 on a finding (the input is saved in
# the work directory as crash-*, leak-* or timeout-*; replay it with the harness binary) or when
# the harness does not build (the compiler's messages on stderr), 2 on a usage error.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -lt 2 ] || [ ! -f "fuzz/fuzz_$1.c" ] || ! [[ $2 =~ ^[0-9]+$ ]]; then
    echo "usage: tools/fuzz.sh HARNESS SECONDS [libFuzzer options...]" >&2
    echo "       HARNESS: $(cd fuzz && ls fuzz_*.c | sed 's/fuzz_\(.*\)\.c/\1/' | tr '\n' ' ')" >&2
    exit 2
fi
harness=$1 seconds=$2
shift 2

clang=${CLANG:-}
if [ -z "$clang" ]; then
    for c in clang clang-14 clang-15 clang-16; do
        if command -v "$c" >/dev/null 2>&1; then
            clang=$c
            break
        fi
    done
fi
if [ -z "$clang" ]; then
    echo "fuzz.sh: clang is not installed (tools/install-deps.sh installs clang-14)" >&2
    exit 2
fi

build=${FUZZ_BUILD_DIR:-build-fuzz}
if [ ! -f "$build/build.ninja" ]; then
    CC=$clang meson setup "$build" -Dfuzzing=true -Dtests=false -Dexamples=false \
        -Doclgrind=disabled --buildtype=debugoptimized -Db_sanitize=address,undefined \
        -Db_lundef=false >/dev/null
fi
# the compiler's messages go to stderr when the build fails (run-tests.sh shows stderr's tail)
if ! meson compile -C "$build" "fuzz/fuzz_$harness" >"$build/compile-$harness.log" 2>&1; then
    tail -n 30 "$build/compile-$harness.log" >&2
    echo "fuzz.sh: building fuzz/fuzz_$harness with $clang failed" >&2
    exit 1
fi

work=${FUZZ_WORK_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/clattn-fuzz-$harness.XXXXXX")}
mkdir -p "$work/corpus"
echo "fuzz.sh: fuzzing $harness for $seconds s; new inputs and findings in $work"

# intercept_tls_get_addr=0: see tools/run-tests.sh (oneDNN's OpenMP threads)
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:intercept_tls_get_addr=0:${ASAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export POCL_DEBUG=0 CLATTN_TUNE='' CLATTN_TUNING_CACHE="$work/no-tuning-cache.json"
# The model harness needs one OpenCL device: PoCL's, and only PoCL's ICD loaded, because
# LeakSanitizer counts what other drivers leak when the loader opens them (Mesa's Rusticl: 72
# bytes) as a finding. OCL_ICD_VENDORS set by the caller wins.
if [ -z "${OCL_ICD_VENDORS:-}" ] && [ -f /etc/OpenCL/vendors/pocl.icd ]; then
    export OCL_ICD_VENDORS=/etc/OpenCL/vendors/pocl.icd
fi
dict=()
[ -f "fuzz/$harness.dict" ] && dict=(-dict="fuzz/$harness.dict")
rc=0
"$build/fuzz/fuzz_$harness" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$work/" "${dict[@]}" "$@" \
    "$work/corpus" "fuzz/corpus/$harness" || rc=$?
if [ "$rc" -ne 0 ]; then
    echo "fuzz.sh: a finding (exit $rc): see $work" >&2
    exit 1
fi
if [ "${FUZZ_MERGE:-0}" = 1 ]; then
    "$build/fuzz/fuzz_$harness" -merge=1 "${dict[@]}" "fuzz/corpus/$harness" "$work/corpus"
fi
