#!/bin/sh
# Installs libclattn's build and test dependencies from Debian's packages (Debian 12).
# Idempotent: when everything is already installed it changes nothing and needs no network.
# clang-14 and its libFuzzer runtime serve tools/fuzz.sh (the fuzzing step of tools/run-tests.sh);
# Open MPI lets examples/embed run under mpirun (meson's -Dmpi=auto finds it).
# oneDNN (libdnnl-dev) runs the projection GEMMs on CPU devices (meson's -Donednn=auto finds it).
# libmicrohttpd serves HTTP in examples/serve (clattn-serve); curl and python3-venv are for its
# tests (tests/test_serve.sh drives it with curl; tests/serve_client.py makes a venv for the
# official openai client from PyPI).
# Runs apt-get as root (directly, or through sudo when run as another user).
set -eu

packages="
gcc g++ pkg-config python3 python3-pip
meson ninja-build
ocl-icd-opencl-dev opencl-c-headers pocl-opencl-icd
libclblast-dev
libdnnl-dev
libjansson-dev
libmicrohttpd-dev curl python3-venv
libutf8proc-dev
libpcre2-dev
libcmocka-dev
libopenmpi-dev openmpi-bin
oclgrind
clang-14 libclang-rt-14-dev
mesa-opencl-icd libclc-15
"

missing=""
for p in $packages; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

if [ -z "$missing" ]; then
    echo "install-deps: all dependencies are installed"
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    as_root=""
elif command -v sudo >/dev/null 2>&1; then
    as_root="sudo"
else
    echo "install-deps: missing packages:$missing; run this script as root" >&2
    exit 1
fi

echo "install-deps: installing$missing"
$as_root apt-get update
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive $as_root apt-get install -y --no-install-recommends $missing
