#!/bin/bash
# examples/embed on a ModernBERT sentence-transformers folder (tests/golden/modernbert/basic, a
# small random ModernBertModel with local_attention 16 and a byte-level BPE tokenizer, written by
# tools/gen_modernbert_golden.py): --tokenize gives the `tokenizers` package's ids, the
# embeddings (mean pooling, L2 normalisation) equal sentence-transformers' to 1e-5 — among them a
# text with spaces at both ends, which sentence-transformers strips —, batch after batch the
# same bytes; without sentence_bert_config.json the length is bounded by
# max_position_embeddings (no position table: RoPE), and a config value the encoder does not
# implement is an error naming its key.
#
#   test_modernbert_embed.sh EMBED NPY_COMPARE GOLDEN_DIR
set -u
embed=$1 compare=$2
golden=$3/modernbert/basic
tmp=$(mktemp -d "${TMPDIR:-/tmp}/clattn-modernbert-embed.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/expect.sh"
source "$(dirname "$0")/embed_lib.sh"

echo "--- token ids and embeddings against sentence-transformers"
expect_golden_embeddings "$golden"

echo "--- the length without sentence_bert_config.json: max_position_embeddings (8192), not 64"
expect_longer_without_sbert_config "$golden" \
    "$(grep -m 1 "long enough to be truncated" "$golden/texts.txt")" 64

echo "--- what the encoder does not implement is named"
sed -i 's/"hidden_activation": "gelu"/"hidden_activation": "quick_gelu"/' "$tmp/folder/config.json"
expect 1 "hidden_activation \"quick_gelu\" is not supported" -- "$embed" --model "$tmp/folder" hello
sed -i 's/"hidden_activation": "quick_gelu"/"hidden_activation": "gelu"/' "$tmp/folder/config.json"
sed -i 's/"mlp_bias": false/"mlp_bias": true/' "$tmp/folder/config.json"
expect 1 "attention_bias (false) and mlp_bias (true) must be both true or both false" -- \
    "$embed" --model "$tmp/folder" hello

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
