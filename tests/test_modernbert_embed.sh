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

echo "--- token ids and embeddings against sentence-transformers"
"$embed" --model "$golden" --tokenize --input "$golden/texts.txt" >"$tmp/ids.txt"
expect 0 "" -- diff "$tmp/ids.txt" "$golden/ids.txt"
expect 0 "" -- "$embed" --model "$golden" --input "$golden/texts.txt" --output "$tmp/e.npy"
expect 0 "max abs difference" -- "$compare" "$tmp/e.npy" "$golden/embeddings.npy" 1e-5
# batch invariance: one text at a time, the same bytes
expect 0 "" -- "$embed" --model "$golden" --input "$golden/texts.txt" --batch-size 1 \
    --output "$tmp/b1.npy"
expect 0 "" -- cmp "$tmp/b1.npy" "$tmp/e.npy"

echo "--- the length without sentence_bert_config.json: max_position_embeddings (8192), not 64"
mkdir "$tmp/folder"
cp -r "$golden"/. "$tmp/folder/"
rm "$tmp/folder/sentence_bert_config.json"
long=$(grep -m 1 "long enough to be truncated" "$golden/texts.txt")
count=$("$embed" --model "$tmp/folder" --tokenize "$long" | tr ',' '\n' | wc -l)
if [ "$count" -le 64 ]; then
    echo "FAIL: the long text has $count ids without sentence_bert_config.json (expected > 64)"
    failures=$((failures + 1))
else
    echo "ok:   the long text keeps its $count ids"
fi
expect 0 "" -- "$embed" --model "$tmp/folder" --output "$tmp/long.npy" "$long"

echo "--- what the encoder does not implement is named"
sed -i 's/"hidden_activation": "gelu"/"hidden_activation": "quick_gelu"/' "$tmp/folder/config.json"
expect 1 "hidden_activation \"quick_gelu\" is not supported" -- "$embed" --model "$tmp/folder" hello
sed -i 's/"hidden_activation": "quick_gelu"/"hidden_activation": "gelu"/' "$tmp/folder/config.json"
sed -i 's/"mlp_bias": false/"mlp_bias": true/' "$tmp/folder/config.json"
expect 1 "attention_bias (false) and mlp_bias (true) must be both true or both false" -- \
    "$embed" --model "$tmp/folder" hello

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
