#!/bin/bash
# The Python package's tests, as CI runs them (tools/run-tests.sh): in a fresh venv,
# `pip install .` (meson-python builds the library again, tests and examples off) and pytest on
# tests/python, with the command-line embed and rerank of BUILD_DIR for the byte-for-byte parity
# tests and BUILD_DIR's tests/abi_layout (the C layout of the structs that _api.py mirrors with
# ctypes, for tests/python/test_abi_layout.py); then `pip wheel .` and the wheel installed into a
# second, clean venv, where importing clattn and scoring a pair must work. The package's tests
# need no PyTorch (their expected values are committed goldens); then tools/check-generators.sh
# re-runs every reference generator of tools/ for one small case, from tools/make-golden-venv.sh's
# venv (PyTorch and the Hugging Face packages), and compares with the committed goldens.
# Needs python3 with venv (Debian: python3-venv) and PyPI (numpy, pytest, meson-python, meson,
# ninja). With CLATTN_REQUIRE_REAL_MODEL=1 a missing real model fails the tests.
#
#   tools/test-python.sh [BUILD_DIR]     (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
work=$(mktemp -d "${TMPDIR:-/tmp}/clattn-python.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "--- pip install . in a fresh venv"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check numpy pytest
"$work/venv/bin/pip" install --quiet --disable-pip-version-check .

echo "--- pytest tests/python"
CLATTN_EMBED=$PWD/$build/examples/embed CLATTN_RERANK=$PWD/$build/examples/rerank \
    CLATTN_ABI_LAYOUT=$PWD/$build/tests/abi_layout \
    "$work/venv/bin/python" -m pytest -q -p no:cacheprovider tests/python

echo "--- pip wheel ., installed into a clean venv"
"$work/venv/bin/pip" wheel --quiet --disable-pip-version-check --no-deps -w "$work/wheels" .
wheel=$(ls "$work"/wheels/clattn-*.whl)
echo "wheel: $(basename "$wheel") ($(du -k "$wheel" | cut -f1) KiB)"
python3 -m venv "$work/clean"
"$work/clean/bin/pip" install --quiet --disable-pip-version-check "$wheel"
golden=$PWD/tests/golden
(cd "$work" && "$work/clean/bin/python" - "$golden/crossenc/one_label" <<'PY'
import sys
import clattn
scores = clattn.CrossEncoder(sys.argv[1]).predict([("what is the capital of france?",
                                                    "paris is the capital of france.")])
assert scores.shape == (1,) and 0 < scores[0] < 1, scores
print(f"ok: clattn {clattn.__version__} from the wheel, on {clattn.devices()[0]['name']}")
PY
)

echo "--- the reference generators, one small case each, against the committed goldens"
bash tools/check-generators.sh
