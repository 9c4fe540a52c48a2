#!/bin/bash
# clattn-serve with cross-encoder folders (tests/golden/crossenc: small random
# *ForSequenceClassification models of tools/gen_crossenc_golden.py), driven with curl:
#   - POST /rerank gives clattn-rerank's order and float32 scores (the C API,
#     clattn_cross_encoder_score) byte for byte, and sentence-transformers' CrossEncoder ranking
#     within 1e-5, with and without raw_scores, with return_text; on BERT and RoBERTa heads;
#   - POST /predict: pairs, a batch of pairs, the golden's sigmoid (one label), softmax (three
#     labels; ModernBERT's two, named from id2label) and raw logits within 1e-5;
#   - the routes of the other kind are refused naming the model's kind (/embed on a cross-encoder,
#     /rerank on an embedder or on a three-label classifier), and the bad requests: empty texts,
#     a missing query, too many texts, a pair too long without truncation, truncation_direction
#     left; GET /info describes a reranker or a classifier;
#   - the RoBERTa, XLM-RoBERTa and ModernBERT embedders (tests/golden/roberta, modernbert): /embed
#     gives sentence-transformers' embeddings within 1e-5.
# usage: test_serve_rerank.sh SERVE RERANK GOLDEN_DIR
set -u
serve=$1 rerank=$2 golden=$3
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/clattn-serve-rerank.XXXXXX")
source "$here/serve_lib.sh"
check() {
    if out=$(python3 "$here/serve_rerank_check.py" "$@"); then
        echo "$out"
    else
        bad "${out#FAIL: }"
    fi
}
# json_request QUERY_FILE DOCS_FILE [EXTRA]: /rerank's body for the query and the documents.
json_request() {
    python3 -c 'import json, sys
query = open(sys.argv[1], encoding="utf-8").read().rstrip("\n")
docs = open(sys.argv[2], encoding="utf-8").read().split("\n")[:-1]
body = {"query": query, "texts": docs}
body.update(json.loads(sys.argv[3]))
print(json.dumps(body))' "$@"
}

# The ranking of one_label's golden (rerank_query.txt, rerank_documents.txt) by each head.
query_file=$golden/crossenc/one_label/rerank_query.txt
docs_file=$golden/crossenc/one_label/rerank_documents.txt
query=$(cat "$query_file")
for name in one_label roberta; do
    model=$golden/crossenc/$name
    echo "--- $name"
    start_server "$tmp/$name.log" --model "$model" --max-client-batch-size 32 || continue
    "$rerank" --model "$model" --query "$query" --input "$docs_file" --json \
        >"$tmp/cli.json" 2>"$tmp/cli.err" || bad "clattn-rerank failed: $(cat "$tmp/cli.err")"
    "$rerank" --model "$model" --query "$query" --input "$docs_file" --json --raw-scores \
        >"$tmp/cli_raw.json" 2>"$tmp/cli.err" || bad "clattn-rerank --raw-scores failed"
    golden_args=()
    [ "$name" = one_label ] && golden_args=("$model/pairs.json" ranked)
    post /rerank "$(json_request "$query_file" "$docs_file" '{"return_text": true, "truncate": true}')"
    want 200 "$name: POST /rerank with return_text" &&
        check rerank "$tmp/body" "$tmp/cli.json" "${golden_args[@]}"
    [ "$name" = one_label ] && golden_args=("$model/pairs.json" ranked_raw)
    post /rerank "$(json_request "$query_file" "$docs_file" '{"raw_scores": true, "truncate": true}')"
    want 200 "$name: POST /rerank with raw_scores" &&
        check rerank "$tmp/body" "$tmp/cli_raw.json" "${golden_args[@]}"
    if grep -q '"text"' "$tmp/body"; then bad "$name: texts without return_text"; fi
    # Every golden pair (whitespace at the ends, an empty one, long ones cut at the model's
    # max_length) through /predict: transformers' sigmoid of the logit.
    python3 -c 'import json, sys
print(json.dumps({"inputs": json.load(open(sys.argv[1]))["pairs"], "truncate": True}))' \
        "$model/pairs.json" >"$tmp/pairs.json"
    post /predict "$(cat "$tmp/pairs.json")"
    want 200 "$name: POST /predict, a batch of pairs" &&
        check predict "$tmp/body" "$model/pairs.json" sigmoid
    call GET /info
    if want 200 "$name: GET /info" && ! grep -q '"reranker"' "$tmp/body"; then
        bad "$name: /info does not describe a reranker: $(head -c 300 "$tmp/body")"
    fi
    stop_server "$server_pid" TERM "$name"
done

echo "--- one_label: /predict, the other kind's routes and bad requests"
model=$golden/crossenc/one_label
start_server "$tmp/predict.log" --model "$model" --max-client-batch-size 32 \
    --max-input-length 16 || exit 1
