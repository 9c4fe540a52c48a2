#!/bin/bash
# examples/embed on a NomicBERT sentence-transformers folder (tests/golden/nomic/basic, a small
# random nomic_bert model in nomic-embed-text-v1.5's layout, written by
# tools/gen_nomic_golden.py): --tokenize gives the `tokenizers` package's ids, the embeddings
# (mean pooling, L2 normalisation) equal the reference transcribed from the published modelling
# code to 1e-5, with and without the model's "search_query" prompt, batch after batch the same
# bytes; without sentence_bert_config.json the length is bounded by n_positions (no position
# table: RoPE), and a config value the encoder does not implement is an error naming its key.
#
#   test_nomic_embed.sh EMBED NPY_COMPARE GOLDEN_DIR
set -u
embed=$1 compare=$2
golden=$3/nomic/basic
tmp=$(mktemp -d "${TMPDIR:-/tmp}/clattn-nomic-embed.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/expect.sh"
source "$(dirname "$0")/embed_lib.sh"

echo "--- token ids and embeddings against the reference"
expect_golden_embeddings "$golden"
expect 0 "" -- "$embed" --model "$golden" --input "$golden/texts.txt" --prompt-name search_query \
    --output "$tmp/q.npy"
expect 0 "max abs difference" -- "$compare" "$tmp/q.npy" "$golden/embeddings_search_query.npy" 1e-5
# --prompt gives the same text before each one: the same rows
expect 0 "" -- "$embed" --model "$golden" --input "$golden/texts.txt" --prompt "search_query: " \
    --output "$tmp/p.npy"
expect 0 "" -- cmp "$tmp/p.npy" "$tmp/q.npy"

echo "--- the length without sentence_bert_config.json: n_positions (8192), not 48"
expect_longer_without_sbert_config "$golden" "$(tail -n 1 "$golden/texts.txt")" 48

echo "--- what the encoder does not implement is named"
sed -i 's/"rotary_scaling_factor": null/"rotary_scaling_factor": 2/' "$tmp/folder/config.json"
expect 1 "rotary_scaling_factor 2 is not supported" -- "$embed" --model "$tmp/folder" hello
sed -i 's/"rotary_scaling_factor": 2/"rotary_scaling_factor": null/' "$tmp/folder/config.json"
sed -i 's/"prenorm": false/"prenorm": true/' "$tmp/folder/config.json"
expect 1 "prenorm true is not supported" -- "$embed" --model "$tmp/folder" hello

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
