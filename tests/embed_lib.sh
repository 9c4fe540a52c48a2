#!/bin/bash
# Shared by the model families' embed tests (test_modernbert_embed.sh, test_nomic_embed.sh),
# sourced after expect.sh with `embed` (examples/embed), `compare` (npy_compare) and `tmp` (a
# scratch folder) set.

# expect_golden_embeddings FOLDER: --tokenize gives FOLDER/ids.txt for FOLDER/texts.txt, the
# embeddings ($tmp/e.npy) are FOLDER/embeddings.npy within 1e-5, and one text at a time gives
# the same bytes (batch invariance).
expect_golden_embeddings() {
    local folder=$1
    "$embed" --model "$folder" --tokenize --input "$folder/texts.txt" >"$tmp/ids.txt"
    expect 0 "" -- diff "$tmp/ids.txt" "$folder/ids.txt"
    expect 0 "" -- "$embed" --model "$folder" --input "$folder/texts.txt" --output "$tmp/e.npy"
    expect 0 "max abs difference" -- "$compare" "$tmp/e.npy" "$folder/embeddings.npy" 1e-5
    expect 0 "" -- "$embed" --model "$folder" --input "$folder/texts.txt" --batch-size 1 \
        --output "$tmp/b1.npy"
    expect 0 "" -- cmp "$tmp/b1.npy" "$tmp/e.npy"
}

# expect_longer_without_sbert_config FOLDER TEXT LIMIT: a copy of FOLDER without
# sentence_bert_config.json ($tmp/folder, left for further checks) keeps more than LIMIT (its
# max_seq_length) of TEXT's ids, and embeds it.
expect_longer_without_sbert_config() {
    local folder=$1 text=$2 limit=$3 count
    mkdir "$tmp/folder"
    cp -r "$folder"/. "$tmp/folder/"
    rm "$tmp/folder/sentence_bert_config.json"
    count=$("$embed" --model "$tmp/folder" --tokenize "$text" | tr ',' '\n' | wc -l)
    if [ "$count" -le "$limit" ]; then
        echo "FAIL: the long text has $count ids without sentence_bert_config.json" \
            "(expected > $limit)"
        failures=$((failures + 1))
    else
        echo "ok:   the long text keeps its $count ids"
    fi
    expect 0 "" -- "$embed" --model "$tmp/folder" --output "$tmp/long.npy" "$text"
}