# The golden's `short` set: its pairs truncated at 16 tokens.
python3 -c 'import json, sys
g = json.load(open(sys.argv[1]))
print(json.dumps({"inputs": g["pairs"], "truncate": True}))' "$model/pairs.json" >"$tmp/pairs.json"
post /predict "$(cat "$tmp/pairs.json")"
want 200 "POST /predict, a batch of pairs truncated at 16 tokens" &&
    python3 -c 'import json, sys
g = json.load(open(sys.argv[1]))
json.dump({"short_sigmoid": [[p] for p in g["short"]["predict"]]}, open(sys.argv[2], "w"))' \
        "$model/pairs.json" "$tmp/short.json" &&
    check predict "$tmp/body" "$tmp/short.json" short_sigmoid
post /predict '{"inputs": ["what is the capital of france?", "the capital of france is paris"], "truncate": true}'
if want 200 "POST /predict, one pair" && ! python3 -c 'import json, sys
a = json.load(open(sys.argv[1]))
assert isinstance(a, list) and len(a) == 1 and a[0]["label"] == "LABEL_0", a' "$tmp/body"; then
    bad "one pair is not [{score, label}]: $(cat "$tmp/body")"
fi
post /predict '{"inputs": [["a", "b", "c"]]}'
want 422 "POST /predict with three texts in a sequence"
post /embed '{"inputs": "hello"}'
if want 424 "POST /embed on a cross-encoder" && ! grep -q 'not an embedding model' "$tmp/body"; then
    bad "the refusal does not name the kind: $(cat "$tmp/body")"
