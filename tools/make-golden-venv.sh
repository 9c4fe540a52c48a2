#!/bin/bash
# Creates (or completes) the one Python environment every reference generator in tools/ runs from:
# PyTorch, transformers, tokenizers, sentence-transformers, safetensors and numpy from PyPI, at the
# pinned versions below. The generators (tools/gen_*.py, tools/train_toy_seq2seq.py) say
# "usage: ~/.cache/clattn/golden-venv/bin/python ..."; tools/check-generators.sh runs each of
# them from it and compares its output with the committed files (tests/golden/README.md).
#
#   tools/make-golden-venv.sh [DIR]     (default: $CLATTN_GOLDEN_VENV, else ~/.cache/clattn/golden-venv)
#
# Prints the venv's folder on stdout (its python is DIR/bin/python). Idempotent: an existing venv
# whose pinned packages are all installed is left as it is (no network). PyTorch from PyPI brings
# its CUDA libraries (about 3 GB; a minute or two on a fast link): its CPU code is what the
# references use. Needs python3 with venv (Debian: python3-venv).
set -euo pipefail
cd "$(dirname "$0")/.."

venv=${1:-${CLATTN_GOLDEN_VENV:-$HOME/.cache/clattn/golden-venv}}

# The pins: a change here can change the goldens; regenerate and review them together
# (tools/check-generators.sh says which moved). sentencepiece 0.2.3 trains the committed
# tests/golden/unigram tokenizer (0.2.1 another one) and needs protobuf 7.
pins=(
    torch==2.9.1
    transformers==4.57.6
    tokenizers==0.22.1
    sentence-transformers==5.1.2
    safetensors==0.6.2
    numpy==2.3.5
    sentencepiece==0.2.3
    protobuf==7.36.2
    scipy==1.16.3
    scikit-learn==1.7.2
    gguf==0.19.0
    accelerate==1.16.0
    jinja2==3.1.6
)

if [ -x "$venv/bin/python" ] && "$venv/bin/python" - "${pins[@]}" >/dev/null 2>&1 <<'PY'
import sys
from importlib.metadata import version
for pin in sys.argv[1:]:
    name, want = pin.split("==")
    if version(name) != want:
        sys.exit(1)
PY
then
    echo "$venv"
    exit 0
fi

echo "make-golden-venv: installing ${pins[*]} into $venv (PyPI)" >&2
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "${pins[@]}" >&2
echo "$venv"
