#!/usr/bin/env bash
# tools/device-check-pack.sh: prepares, on this (Debian 12) machine, what tools/device-check.sh
# needs on a machine that has a GPU but not libclattn's build dependencies, nor the network to
# fetch them, nor the model (the workplace's CUDA image: PyTorch, meson, ninja and a compiler,
# but no CLBlast, jansson, cmocka... and no MiniLM). Writes the folder .device-check/ in the
# repository (add `/.device-check/` to .git/info/exclude and carry it):
#
#   .device-check/debs/        Debian 12's packages of the build dependencies (apt-get
#                              download: headers, libraries, pkg-config files, pkgconf itself),
#                              which device-check.sh unpacks into a folder of its own (never
#                              into /) and points the build at
#   .device-check/minilm-f16/  all-MiniLM-L6-v2 with its weights stored as F16 (45 MB instead of
#                              91: the working tree that travels is limited to 64 MiB) and
#                              lines_embeddings.npy: sentence-transformers' embeddings of
#                              tests/golden/minilm/lines.txt computed from those same F16
#                              weights (in fp32), the reference embed is held to there (1e-5)
#
# usage: tools/device-check-pack.sh [--no-model] [--python VENV_PYTHON] [--model DIR]
#   --python  a Python with torch, safetensors and sentence-transformers (default
#             ~/.cache/clattn/infinity-venv/bin/python)
#   --model   the all-MiniLM-L6-v2 folder (default ~/.cache/clattn/all-MiniLM-L6-v2)
# Prints the size of what travels; the tracked files, .device-check and anything else
# untracked must stay under 64 MiB together.
set -eu

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
python=$HOME/.cache/clattn/infinity-venv/bin/python
model=${CLATTN_MODEL_CACHE:-$HOME/.cache/clattn}/all-MiniLM-L6-v2
with_model=1
while [ $# -gt 0 ]; do
    case "$1" in
        --no-model) with_model=0; shift ;;
        --python) python=$2; shift 2 ;;
        --model) model=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "device-check-pack: unknown option '$1'" >&2; exit 2 ;;
    esac
done

# The build dependencies (meson.build, tests/meson.build, examples/meson.build), each -dev
# package with its run-time library, and pkg-config (pkgconf) for meson to find them with.
packages="pkgconf pkgconf-bin libpkgconf3
ocl-icd-opencl-dev ocl-icd-libopencl1 opencl-c-headers
libclblast-dev libclblast1
libjansson-dev libjansson4
libutf8proc-dev libutf8proc2
libpcre2-dev libpcre2-8-0
libcmocka-dev libcmocka0
libmicrohttpd-dev libmicrohttpd12"

pack=$root/.device-check
mkdir -p "$pack/debs"
rm -f "$pack"/debs/*.deb
# shellcheck disable=SC2086  # a list of package names
(cd "$pack/debs" && apt-get download $packages)

if [ $with_model = 1 ]; then
    rm -rf "$pack/minilm-f16"
    mkdir -p "$pack/minilm-f16"
    (cd "$model" && find . -type f ! -name 'model.safetensors' ! -name 'pytorch_model.bin' \
        ! -name '*.onnx' ! -name '*.h5' ! -name '*.msgpack' -print0 |
        xargs -0 -I{} cp --parents {} "$pack/minilm-f16/")
    "$python" - "$model" "$pack/minilm-f16" "$root/tests/golden/minilm/lines.txt" <<'EOF'
import os, sys
import numpy as np
import torch
from safetensors.torch import load_file, save_file
src, dst, lines = sys.argv[1:4]
state = load_file(os.path.join(src, "model.safetensors"))
save_file({k: v.to(torch.float16) if v.is_floating_point() else v for k, v in state.items()},
          os.path.join(dst, "model.safetensors"), metadata={"format": "pt"})
from sentence_transformers import SentenceTransformer
model = SentenceTransformer(dst, device="cpu")  # transformers loads the F16 weights as fp32
assert next(model.parameters()).dtype == torch.float32
with open(lines, encoding="utf-8", newline="") as f:
    texts = f.read().split("\n")[:-1]
emb = model.encode(texts, batch_size=8, convert_to_numpy=True).astype(np.float32)
np.save(os.path.join(dst, "lines_embeddings.npy"), emb)
print("minilm-f16: %d embeddings of %s" % (len(emb), lines))
EOF
fi
du -sh "$pack"/* 2>/dev/null
tracked=$(git -C "$root" ls-files -z | (cd "$root" && xargs -0 du -cb 2>/dev/null) | tail -n 1 | cut -f1)
extra=$(du -sb "$pack" | cut -f1)
echo "device-check-pack: tracked files $((tracked / 1048576)) MiB + .device-check $((extra / 1048576)) MiB of the 64 MiB that may travel"
grep -qx '/.device-check/' "$(git -C "$root" rev-parse --git-common-dir)/info/exclude" 2>/dev/null ||
    echo "device-check-pack: add '/.device-check/' to .git/info/exclude, and carry .device-check"