fi
post /v1/embeddings '{"input": "hello", "model": "x"}'
want 400 "POST /v1/embeddings on a cross-encoder"
post /rerank '{"query": "q", "texts": []}'
want 400 "POST /rerank with no texts"
post /rerank '{"texts": ["a"]}'
want 422 "POST /rerank without a query"
post /rerank '{"query": "q", "texts": ["a", "b"], "truncation_direction": "left"}'
want 422 "POST /rerank with truncation_direction left"
post /rerank '{"query": "what is the capital of france?", "texts": ["paris is the capital of france, a city on the seine"], "truncate": false}'
want 413 "POST /rerank, a pair over --max-input-length without truncation"
post /rerank "$(python3 -c 'import json; print(json.dumps({"query": "q", "texts": ["d"] * 33}))')"
want 413 "POST /rerank, 33 texts over --max-client-batch-size 32"
# Ties rank by index: a document twice scores the same bytes (batch invariance), so [hi, lo, hi,
# lo] ranks [0, 2, 1, 3] (hi: whichever of the two scores higher alone).
post /rerank '{"query": "what is the capital of france?", "texts": ["paris is the capital", "a city on the seine"], "truncate": true}'
if want 200 "POST /rerank, two documents"; then
    ties=$(python3 -c 'import json, sys
ranks = json.load(open(sys.argv[1]))
assert ranks[0]["score"] != ranks[1]["score"], "the two documents score the same"
texts = ["paris is the capital", "a city on the seine"]
hi, lo = texts[ranks[0]["index"]], texts[ranks[1]["index"]]
print(json.dumps({"query": "what is the capital of france?", "texts": [hi, lo, hi, lo],
                  "truncate": True}))' "$tmp/body") || bad "the two documents: $(cat "$tmp/body")"
    post /rerank "$ties"
    if want 200 "POST /rerank [hi, lo, hi, lo]"; then
        order=$(python3 -c 'import json, sys
print([r["index"] for r in json.load(open(sys.argv[1]))])' "$tmp/body")
        [ "$order" = "[0, 2, 1, 3]" ] && ok "ties rank by index: $order" ||
            bad "[hi, lo, hi, lo] ranked $order, not [0, 2, 1, 3]: $(cat "$tmp/body")"
    fi
fi
stop_server "$server_pid" TERM "one_label"

echo "--- --max-input-length below a pair's special tokens + 2: refused at start (exit 2)"
# one_label is a BERT ([CLS] a [SEP] b [SEP]: 3 + 2), roberta a RoBERTa (<s> a </s></s> b </s>:
# 4 + 2).
for spec in one_label:5 roberta:6; do
    name=${spec%:*} least=${spec#*:}
    # (A server that accepted it would serve until the timeout.)
    timeout 60 "$serve" --model "$golden/crossenc/$name" --port 0 --max-input-length 2 \
        >"$tmp/short.out" 2>"$tmp/short.err"
    rc=$?
    if [ "$rc" = 2 ] && grep -q "needs at least $least" "$tmp/short.err"; then
        ok "$name --max-input-length 2: exit 2, $(grep -o 'cannot hold.*' "$tmp/short.err")"
    else
        bad "$name --max-input-length 2: exit $rc (2 expected, naming $least): $(tail -n 2 "$tmp/short.err")"
    fi
done

echo "--- three_labels: softmax over id2label's names; /rerank refused"
model=$golden/crossenc/three_labels
start_server "$tmp/three.log" --model "$model" || exit 1
python3 -c 'import json, sys
g = json.load(open(sys.argv[1]))
print(json.dumps({"inputs": g["pairs"], "truncate": True}))' "$model/pairs.json" >"$tmp/pairs3.json"
post /predict "$(cat "$tmp/pairs3.json")"
labels=$(python3 -c 'import json, sys
c = json.load(open(sys.argv[1]))["id2label"]
print(" ".join(c[str(k)] for k in range(len(c))))' "$model/config.json")
# shellcheck disable=SC2086 # the labels are words
want 200 "POST /predict on three labels" && check predict "$tmp/body" "$model/pairs.json" softmax $labels
post /rerank '{"query": "q", "texts": ["a"]}'
if want 424 "POST /rerank on a three-label classifier" && ! grep -q '3 labels' "$tmp/body"; then
    bad "the refusal does not name the labels: $(cat "$tmp/body")"
fi
call GET /info
if want 200 "GET /info" && ! grep -q '"classifier"' "$tmp/body"; then
    bad "/info does not describe a classifier: $(head -c 300 "$tmp/body")"
fi
stop_server "$server_pid" TERM "three_labels"

echo "--- modernbert: a two-label ModernBertForSequenceClassification through /predict"
model=$golden/crossenc/modernbert
start_server "$tmp/modernbert.log" --model "$model" || exit 1
python3 -c 'import json, sys
print(json.dumps({"inputs": json.load(open(sys.argv[1]))["pairs"], "truncate": True}))' \
    "$model/pairs.json" >"$tmp/pairs_mb.json"
post /predict "$(cat "$tmp/pairs_mb.json")"
labels=$(python3 -c 'import json, sys
c = json.load(open(sys.argv[1]))["id2label"]
print(" ".join(c[str(k)] for k in range(len(c))))' "$model/config.json")
# shellcheck disable=SC2086 # the labels are words
want 200 "POST /predict on ModernBERT's two labels" &&
    check predict "$tmp/body" "$model/pairs.json" softmax $labels
post /predict "$(python3 -c 'import json, sys
g = json.load(open(sys.argv[1]))
print(json.dumps({"inputs": g["pairs"], "truncate": True, "raw_scores": True}))' "$model/pairs.json")"
# shellcheck disable=SC2086
want 200 "POST /predict with raw_scores" &&
    check predict "$tmp/body" "$model/pairs.json" logits $labels
stop_server "$server_pid" TERM "modernbert"

# The other new families' embedders over HTTP: /embed gives sentence-transformers' embeddings
# (their texts have no whitespace at the ends, which TEI's route keeps), and they refuse the
# scoring routes. xlmr's tokenizer.json is the Unigram golden's, unpacked into a copy.
cp -r "$golden/roberta/xlmr" "$tmp/xlmr"
[ -e "$tmp/xlmr/tokenizer.json" ] || gzip -dc "$golden/unigram/tokenizer.json.gz" >"$tmp/xlmr/tokenizer.json"
for model in "$golden/roberta/roberta" "$tmp/xlmr" "$golden/modernbert/basic"; do
    name=$(basename "$model")
    echo "--- $name: an embedder"
    start_server "$tmp/embedder-$name.log" --model "$model" --auto-truncate || continue
    normalize=$(python3 -c 'import json, sys
m = json.load(open(sys.argv[1]))
print("true" if any(x["type"].endswith("Normalize") for x in m) else "false")' "$model/modules.json")
    python3 -c 'import json, sys
texts = open(sys.argv[1], encoding="utf-8").read().split("\n")[:-1]
print(json.dumps({"inputs": texts, "normalize": sys.argv[2] == "true"}))' \
        "$model/texts.txt" "$normalize" >"$tmp/embed.json"
    post /embed "$(cat "$tmp/embed.json")"
    want 200 "$name: POST /embed" && check embed "$tmp/body" "$model/embeddings.npy"
    post /rerank '{"query": "q", "texts": ["a"]}'
    if want 424 "$name: POST /rerank on an embedder" &&
        ! grep -q 'not a re-ranker model' "$tmp/body"; then
        bad "the refusal does not name the kind: $(cat "$tmp/body")"
    fi
    post /predict '{"inputs": ["a", "b"]}'
    want 424 "$name: POST /predict on an embedder"
    stop_server "$server_pid" TERM "$name"
done

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
