#!/bin/bash
# RoBERTa and XLM-RoBERTa sentence-transformers folders through examples/embed
# (tests/golden/roberta/roberta: byte-level BPE, mean pooling; tests/golden/roberta/xlmr:
# SentencePiece Unigram, CLS pooling, Normalize; small random models written by
# tools/gen_roberta_golden.py). xlmr's tokenizer.json is tests/golden/unigram/tokenizer.json.gz,
# unpacked into a copy of the folder. For each: --tokenize gives the `tokenizers` package's ids,
# the embeddings equal sentence-transformers' (float64) to 1e-5 in any batching (texts padded
# together: padding does not move a text's positions) and byte for byte between batchings,
# also for texts with whitespace at the ends (stripped as sentence-transformers strips it);
# without sentence_bert_config.json the texts are cut at max_position_embeddings - 2 = 128
# tokens, the last rows of the position table, again as sentence-transformers does; a
# pad_token_id that leaves no position is named.
#
#   test_roberta_embed.sh EMBED NPY_COMPARE GOLDEN_DIR
set -u
embed=$1 compare=$2 golden=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/clattn-roberta-embed.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/expect.sh"

for name in roberta xlmr; do
    echo "--- $name"
    src=$golden/roberta/$name model=$tmp/$name
    cp -r "$src" "$model"
    if [ ! -e "$model/tokenizer.json" ]; then
        gzip -dc "$golden/unigram/tokenizer.json.gz" >"$model/tokenizer.json"
    fi
    "$embed" --model "$model" --tokenize --input "$src/texts.txt" >"$tmp/$name-ids.txt"
    expect 0 "" -- cmp "$tmp/$name-ids.txt" "$src/ids.txt"
    for batch in 32 1 3; do
        expect 0 "" -- "$embed" --model "$model" --input "$src/texts.txt" --batch-size "$batch" \
            --output "$tmp/$name-b$batch.npy"
        expect 0 "max abs difference" -- \
            "$compare" "$tmp/$name-b$batch.npy" "$src/embeddings.npy" 1e-5
    done
    expect 0 "" -- cmp "$tmp/$name-b1.npy" "$tmp/$name-b32.npy"
    expect 0 "" -- cmp "$tmp/$name-b3.npy" "$tmp/$name-b32.npy"
    # Whitespace at the ends (spaces, a tab, U+3000, U+00A0, U+2003, ...) is stripped first, as
    # sentence-transformers strips it: without that, byte-level BPE and Metaspace make tokens.
    expect 0 "" -- "$embed" --model "$model" --input "$src/texts_spaced.txt" \
        --output "$tmp/$name-spaced.npy"
    expect 0 "max abs difference" -- \
        "$compare" "$tmp/$name-spaced.npy" "$src/embeddings_spaced.npy" 1e-5

    # Without sentence_bert_config.json: 128 tokens at most (positions 2 .. 129 of 130 rows).
    rm "$model/sentence_bert_config.json"
    longest=$("$embed" --model "$model" --tokenize --input "$src/texts.txt" |
        awk -F, '{ if (NF > n) n = NF } END { print n }')
    if [ "$longest" != 128 ]; then
        echo "FAIL: without sentence_bert_config.json the longest text has $longest ids (128)"
        failures=$((failures + 1))
    else
        echo "ok:   without sentence_bert_config.json the longest text has 128 ids"
    fi
    expect 0 "" -- "$embed" --model "$model" --input "$src/texts.txt" --output "$tmp/$name-full.npy"
    expect 0 "max abs difference" -- \
        "$compare" "$tmp/$name-full.npy" "$src/embeddings_max_length.npy" 1e-5
done

echo "--- a pad_token_id that leaves no position is named"
sed -i 's/"pad_token_id": 1/"pad_token_id": 129/' "$tmp/roberta/config.json"
expect 1 'the field "pad_token_id" must be an integer from 0 to max_position_embeddings - 2 (128)' \
    -- "$embed" --model "$tmp/roberta" hello

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
