#!/bin/bash
# A JinaBERT sentence-transformers folder through examples/embed: tests/golden/jina/basic's
# config.json and model.safetensors with tests/golden/jina/embed's tokenizer.json (BERT
# WordPiece), modules.json (Transformer, Pooling, Normalize) and 1_Pooling/config.json (mean).
# --tokenize gives the ids of the tokenizers package, and the embeddings equal the float64
# reference's (tools/gen_jina_golden.py: jinaai/jina-bert-implementation's forward pass
# transcribed) to 1e-5, whatever the batching, and for a text of 4096 tokens.
#
#   test_jina_embed.sh EMBED NPY_COMPARE GOLDEN_DIR
set -u
embed=$1 compare=$2 golden=$3/jina
tmp=$(mktemp -d "${TMPDIR:-/tmp}/clattn-jina.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/expect.sh"

model=$tmp/jina-small
mkdir -p "$model"
cp "$golden/basic/config.json" "$golden/basic/model.safetensors" "$model/"
cp -r "$golden/embed/tokenizer.json" "$golden/embed/modules.json" "$golden/embed/1_Pooling" \
    "$model/"

"$embed" --model "$model" --tokenize --input "$golden/embed/texts.txt" >"$tmp/ids.txt"
expect 0 "" -- cmp "$tmp/ids.txt" "$golden/embed/ids.txt"
# One batch (rows of 2 to 98 tokens padded together), and batches of 1 and 3.
for batch in 32 1 3; do
    "$embed" --model "$model" --input "$golden/embed/texts.txt" --batch-size "$batch" \
        --output "$tmp/emb$batch.npy"
    expect 0 "max abs difference" -- \
        "$compare" "$tmp/emb$batch.npy" "$golden/embed/embeddings.npy" 1e-5
done
# A text of 4096 tokens (ALiBi over distances up to 4095; tools/gen_jina_golden.py's LONG_TEXT).
for _ in $(seq 700); do printf 'the cat sat on the mat '; done >"$tmp/long.txt"
"$embed" --model "$model" --max-length 4096 --input "$tmp/long.txt" --output "$tmp/long.npy"
expect 0 "max abs difference" -- \
    "$compare" "$tmp/long.npy" "$golden/embed/long_text_embedding.npy" 1e-5
# The family's refusals reach embed's message: an unknown feed_forward_type is named.
sed -i 's/"feed_forward_type": "geglu"/"feed_forward_type": "swiglu"/' "$model/config.json"
expect 1 'feed_forward_type "swiglu" is not supported for JinaBERT' -- "$embed" --model "$model" x

if [ "$failures" -ne 0 ]; then
    echo "$failures failure(s)"
    exit 1
fi
echo "all JinaBERT embed checks passed"
