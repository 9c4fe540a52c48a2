#!/bin/bash
# End-to-end tests of examples/rerank (clattn-rerank) on tests/golden/crossenc/one_label (a small
# random BertForSequenceClassification; tools/gen_crossenc_golden.py): the order and the scores
# of sentence-transformers' CrossEncoder.rank (ranked.tsv) and of the raw logits
# (ranked_raw.tsv) within 1e-5, --top-k, --json, documents from a file, from standard input and
# as arguments, --precision bf16 and int8 (close to fp32's scores); usage errors (exit 2) and
# runtime errors (exit 1) naming their cause.
# usage: test_rerank.sh RERANK GOLDEN_DIR
set -u
rerank=$1 golden=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/clattn-rerank.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/expect.sh"

model=$golden/crossenc/one_label
query=$(cat "$model/rerank_query.txt")
docs=$model/rerank_documents.txt

# check_ranking NAME OUTPUT EXPECTED.tsv [LINES]: the output's lines "index<TAB>score<TAB>text"
# against the expected "index<TAB>score" lines (the first LINES of them): the same indices in the
# same order, scores within 1e-5, and each text the document of its index.
check_ranking() {
    local name=$1 output=$2 expected=$3 lines=${4:-0}
    local report
    report=$(awk -F'\t' -v lines="$lines" '
        FILENAME == ARGV[1] { doc[FNR - 1] = $0; next }
        FILENAME == ARGV[2] { if (lines == 0 || FNR <= lines) { want[++n] = $1; score[n] = $2 }
                              next }
        { got[++m] = $1; gscore[m] = $2; text[m] = $3 }
        END {
            if (m != n) { print "lines: " m ", expected " n; exit }
            for (i = 1; i <= n; i++) {
                d = gscore[i] - score[i]; if (d < 0) d = -d
                if (got[i] != want[i] || d > 1e-5 || text[i] != doc[got[i]])
                    print "line " i ": " got[i] " " gscore[i] " \"" text[i] "\", expected " \
                          want[i] " " score[i]
            }
        }' "$docs" "$expected" "$output")
    if [ -n "$report" ]; then
        echo "FAIL: $name"
        sed 's/^/    /' <<<"$report"
        failures=$((failures + 1))
    else
        echo "ok:   $name"
    fi
}

echo "--- usage errors (exit 2)"
expect 0 "usage: rerank" -- "$rerank" --help
expect 2 "--model DIR is required" -- "$rerank" --query q doc
expect 2 "--query QUERY is required" -- "$rerank" --model "$model" doc
expect 2 "no documents" -- "$rerank" --model "$model" --query q
expect 2 "either with --input or as arguments" -- "$rerank" --model "$model" --query q --input - doc
expect 2 "--top-k needs a positive integer, not '0'" -- "$rerank" --model "$model" --query q --top-k 0 d
expect 2 "--top-k needs a positive integer, not '-3'" -- "$rerank" --model "$model" --query q --top-k -3 d
expect 2 "--max-length needs an integer of at least 2" -- "$rerank" --model "$model" --query q --max-length 1 d
expect 2 "--batch-size needs a positive integer" -- "$rerank" --model "$model" --query q --batch-size x d
expect 2 "unknown option '--nope'" -- "$rerank" --nope
expect 2 '--precision is fp32, bf16 or int8, not "fp16"' -- "$rerank" --model "$model" --query q --precision fp16 d
expect 0 "--precision P      fp32 (default), bf16 or int8" -- "$rerank" --help
expect 0 "ModernBertForSequenceClassification" -- "$rerank" --help
expect 2 "option '--query' needs a value" -- "$rerank" --model "$model" --query

echo "--- runtime errors (exit 1)"
expect 1 "--model: clattn_cross_encoder_load: /no/such/dir/config.json: cannot open" -- \
    "$rerank" --model /no/such/dir --query q doc
expect 1 "architectures [\"BertModel\"] is not a sequence classification model" -- \
    "$rerank" --model "$golden/bert/gelu" --query q doc
expect 1 "ranking needs a model with one label (a reranker); this BertForSequenceClassification has 3 (contradiction, entailment, neutral)" -- \
    "$rerank" --model "$golden/crossenc/three_labels" --query q doc
expect 1 "--input: $tmp/missing.txt: cannot open" -- "$rerank" --model "$model" --query q --input "$tmp/missing.txt"
: >"$tmp/empty.txt"
expect 1 "holds no document" -- "$rerank" --model "$model" --query q --input "$tmp/empty.txt"
printf 'good\n\xff bad\n' >"$tmp/invalid.txt"
expect 1 "pair 2: clattn_tokenizer_encode_pair: invalid argument: text_b is not valid UTF-8" -- "$rerank" --model "$model" --query q --input "$tmp/invalid.txt"

echo "--- the ranking against sentence-transformers' CrossEncoder.rank"
"$rerank" --model "$model" --query "$query" --input "$docs" >"$tmp/ranked.txt"
check_ranking "rerank --input" "$tmp/ranked.txt" "$model/ranked.tsv"
"$rerank" --model "$model" --query "$query" --input - --batch-size 3 <"$docs" >"$tmp/stdin.txt"
expect 0 "" -- cmp "$tmp/ranked.txt" "$tmp/stdin.txt"
mapfile -t doc_args <"$docs"
"$rerank" --model "$model" --query "$query" "${doc_args[@]}" >"$tmp/args.txt"
expect 0 "" -- cmp "$tmp/ranked.txt" "$tmp/args.txt"
"$rerank" --model "$model" --query "$query" --input "$docs" --raw-scores >"$tmp/raw.txt"
check_ranking "rerank --raw-scores" "$tmp/raw.txt" "$model/ranked_raw.tsv"
"$rerank" --model "$model" --query "$query" --input "$docs" --top-k 3 >"$tmp/top3.txt"
check_ranking "rerank --top-k 3" "$tmp/top3.txt" "$model/ranked.tsv" 3
"$rerank" --model "$model" --query "$query" --input "$docs" --top-k 100 >"$tmp/top100.txt"
expect 0 "" -- cmp "$tmp/ranked.txt" "$tmp/top100.txt"

echo "--- --precision bf16 and int8: each document's score close to fp32's, not the same bytes"
# (--precision fp32 is the default's bytes; bf16 and int8 run only where the device can: CPU
# devices with oneDNN and AVX512_BF16 / VNNI or AMX, else rerank names the cause and exits 1.)
"$rerank" --model "$model" --query "$query" --input "$docs" --precision fp32 >"$tmp/fp32.txt"
expect 0 "" -- cmp "$tmp/ranked.txt" "$tmp/fp32.txt"
for precision in bf16 int8; do
    if ! "$rerank" --model "$model" --query "$query" --input "$docs" --precision "$precision" \
        >"$tmp/$precision.txt" 2>"$tmp/$precision.err"; then
        expect 0 "precision $precision: " -- cat "$tmp/$precision.err"
        echo "note: --precision $precision is not supported on this device: $(cat "$tmp/$precision.err")"
        continue
    fi
    # index -> score in each; the largest difference, and how many scores have other bytes
    report=$(awk -F'\t' 'FILENAME == ARGV[1] { want[$1] = $2; next }
        { d = $2 - want[$1]; if (d < 0) d = -d; if (d > worst) worst = d
          if ($2 != want[$1]) differ++; n++ }
        END { printf "%d %d %.9g", n, differ, worst }' "$tmp/fp32.txt" "$tmp/$precision.txt")
    read -r n differ worst <<<"$report"
    if [ "$n" -eq 8 ] && [ "$differ" -gt 0 ] && awk -v w="$worst" 'BEGIN { exit !(w <= 0.03) }'; then
        echo "ok:   rerank --precision $precision: $differ of $n scores differ from fp32's, by $worst at most"
    else
        echo "FAIL: rerank --precision $precision: $n documents, $differ scores differ from fp32's, by $worst at most (want 8, some, <= 0.03)"
        failures=$((failures + 1))
    fi
done

echo "--- --json: [{\"index\", \"score\", \"text\"}, ...] best first"
"$rerank" --model "$model" --query "$query" --input "$docs" --json --top-k 4 >"$tmp/ranked.json"
# The JSON's entries as the plain output's lines (no JSON parser needed: the documents hold no
# quotes, backslashes or commas that end an entry early).
sed -e 's/^\[{//' -e 's/}\]$//' -e 's/}, {/\n/g' "$tmp/ranked.json" |
    sed -E 's/^"index": ([0-9]+), "score": ([^,]+), "text": "(.*)"$/\1\t\2\t\3/' >"$tmp/json.txt"
check_ranking "rerank --json --top-k 4" "$tmp/json.txt" "$model/ranked.tsv" 4
expect 0 '[{"index": 7, "score": 0.9076' -- cat "$tmp/ranked.json"
expect 0 '"text": "the capital of france is paris"}' -- cat "$tmp/ranked.json"
"$rerank" --model "$model" --query 'a "quoted" \ query' --json 'x "y" \ z' 'tab	here' >"$tmp/escaped.json"
expect 0 '"text": "x \"y\" \\ z"' -- cat "$tmp/escaped.json"
expect 0 '"text": "tab\u0009here"' -- cat "$tmp/escaped.json"

if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed"
    exit 1
fi
echo "all rerank checks passed"
