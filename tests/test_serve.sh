#!/bin/bash
# End-to-end tests of clattn-serve (examples/serve) driven with curl as its users drive it, every
# embedding compared byte for byte with `embed --output` of the same texts (tests/serve_check.py
# decodes the responses). Two modes:
#   tiny  the small random BERT of tests/golden (fast; also on rusticl and under the sanitizers):
#         every route, both encodings, TEI's normalize, dimensions, token-id inputs, /tokenize,
#         /info, /v1/models, /metrics; the bad-request suite (malformed JSON, wrong types, empty
#         list, invalid UTF-8, oversized body, too many inputs, too long texts with and without
#         truncation, unknown route and method, missing or wrong API key, overload, a slow and
#         a vanishing client), each with its status and message while the server keeps serving;
#         what counts toward --max-concurrent-requests (refused requests do not), the answer
#         threads' stacks, a stop that delivers every answer it promised (tests/serve_limits.py);
#         SIGTERM and SIGINT drain and exit 0.
#   real  all-MiniLM-L6-v2 (tools/fetch-model.sh): the routes on the real model and tokenizer.
#         Without the model: skip (exit 77), unless CLATTN_REQUIRE_REAL_MODEL=1, which fails.
# usage: test_serve.sh SERVE EMBED GOLDEN_DIR tiny|real
set -u
serve=$1 embed=$2 golden=$3 mode=$4
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/clattn-serve.XXXXXX")
source "$here/expect.sh"
# the cleanup on exit, ok and bad; start_server, stop_server, call, post, want
source "$here/serve_lib.sh"
# The interpreter itself, not a version manager's shim (which costs a start each call).
python=$(python3 -c 'import sys; print(sys.executable)')
python3() { "$python" "$@"; }
check() { python3 "$here/serve_check.py" "$@"; }

# want_vectors WHAT SERVE_CHECK_VECTORS_ARGS...: status 200 and the embeddings as given.
want_vectors() {
    local what=$1 out
    shift
    want 200 "$what" || return
    if out=$(check vectors "$tmp/body" "$@"); then
        ok "$what: $out"
    else
        bad "$what: $out"
    fi
}
# want_json_type: the response says it is JSON.
want_json_type() {
    grep -qi '^content-type: application/json' "$tmp/headers" ||
        bad "$1: Content-Type is not application/json: $(grep -i '^content-type' "$tmp/headers")"
}
# still_serving: a good request right after a bad one gets its embedding.
# A 429 means the --max-concurrent-requests slots are still held by earlier requests (whose
# clients may have left: their batches finish first; slow on llvmpipe): retried for up to 120 s.
still_serving() {
    local waited=0
    while :; do
        post /v1/embeddings "{\"input\": \"$good_text\", \"encoding_format\": \"float\"}"
        [ "$code" = 429 ] && [ "$waited" -lt 240 ] || break
        sleep 0.5
        waited=$((waited + 1))
    done
    [ "$code" = 200 ] && check vectors "$tmp/body" "$good_ref" --rows 0 >/dev/null ||
        bad "the server stopped serving good requests (status $code): $(head -c 300 "$tmp/body")"
}
# refused CODES openai|tei NEEDLE WHAT: the request (already sent) got one of CODES with the
# route's error body, its message containing NEEDLE ("a|b": either); then a good request works.
refused() {
    local codes=$1 kind=$2 needle=$3 what=$4 out n found=
    if [[ " $codes " != *" $code "* ]]; then
        bad "$what -> $code (expected $codes): $(head -c 300 "$tmp/body")"
    else
        IFS='|' read -ra alternatives <<<"$needle"
        for n in "${alternatives[@]}"; do
            if out=$(check error "$tmp/body" "$kind" "$n"); then
                found=1
                break
            fi
        done
        if [ -n "$found" ]; then
            ok "$what -> $code, $out"
        else
            bad "$what -> $code, but the body: $out"
        fi
    fi
    still_serving
}

# tokens FILE: the token ids per text (with [CLS] and [SEP]), from embed --tokenize.
tokens() { "$embed" --model "$model" --tokenize --input "$1"; }
token_total() { tokens "$1" | tr -cd ',\n' | awk '{ n += length($0) + 1 } END { print n }'; }
# ids_without_specials FILE: a JSON array of each text's ids without [CLS] and [SEP].
ids_without_specials() {
    tokens "$1" | python3 -c 'import json, sys
print(json.dumps([json.loads(l)[1:-1] for l in sys.stdin]))'
}

# ---- the routes, on a model folder ($model) whose embed output is normalised -----------------

# routes: every route with good requests. $texts holds a few texts, one a line; $long holds one
# text longer than the model's maximum. $ref, $ref_raw: embed's rows for $texts (normalised, as
# the model does, and --no-normalize); $long_ref: embed's row for $long (truncated); $max_tokens:
# the model's maximum length.
routes() {
    local all one n ids out dims=8
    all=$(check json-lines "$texts")
    one=$(head -n 1 "$texts")
    n=$(wc -l <"$texts")
    good_text=$one good_ref=$ref

    echo "--- GET /health, /info, /v1/models"
    call GET /health
    want 200 "GET /health"
    call GET /info
    want 200 "GET /info" && want_json_type "GET /info"
    python3 - "$tmp/body" "$served_name" <<'EOF' && ok "/info names the model and its limits" || bad "/info: $(head -c 300 "$tmp/body")"
import json, sys
info = json.load(open(sys.argv[1]))
for k in ("model_id", "max_input_length", "max_batch_tokens", "max_client_batch_size",
          "max_concurrent_requests", "version"):
    assert k in info, "no " + k
assert info["model_id"] == sys.argv[2], info["model_id"]
EOF
    call GET /v1/models
    want 200 "GET /v1/models"
    python3 - "$tmp/body" "$served_names" <<'EOF' && ok "/v1/models lists $served_names" || bad "/v1/models: $(head -c 300 "$tmp/body")"
import json, sys
body = json.load(open(sys.argv[1]))
assert body["object"] == "list" and [m["id"] for m in body["data"]] == sys.argv[2].split(), body
assert all(m["object"] == "model" for m in body["data"]), body
EOF

    echo "--- POST /v1/embeddings (OpenAI)"
    post /v1/embeddings "{\"input\": $(jq_string "$one"), \"model\": \"$served_name\", \"encoding_format\": \"float\"}"
    want_vectors "one string, float" "$ref" --rows 0
    want_json_type "/v1/embeddings"
    head -n 1 "$texts" >"$tmp/one.txt"
    if out=$(check usage "$tmp/body" "$(token_total "$tmp/one.txt")"); then ok "$out"; else bad "$out"; fi
    post /v1/embeddings "{\"input\": $all, \"model\": \"$served_name\", \"encoding_format\": \"float\"}"
    want_vectors "$n strings, float" "$ref"
    if out=$(check usage "$tmp/body" "$(token_total "$texts")"); then ok "$out"; else bad "$out"; fi
    post /v1/embeddings "{\"input\": $all, \"model\": \"$served_name\", \"encoding_format\": \"base64\"}"
    want_vectors "$n strings, base64" "$ref"
    post /v1/embeddings "{\"input\": $all}"
    want_vectors "$n strings, no encoding_format (float)" "$ref"
    ids=$(ids_without_specials "$texts")
    post /v1/embeddings "{\"input\": $ids, \"encoding_format\": \"base64\"}"
    want_vectors "$n lists of token ids (no [CLS]/[SEP])" "$ref"
    # The first text with ids of its own (an empty list would be an empty input).
    read -r n ids < <(python3 -c 'import json, sys
ids = json.loads(sys.argv[1])
i = next(i for i, t in enumerate(ids) if t)
print(i, json.dumps(ids[i]))' "$ids")
    post /v1/embeddings "{\"input\": $ids}"
    want_vectors "one list of token ids" "$ref" --rows "$n"
    post /v1/embeddings "{\"input\": $all, \"dimensions\": $dims}"
    want_vectors "dimensions $dims, float" "$ref" --dims $dims --renormalize
    post /v1/embeddings "{\"input\": $all, \"dimensions\": $dims, \"encoding_format\": \"base64\"}"
    want_vectors "dimensions $dims, base64" "$ref" --dims $dims --renormalize
    post /v1/embeddings "{\"input\": $all, \"dimensions\": $hidden}"
    want_vectors "dimensions $hidden (the hidden size): the full rows" "$ref"

    echo "--- POST /embed (TEI)"
    post /embed "{\"inputs\": $(jq_string "$one")}"
    want_vectors "/embed one string (normalize defaults to true)" "$ref" --rows 0
    want_json_type "/embed"
    post /embed "{\"inputs\": $all, \"normalize\": true}"
    want_vectors "/embed $n strings, normalize true" "$ref"
    post /embed "{\"inputs\": $all, \"normalize\": false}"
    want_vectors "/embed $n strings, normalize false" "$ref_raw"
    post /embed "{\"inputs\": $all, \"dimensions\": $dims}"
    want_vectors "/embed dimensions $dims" "$ref" --dims $dims --renormalize
    post /embed "{\"inputs\": $all, \"dimensions\": $dims, \"normalize\": false}"
    want_vectors "/embed dimensions $dims, normalize false" "$ref_raw" --dims $dims
    post /embed "{\"inputs\": $all, \"dimensions\": $hidden}"
    want_vectors "/embed dimensions $hidden (the hidden size): the full rows" "$ref"
    post /embed "{\"inputs\": $(check json-lines "$long"), \"truncate\": true}"
    want_vectors "/embed a text above the model's maximum, truncate true" "$long_ref"
    post /embed "{\"inputs\": $(check json-lines "$long"), \"truncate\": true, \"truncation_direction\": \"Right\"}"
    want_vectors "/embed truncation_direction Right" "$long_ref"

    echo "--- POST /tokenize (TEI)"
    # The texts that embed does not truncate (/tokenize does not truncate).
    tokens "$texts" | paste -d '\t' - "$texts" | awk -F'\t' -v max="$max_tokens" \
        '{ if (split($1, ids, ",") < max) print substr($0, length($1) + 2) }' >"$tmp/untruncated.txt"
    post /tokenize "{\"inputs\": $(check json-lines "$tmp/untruncated.txt")}"
    if want 200 "/tokenize $(wc -l <"$tmp/untruncated.txt") strings"; then
        if cmp -s <(check tokens "$tmp/body") <(tokens "$tmp/untruncated.txt"); then
            ok "/tokenize gives embed --tokenize's ids"
        else
            bad "/tokenize ids differ from embed --tokenize's:"
            diff <(check tokens "$tmp/body") <(tokens "$tmp/untruncated.txt") | head -c 2000
        fi
    fi
    post /tokenize "{\"inputs\": $(check json-lines "$tmp/untruncated.txt"), \"add_special_tokens\": false}"
    if want 200 "/tokenize add_special_tokens false"; then
        if cmp -s <(check tokens "$tmp/body") <(tokens "$tmp/untruncated.txt" | without_specials); then
            ok "/tokenize add_special_tokens false: embed --tokenize's ids without the first and last"
        else
            bad "/tokenize add_special_tokens false differs from embed --tokenize's inner ids:"
            diff <(check tokens "$tmp/body") <(tokens "$tmp/untruncated.txt" | without_specials) |
                head -c 2000
        fi
    fi
}
# without_specials: embed --tokenize's lines ([CLS, ..., SEP]) without their first and last ids.
without_specials() {
    python3 -c 'import json, sys
for line in sys.stdin:
    print("[" + ", ".join(str(i) for i in json.loads(line)[1:-1]) + "]")'
}

# urllib_post ROUTE BYTES [KEY]: POSTs a JSON body of BYTES bytes with Python's urllib, which
# sends the whole body before it reads the answer; prints the status (or how it failed), then
# the answer's body.
urllib_post() {
    python3 - "$url$1" "$2" "${3:-}" <<'EOF'
import json, sys, urllib.error, urllib.request
url, size, key = sys.argv[1], int(sys.argv[2]), sys.argv[3]
field = "inputs" if url.endswith("/embed") else "input"
body = json.dumps({field: "a" * (size - len(field) - 8)}).encode()
headers = {"Content-Type": "application/json"}
if key:
    headers["Authorization"] = "Bearer " + key
try:
    with urllib.request.urlopen(urllib.request.Request(url, body, headers), timeout=60) as r:
        status, answer = r.status, r.read()
except urllib.error.HTTPError as e:
    status, answer = e.code, e.read()
except OSError as e:
    status, answer = "no answer: %r" % e, b""
print(status)
sys.stdout.flush()
sys.stdout.buffer.write(answer)
EOF
}

# tiny_routes: on the tiny model's first server ($served_names: two names), what `routes` does
# not check: TEI's left truncation, the model names.
tiny_routes() {
    local out ids varied=$tmp/varied.txt
    echo "--- /embed truncation_direction left: the text's last ids"
    # A text longer than the maximum whose ids do not repeat, so that which end was kept shows:
    # /embed keeps [CLS], the last max-2 ids and [SEP], the bytes /v1/embeddings gives for
    # those ids. Its ids are those of its two halves (split at a space: WordPiece tokenizes
    # words alone), each shorter than the maximum, as embed --tokenize truncates.
    local first="the of and to in is was for on that with as by at from it an be this are a b c d e f g h i j k l m"
    local second="n o p q r s t u v w x y z 0 1 2 3 4 5 6 7 8 9 cat dog fox zebra"
    printf '%s\n%s\n' "$first" "$second" >"$tmp/halves.txt"
    printf '%s %s\n' "$first" "$second" >"$varied"
    ids=$(tokens "$tmp/halves.txt" | python3 -c 'import json, sys
ids = [i for line in sys.stdin for i in json.loads(line)[1:-1]]
max_tokens = int(sys.argv[1])
assert len(ids) + 2 > max_tokens + 4, "the text is not longer than the maximum"
print(json.dumps(ids[-(max_tokens - 2):]))' "$max_tokens")
    post /v1/embeddings "{\"input\": $ids}"
    want 200 "/v1/embeddings: the last $((max_tokens - 2)) ids of a long text" &&
        cp "$tmp/body" "$tmp/last_ids.json"
    post /embed "{\"inputs\": $(check json-lines "$varied"), \"truncate\": true, \"truncation_direction\": \"left\"}"
    if want 200 "/embed truncate, truncation_direction left"; then
        if out=$(check same "$tmp/body" "$tmp/last_ids.json"); then
            ok "/embed left-truncated is /v1/embeddings of the text's last $((max_tokens - 2)) ids: $out"
        else
            bad "/embed left-truncated against /v1/embeddings of the last ids: $out"
        fi
    fi

    echo "--- model names: two --served-model-name; another is OpenAI's 404 model_not_found"
    post /v1/embeddings "{\"input\": $(jq_string "$(head -n 1 "$texts")"), \"model\": \"alias-two\"}"
    want_vectors "model alias-two (the second --served-model-name)" "$ref" --rows 0
    python3 -c 'import json, sys
assert json.load(open(sys.argv[1]))["model"] == "alias-two"' "$tmp/body" &&
        ok "the answer's model is alias-two" || bad "the answer's model: $(head -c 300 "$tmp/body")"
    post /v1/embeddings '{"input": "a cat", "model": "text-embedding-3-small"}'
    if want 404 "model text-embedding-3-small"; then
        if out=$(check model-not-found "$tmp/body" text-embedding-3-small); then ok "$out"; else bad "$out"; fi
    fi
    post /embed '{"inputs": "a cat", "model": "text-embedding-3-small"}'
    want 200 "/embed with another model name (TEI's routes ignore it)"
    # The name as sent in the message: a NUL escaped (not where the message ends), a long name
    # cut after 128 bytes at a character boundary (not in the middle of a character).
    post /v1/embeddings '{"input": "a cat", "model": "tiny-test\u0000x"}'
    if want 404 "model tiny-test\\u0000x"; then
        if out=$(check model-not-found "$tmp/body" 'tiny-test\u0000x'); then ok "$out"; else bad "$out"; fi
    fi
    post /v1/embeddings "{\"input\": \"a cat\", \"model\": \"a$(printf '\\u00e9%.0s' $(seq 100))\"}"
    if want 404 "model a + 100 times U+00E9 (201 bytes)"; then
        if out=$(check model-not-found "$tmp/body" "$(python3 -c 'print("a" + "\u00e9" * 63 + "...")')"); then
            ok "its first 127 bytes and '...': $out"
        else
            bad "$out"
        fi
    fi
}

# limits_server: a server with an API key and --max-concurrent-requests 2, glibc's stack cache
# off: what counts toward the limit, the answer threads' stacks, a refused request that does not
# hold the stop (tests/serve_limits.py).
limits_server() {
    echo "--- a third server: --api-key, --max-concurrent-requests 2"
    key=limits-key GLIBC_TUNABLES=glibc.pthread.stack_cache_size=0 \
        start_server "$tmp/limits.log" --model "$tmp/tiny" --api-key limits-key \
        --max-concurrent-requests 2 || return
    local pid=$server_pid start elapsed
    # Under AddressSanitizer an address-space limit would starve the sanitizer itself.
    if grep -q __asan_init "$serve"; then
        ok "(the answer threads' stacks are checked without AddressSanitizer)"
    else
        python3 "$here/serve_limits.py" threads "$url" "$pid" limits-key || bad "the answer threads"
    fi
    python3 "$here/serve_limits.py" admission "$url" limits-key || bad "what counts toward the limit"

    echo "--- SIGTERM while a refused request's body is being read: no wait for it"
    rm -f "$tmp/refused.sent"
    mkfifo "$tmp/refused.sent"
    python3 "$here/serve_limits.py" hold-refused "$url" >"$tmp/refused.sent" &
    local holder=$!
    read -r _ <"$tmp/refused.sent" # blocks until the client has sent its 2 bytes
    start=$SECONDS
    stop_server "$pid" TERM "the third server"
    elapsed=$((SECONDS - start))
    wait "$holder"
    [ "$elapsed" -le 8 ] && ok "it exits after $elapsed s (at most 8: the refused request holds nothing)" ||
        bad "the server took $elapsed s to exit: the refused request held it (up to 30 s)"
    grep -q 'POST /v1/embeddings 503 .*(closed by the server.s stop before an answer)' "$tmp/limits.log" &&
        ok "its log: the server's stop closed the refused request" ||
        bad "no log line 'POST /v1/embeddings 503 ... (closed by the server's stop ...)': $(grep 'POST /v1/embeddings' "$tmp/limits.log" | tail -1)"
}

# stop_answers: the answers a stop promises are delivered: many requests queued, SIGTERM with
# --shutdown-timeout 0 (each still waiting gets 503), every one answered. A server fast enough
# to finish everything before the signal gets twice the requests, up to three times.
stop_answers() {
    echo "--- SIGTERM with --shutdown-timeout 0 and requests queued: every one answered 200 or 503"
    local clients=100 round out value state
    for value in -1 soon nan 86401; do
        expect 2 "--shutdown-timeout needs a number of seconds from 0 to 86400, not '$value'" -- \
            "$serve" --model "$tmp/tiny" --shutdown-timeout "$value"
    done
    for round in 1 2 3; do
        start_server "$tmp/stop.log" --model "$tmp/tiny" --request-timeout 60 \
            --shutdown-timeout 0 || return
        out=$(python3 "$here/serve_limits.py" stop "$url" "$server_pid" "$clients" 0.1) ||
            failures=$((failures + 1))
        echo "$out" | grep -v '^503s:'
        for _ in $(seq 350); do # it has had SIGTERM: gone (or a zombie) within 35 s
            state=$(awk '{ print $3 }' "/proc/$server_pid/stat" 2>/dev/null)
            [ -n "$state" ] && [ "$state" != Z ] || break
            sleep 0.1
        done
        if [ -n "$state" ] && [ "$state" != Z ]; then
            bad "the server still runs 35 s after SIGTERM"
            kill -KILL "$server_pid"
        fi
        wait "$server_pid"
        [ $? -eq 0 ] && ok "the server exits 0" || bad "the server's exit status after SIGTERM"
        if grep -q '(client gone)' "$tmp/stop.log"; then
            bad "requests logged as '(client gone)': $(grep -m 1 '(client gone)' "$tmp/stop.log")"
        fi
        [ "$(echo "$out" | sed -n 's/^503s: //p')" != 0 ] && return
        clients=$((clients * 2))
    done
    bad "the server answered every request before SIGTERM, three times: its drain was never reached"
}

# jq_string TEXT: TEXT as a JSON string.
jq_string() { python3 -c 'import json, sys; print(json.dumps(sys.argv[1]))' "$1"; }

# The tiny BERT with a tokenizer.json whose single template adds three special tokens
# ([CLS] [MASK] text [SEP]): --max-input-length must hold them (the template's real count, not
# BERT's two), and 3 passes that check (the next one, --max-batch-tokens, refuses 2).
template_limits() {
    echo "--- --max-input-length below the single template's special tokens: refused at start"
    make_tiny_embedder "$tmp/tri" "$golden"
    python3 - "$tmp/tri" <<'PY'
import json, sys
d = sys.argv[1]
words = open(d + "/vocab.txt", encoding="utf-8").read().split("\n")
vocab = {w: i for i, w in enumerate(words) if w}
special = lambda w: {"SpecialToken": {"id": w, "type_id": 0}}
seq = lambda s, t: {"Sequence": {"id": s, "type_id": t}}
added = [{"id": vocab[w], "content": w, "single_word": False, "lstrip": False, "rstrip": False,
          "normalized": False, "special": True} for w in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")]
json.dump({
    "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
    "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                   "strip_accents": None, "lowercase": True},
    "pre_tokenizer": {"type": "BertPreTokenizer"},
    "post_processor": {
        "type": "TemplateProcessing",
        "single": [special("[CLS]"), special("[MASK]"), seq("A", 0), special("[SEP]")],
        "pair": [special("[CLS]"), special("[MASK]"), seq("A", 0), special("[SEP]"), seq("B", 1),
                 special("[SEP]")],
        "special_tokens": {w: {"id": w, "ids": [vocab[w]], "tokens": [w]}
                           for w in ("[CLS]", "[SEP]", "[MASK]")}},
    "decoder": None,
    "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
              "max_input_chars_per_word": 100, "vocab": vocab},
}, open(d + "/tokenizer.json", "w"))
PY
    printf 'a b\n' >"$tmp/tri.txt"
    expect 0 "[2, 4, 5, 6, 3]" -- "$embed" --model "$tmp/tri" --tokenize --input "$tmp/tri.txt"
    expect 2 "--max-input-length 2 cannot hold a text: this model's template has 3 special tokens" \
        -- timeout 60 "$serve" --model "$tmp/tri" --port 0 --max-input-length 2
    expect 2 "--max-batch-tokens 2 is less than the longest text (3 tokens" \
        -- timeout 60 "$serve" --model "$tmp/tri" --port 0 --max-input-length 3 --max-batch-tokens 2
}

# ---- the tiny model ------------------------------------------------------------------------

tiny_mode() {
    source "$here/tiny_corpus.sh"
    # The tiny BERT twice: normalised as all-MiniLM-L6-v2 is (modules.json's Normalize), and raw.
    make_tiny_embedder "$tmp/tiny" "$golden"
    make_tiny_embedder "$tmp/tiny-norm" "$golden"
    cat >"$tmp/tiny-norm/modules.json" <<'EOF'
[{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
 {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
 {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]
EOF
    # Prompts without a default one: "prompt_name" picks one; texts without it get none.
    printf '{"prompts": {"q": "the ", "p": "of is "}}\n' \
        >"$tmp/tiny-norm/config_sentence_transformers.json"
    model=$tmp/tiny-norm
    texts=$tmp/texts.txt long=$tmp/long.txt
    printf '%s\n' "the cat is on the mat" "a quick brown zebra, 42 of them." "café au lait" \
        "to be or not to be" "x" >"$texts"
    # 100 words: 102 tokens, above the tiny model's 64.
    for _ in $(seq 100); do printf 'the '; done | sed 's/ $//' >"$long"
    echo >>"$long"
    ref=$tmp/ref.npy ref_raw=$tmp/ref_raw.npy long_ref=$tmp/long.npy
    "$embed" --model "$model" --input "$texts" --output "$ref" &&
        "$embed" --model "$model" --input "$texts" --no-normalize --output "$ref_raw" &&
        "$embed" --model "$model" --input "$long" --output "$long_ref" || {
        bad "embed could not make the reference embeddings"
        return
    }
    served_name=tiny-test served_names="tiny-test alias-two" max_tokens=64 hidden=48
    echo "--- a server on the tiny model (payload limit 10000 bytes, at most 8 inputs, two names)"
    # alias-two twice: listed once.
    start_server "$tmp/main.log" --model "$model" --served-model-name "$served_name" \
        --served-model-name alias-two --served-model-name alias-two --payload-limit 10000 \
        --max-client-batch-size 8 || return
    local main_pid=$server_pid main_url=$url
    routes
    tiny_routes

    echo "--- bad requests: each refused with its status and message; the server keeps serving"
    post /v1/embeddings '{"input": "a cat"'
    refused 400 openai "json" "malformed JSON"
    post /embed '{"inputs": ["a cat",]}'
    refused 400 tei "json" "/embed malformed JSON"
    post /v1/embeddings '[1, 2]'
    refused 400 openai "object" "a JSON array, not an object"
    post /v1/embeddings '{"model": "tiny-test"}'
    refused 400 openai "input" "no input"
    post /v1/embeddings '{"input": 42}'
    refused 400 openai "input" "input a number"
    post /v1/embeddings '{"input": ["a cat", 3]}'
    refused 400 openai "input" "input strings mixed with a number"
    post /v1/embeddings '{"input": [[1, 2], "a cat"]}'
    refused 400 openai "input" "input ids mixed with a string"
    post /v1/embeddings '{"input": [1.5, 2]}'
    refused 400 openai "input" "input fractional token ids"
    post /v1/embeddings '{"input": [[7, 99999]]}'
    refused 400 openai "99999" "a token id outside the vocabulary"
    post /v1/embeddings '{"input": [[7, -1]]}'
    refused 400 openai "-1" "a negative token id"
    post /v1/embeddings '{"input": "a cat", "encoding_format": "hex"}'
    refused 400 openai "encoding_format" "encoding_format hex"
    post /v1/embeddings '{"input": "a cat", "dimensions": "8"}'
    refused 400 openai "dimensions" "dimensions a string"
    post /v1/embeddings '{"input": "a cat", "dimensions": 0}'
    refused 400 openai "dimensions" "dimensions 0"
    post /v1/embeddings '{"input": "a cat", "dimensions": 49}'
    refused 400 openai "dimensions" "dimensions above the model's 48"
    post /embed '{"inputs": 42}'
    refused 422 tei "inputs" "/embed inputs a number"
    post /embed '{"inputs": "a cat", "normalize": "yes"}'
    refused 422 tei "normalize" "/embed normalize a string"
    post /embed '{"inputs": "a cat", "truncation_direction": "Middle"}'
    refused 422 tei "truncation_direction" "/embed truncation_direction Middle"
    post /embed '{"inputs": "a cat", "dimensions": 49}'
    refused 422 tei "dimensions" "/embed dimensions above the model's 48"
    post /embed '{"inputs": "a cat", "prompt_name": "query"}'
    refused 422 tei "not one of the model's prompts" "/embed a prompt_name the model does not have"
    post /v1/embeddings '{"input": []}'
    refused 400 openai "input" "an empty input list"
    post /embed '{"inputs": []}'
    refused 400 tei "input" "/embed an empty inputs list"
    post /v1/embeddings $'{"input": "bad \xff byte"}'
    refused 400 openai "utf-8|utf8|unicode|decode byte" "invalid UTF-8 in a string"
    post /embed $'{"inputs": ["fine", "bad \xc3\x28"]}'
    refused 400 tei "utf-8|utf8|unicode|decode byte" "/embed invalid UTF-8 in a string"
    post /v1/embeddings '{"input": "lone \ud800 surrogate"}'
    refused 400 openai "utf-8|utf8|unicode|surrogate" "a lone surrogate escape"
    # 12 000 bytes against --payload-limit 10000 (valid JSON: only the size is wrong).
    post /v1/embeddings "{\"input\": \"$(head -c 11960 /dev/zero | tr '\0' 'a')\"}"
    refused 413 openai "10000|payload|large|limit" "a body above --payload-limit"
    post /embed "{\"inputs\": \"$(head -c 11960 /dev/zero | tr '\0' 'a')\"}"
    refused 413 tei "10000|payload|large|limit" "/embed a body above --payload-limit"
    # The same body sent whole before the answer is read (curl without "Expect", Python's
    # urllib): the server reads and drops it, then answers 413 with its JSON. With "Expect:
    # 100-continue" (curl's default above 1 KiB) the 413 comes at once, without "100 Continue".
    post /v1/embeddings "{\"input\": \"$(head -c 29960 /dev/zero | tr '\0' 'a')\"}" -H 'Expect:'
    refused 413 openai "10000|payload|large|limit" "a body of 30000 bytes without Expect (read, then 413)"
    post /v1/embeddings "{\"input\": \"$(head -c 29960 /dev/zero | tr '\0' 'a')\"}" -H 'Expect: 100-continue'
    refused 413 openai "10000|payload|large|limit" "a body of 30000 bytes with Expect: 100-continue"
    if grep -qi '100 Continue' "$tmp/headers"; then
        bad "Expect: 100-continue on a body over the limit got 100 Continue: $(tr -d '\r' <"$tmp/headers" | head -3)"
    else
        ok "no 100 Continue for a body over the limit"
    fi
    for route in /v1/embeddings /embed; do
        urllib_post "$route" 30000 >"$tmp/urllib.out"
        code=$(head -n 1 "$tmp/urllib.out")
        tail -n +2 "$tmp/urllib.out" >"$tmp/body"
        refused 413 "$([ "$route" = /embed ] && echo tei || echo openai)" "10000" \
            "urllib: $route with a body of 30000 bytes"
    done
    post /v1/embeddings ''
    refused 400 openai "the body is empty" "an empty body"
    post /embed ''
    refused 400 tei "the body is empty" "/embed an empty body"
    post /v1/embeddings '{"input": ["a", "b", "c", "d", "e", "f", "g", "h", "i"]}'
    refused 413 openai "8" "9 inputs against --max-client-batch-size 8"
    post /embed '{"inputs": ["a", "b", "c", "d", "e", "f", "g", "h", "i"]}'
    refused 413 tei "8" "/embed 9 inputs against --max-client-batch-size 8"
    post /v1/embeddings "{\"input\": $(check json-lines "$long")}"
    refused 413 openai "64" "a text of 102 tokens, the model's maximum 64, no truncation"
    post /embed "{\"inputs\": $(check json-lines "$long")}"
    refused 413 tei "64" "/embed a text of 102 tokens, truncate absent"
    post /embed "{\"inputs\": $(check json-lines "$long"), \"truncate\": false}"
    refused 413 tei "64" "/embed a text of 102 tokens, truncate false"
    local many_ids
    many_ids=$(python3 -c 'print([7] * 70)')
    post /v1/embeddings "{\"input\": [$many_ids]}"
    refused 413 openai "64" "70 token ids (72 with [CLS] and [SEP]), the model's maximum 64"
    call GET /no/such/route
    want 404 "GET an unknown route"
    still_serving
    post /v1/nothing '{"input": "a"}'
    want 404 "POST an unknown route"
    still_serving
    call GET /v1/embeddings
    want 405 "GET /v1/embeddings"
    still_serving
    call POST /health
    want 405 "POST /health"
    still_serving
    call PUT /embed -H 'Content-Type: application/json' --data-binary '{"inputs": "a"}'
    want 405 "PUT /embed"
    still_serving
    call DELETE /v1/models
    want 405 "DELETE /v1/models"
    still_serving

    echo "--- a malformed Content-Length: libmicrohttpd answers 400 itself; logged and counted"
    local value status
    for value in -1 +17 0x11; do
        status=$(python3 - "$url" "$value" <<'EOF'
import socket, sys, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
s = socket.create_connection((u.hostname, u.port), timeout=10)
s.sendall(b"POST /embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          b"Content-Length: %s\r\n\r\n{\"inputs\": \"a\"}" % sys.argv[2].encode())
data = b""
try:
    while True:
        more = s.recv(65536)
        if not more:
            break
        data += more
except OSError:
    pass
print(data.split(b"\r\n", 1)[0].decode(errors="replace") or "closed")
EOF
        )
        if [[ "$status" == "HTTP/1.1 400"* ]]; then
            ok "Content-Length: $value -> $status (from libmicrohttpd)"
        else
            bad "Content-Length: $value -> $status (libmicrohttpd's 400 expected)"
        fi
    done
    still_serving
    [ "$(grep -c '? (malformed) 400 .*refused by libmicrohttpd' "$tmp/main.log")" -eq 3 ] &&
        ok "the 3 malformed requests have their log lines" ||
        bad "no log line '? (malformed) 400' per malformed request: $(grep -i malformed "$tmp/main.log" | head -3)"

    echo "--- /metrics (Prometheus text) counts what happened"
    call GET /metrics
    if want 200 "GET /metrics"; then
        grep -qi '^content-type: text/plain' "$tmp/headers" ||
            bad "/metrics: Content-Type $(grep -i '^content-type' "$tmp/headers")"
        python3 - "$tmp/body" <<'EOF' && ok "/metrics: requests by route and status, histograms, batches, tokens" || bad "/metrics"
import re, sys
text = open(sys.argv[1]).read()
lines = [l for l in text.splitlines() if l and not l.startswith("#")]
sample = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? [-+0-9.eEInfa]+$')
bad = [l for l in lines if not sample.match(l)]
assert not bad, "not Prometheus samples: %r" % bad[:3]
def count(*labels):
    return sum(float(l.rsplit(" ", 1)[1]) for l in lines
               if all(x in l for x in labels) and "_bucket" not in l and "_sum" not in l)
assert count('route="/v1/embeddings"', 'status="200"') >= 8, "200s of /v1/embeddings"
assert count('route="/v1/embeddings"', 'status="413"') >= 4, "413s of /v1/embeddings"
assert count('route="/embed"', 'status="200"') >= 7, "200s of /embed"
assert count('route="malformed"', 'status="400"') == 3, "the 3 malformed Content-Lengths"
assert any("_bucket{" in l and 'le="+Inf"' in l for l in lines), "no histogram"
assert any(l.startswith("# TYPE") and l.endswith("histogram") for l in text.splitlines())
assert any("batch" in l for l in lines), "no batch sizes"
assert any("token" in l for l in lines), "no token counts"
EOF
    fi
    # One line per request on stderr: method, route, status.
    grep -q 'POST /v1/embeddings 413' "$tmp/main.log" && grep -q 'GET /no/such/route 404' "$tmp/main.log" &&
        ok "one log line per request (method, route, status)" ||
        bad "no request log lines like 'POST /v1/embeddings 413' on stderr: $(tail -3 "$tmp/main.log")"

    echo "--- prompts: TEI's prompt_name on /embed and /tokenize"
    local all_texts
    all_texts=$(check json-lines "$texts")
    "$embed" --model "$model" --input "$texts" --prompt-name p --output "$tmp/ref_p.npy" || {
        bad "embed --prompt-name p could not make the reference"
        return
    }
    sed 's/^/of is /' "$texts" >"$tmp/texts_p.txt"
    post /embed "{\"inputs\": $all_texts, \"prompt_name\": \"p\"}"
    want_vectors "/embed prompt_name p: embed --prompt-name p's vectors" "$tmp/ref_p.npy"
    post /tokenize "{\"inputs\": $all_texts, \"prompt_name\": \"p\"}"
    if want 200 "/tokenize prompt_name p"; then
        cmp -s <(check tokens "$tmp/body") <(tokens "$tmp/texts_p.txt") &&
            ok "/tokenize prompt_name p: the ids of the prompt and the text" ||
            bad "/tokenize prompt_name p: $(check tokens "$tmp/body" | head -2)"
    fi
    post /embed "{\"inputs\": $all_texts, \"prompt_name\": \"nope\"}"
    refused 422 tei "not one of the model's prompts" "/embed prompt_name nope"
    post /embed "{\"inputs\": \"x\", \"prompt_name\": 3}"
    refused 422 tei "prompt_name" "/embed prompt_name a number"
    post /embed '{"inputs": "x", "prompt_name": "p\u0000x"}'
    refused 422 tei '"p\u0000x" is not one of' "/embed prompt_name p\\u0000x (not p)"
    echo "--- a model with a default prompt: every text input gets it, token ids do not"
    make_tiny_embedder "$tmp/tiny-default" "$golden"
    cp "$tmp/tiny-norm/modules.json" "$tmp/tiny-default/"
    printf '{"prompts": {"q": "the ", "p": "of is "}, "default_prompt_name": "q"}\n' \
        >"$tmp/tiny-default/config_sentence_transformers.json"
    sed 's/^/the /' "$texts" >"$tmp/texts_q.txt"
    "$embed" --model "$model" --input "$texts" --prompt-name q --output "$tmp/ref_q.npy" || {
        bad "embed --prompt-name q could not make the reference"
        return
    }
    start_server "$tmp/default.log" --model "$tmp/tiny-default" || return
    local default_pid=$server_pid
    post /v1/embeddings "{\"input\": $all_texts}"
    want_vectors "/v1/embeddings with the default prompt" "$tmp/ref_q.npy"
    post /embed "{\"inputs\": $all_texts, \"prompt_name\": \"p\"}"
    want_vectors "/embed prompt_name p instead of the default" "$tmp/ref_p.npy"
    post /tokenize "{\"inputs\": $all_texts}"
    if want 200 "/tokenize with the default prompt"; then
        cmp -s <(check tokens "$tmp/body") <(tokens "$tmp/texts_q.txt") &&
            ok "/tokenize: the ids of the default prompt and the text" ||
            bad "/tokenize with the default prompt: $(check tokens "$tmp/body" | head -2)"
    fi
    post /v1/embeddings "{\"input\": $(ids_without_specials "$texts")}"
    want_vectors "/v1/embeddings token ids: no prompt" "$ref"
    stop_server "$default_pid" INT "the default-prompt server"
    url=$main_url

    echo "--- a second server: the raw tiny model, an API key, --auto-truncate, --max-input-length 16,"
    echo "    --max-concurrent-requests 2, --request-timeout 3"
    key=secret-key start_server "$tmp/second.log" --model "$tmp/tiny" --api-key secret-key \
        --auto-truncate --max-input-length 16 --max-concurrent-requests 2 --request-timeout 3 \
        --accept-any-model-name || return
    local second_pid=$server_pid
    model=$tmp/tiny
    "$embed" --model "$model" --input "$texts" --max-length 16 --output "$tmp/raw.npy" &&
        "$embed" --model "$model" --input "$long" --max-length 16 --output "$tmp/long16.npy" || {
        bad "embed could not make the reference embeddings"
        return
    }
    local key=secret-key
    good_ref=$tmp/raw.npy
    all=$(check json-lines "$texts")
    post /v1/embeddings "{\"input\": $all}"
    want_vectors "with the key: the raw model's own output (not normalised), truncated to 16" "$tmp/raw.npy"
    post /v1/embeddings "{\"input\": $all, \"model\": \"text-embedding-3-small\"}"
    want_vectors "--accept-any-model-name: model text-embedding-3-small" "$tmp/raw.npy"
    # 7 MB against the default --payload-limit of 2 MB (under the 8 MB read and dropped): more
    # than the sockets hold, so a server that answered at the headers and closed would break
    # urllib's upload (a broken pipe).
    for route in /v1/embeddings /embed; do
        urllib_post "$route" 7000000 "$key" >"$tmp/urllib.out"
        code=$(head -n 1 "$tmp/urllib.out")
        tail -n +2 "$tmp/urllib.out" >"$tmp/body"
        refused 413 "$([ "$route" = /embed ] && echo tei || echo openai)" "2000000" \
            "urllib: $route with a body of 7 MB"
    done
    post /embed "{\"inputs\": $all}"
    want_vectors "/embed normalize true (the default) on a raw model" "$tmp/raw.npy" --dims 48 --renormalize
    post /v1/embeddings "{\"input\": $(check json-lines "$long")}"
    want_vectors "--auto-truncate --max-input-length 16: a long text truncated as embed --max-length 16" "$tmp/long16.npy"
    post /embed "{\"inputs\": $(check json-lines "$long")}"
    want_vectors "/embed, --auto-truncate, truncate absent" "$tmp/long16.npy" --dims 48 --renormalize
    key=
    post /v1/embeddings '{"input": "a cat"}'
    key=secret-key refused 401 openai "key|auth" "no API key"
    key=wrong-key post /v1/embeddings '{"input": "a cat"}'
    key=secret-key refused 401 openai "key|auth" "a wrong API key"
    key=
    post /embed '{"inputs": "a cat"}' -H "Authorization: secret-key"
    key=secret-key refused 401 tei "key|auth" "/embed a key without 'Bearer'"
    key=secret-key

    echo "--- overload: beyond --max-concurrent-requests 2, 429 (OpenAI's and TEI's routes)"
    local round codes clients i f api path
    python3 - "$tmp" <<'EOF'
import json, sys
texts = [" ".join(["the cat"] * 7)] * 100
open(sys.argv[1] + "/big.json", "w").write(json.dumps({"input": texts}))
open(sys.argv[1] + "/big_tei.json", "w").write(json.dumps({"inputs": texts}))
EOF
    # Odd clients on /embed (TEI), even ones on /v1/embeddings (OpenAI); each answer's status
    # in overload.I.code.API.
    for round in 1 2 3 4 5; do
        clients=()
        rm -f "$tmp"/overload.*
        for i in $(seq 24); do
            if [ $((i % 2)) = 1 ]; then f=big_tei.json api=tei path=/embed
            else f=big.json api=openai path=/v1/embeddings; fi
            curl -s -o "$tmp/overload.$i" -w '%{http_code}\n' --max-time 60 \
                -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
                --data-binary @"$tmp/$f" "$url$path" >"$tmp/overload.$i.code.$api" &
            clients+=($!)
        done
        wait "${clients[@]}"
        codes=$(cat "$tmp"/overload.*.code.* | sort | uniq -c | tr '\n' ' ')
        grep -qx 429 "$tmp"/overload.*.code.tei && grep -qx 429 "$tmp"/overload.*.code.openai &&
            break
    done
    if grep -qvx '200\|429' "$tmp"/overload.*.code.*; then
        bad "24 concurrent requests: statuses other than 200 and 429: $codes"
    else
        for api in openai tei; do
            f=$(grep -lx 429 "$tmp"/overload.*.code.$api | head -n 1)
            if [ -z "$f" ]; then
                bad "24 concurrent requests, 5 times: $api's route never got 429: $codes"
                continue
            fi
            code=429
            cp "${f%.code.*}" "$tmp/body"
            refused 429 $api "overload|busy|many|concurrent|queue" \
                "24 concurrent requests, $api's route ($codes)"
        done
    fi

    echo "--- a slow client times out (--request-timeout 3) without holding the server"
    local slow_start=$SECONDS
    python3 - "$url" >"$tmp/slow.out" 2>&1 <<'EOF' &
import socket, sys, time, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
s = socket.create_connection((u.hostname, u.port))
s.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer secret-key\r\n"
          b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"input\": ")
start = time.time()
s.settimeout(30)
try:
    data = s.recv(4096)
    while data and b"\r\n\r\n" not in data:
        more = s.recv(4096)
        if not more:
            break
        data += more
except (socket.timeout, ConnectionResetError) as e:
    data = repr(e).encode()
status = data.split(b"\r\n", 1)[0].decode(errors="replace")
print("%.1f s: %s" % (time.time() - start, status or "closed"))
EOF
    local slow=$!
    sleep 0.5
    still_serving
    ok "a good request while a slow client holds a connection"
    wait "$slow"
    local elapsed
    elapsed=$(cut -d' ' -f1 "$tmp/slow.out")
    if python3 -c 'import sys; sys.exit(not 2.5 <= float(sys.argv[1]) <= 10)' "$elapsed" 2>/dev/null &&
        ! grep -q ' 2[0-9][0-9]' "$tmp/slow.out"; then
        ok "the slow client is cut off after $(cat "$tmp/slow.out")"
    else
        bad "the slow client (3 s request timeout): $(cat "$tmp/slow.out")"
    fi

    echo "--- a client that drips its headers a byte at a time is cut off by the same deadline"
    python3 - "$url" >"$tmp/drip.out" 2>&1 <<'EOF'
import socket, sys, time, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
s = socket.create_connection((u.hostname, u.port))
start = time.time()
s.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\n")
outcome = "still open after 20 s"
s.settimeout(0.5)
while time.time() - start < 20:
    try:
        s.sendall(b"X")  # one byte of a header that never ends, every half second
        data = s.recv(4096)
        if not data:
            outcome = "closed"
            break
        outcome = "answered: " + data.split(b"\r\n", 1)[0].decode(errors="replace")
        break
    except socket.timeout:
        continue
    except (ConnectionResetError, BrokenPipeError) as e:
        outcome = "closed (%s)" % type(e).__name__
        break
print("%.1f s: %s" % (time.time() - start, outcome))
EOF
    elapsed=$(cut -d' ' -f1 "$tmp/drip.out")
    if python3 -c 'import sys; sys.exit(not 2.5 <= float(sys.argv[1]) <= 8)' "$elapsed" 2>/dev/null &&
        grep -q 'closed' "$tmp/drip.out" && grep -q 'no complete request headers' "$tmp/second.log"; then
        ok "the header-dripping client is closed after $(cat "$tmp/drip.out")"
    else
        bad "the header-dripping client (3 s request timeout): $(cat "$tmp/drip.out")"
    fi
    still_serving
    ok "still serving after the header-dripping client"

    echo "--- clients that vanish mid-request cost only themselves"
    for _ in 1 2 3 4; do
        python3 - "$url" "$tmp/big.json" <<'EOF'
import socket, sys, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
body = open(sys.argv[2], "rb").read()
s = socket.create_connection((u.hostname, u.port))
s.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer secret-key\r\n"
          b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
s.close()
EOF
    done
    # ... and one that leaves after half its body.
    python3 - "$url" <<'EOF'
import socket, sys, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
s = socket.create_connection((u.hostname, u.port))
s.sendall(b"POST /embed HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"inputs\": \"a")
s.close()
EOF
    still_serving
    ok "served after 5 clients left mid-request"
    stop_server "$second_pid" INT "the second server"

    limits_server
    stop_answers
    template_limits

    echo "--- SIGTERM while a request is being uploaded: served in full, then exit 0"
    url=$main_url key=
    model=$tmp/tiny-norm good_ref=$ref
    # The request's headers and a part of its body, then SIGTERM, then the rest: the draining
    # server serves it whole (200, every vector), as it does every request admitted before the
    # signal.
    mkfifo "$tmp/sent"
    python3 - "$url" "$(check json-lines "$texts")" >"$tmp/inflight.out" 2>&1 3>"$tmp/sent" <<'EOF' &
import os, socket, sys, time, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
body = ('{"input": %s, "encoding_format": "float"}' % sys.argv[2]).encode()
s = socket.create_connection((u.hostname, u.port))
s.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body[:10])
time.sleep(0.5)
os.write(3, b"sent\n")
os.close(3)
time.sleep(0.5)
s.sendall(body[10:])
s.settimeout(30)
data = b""
while True:
    more = s.recv(65536)
    if not more:
        break
    data += more
head, _, payload = data.partition(b"\r\n\r\n")
sys.stdout.write(head.split(b"\r\n")[0].decode() + "\n")
sys.stdout.flush()
sys.stdout.buffer.write(payload)
EOF
    local inflight=$!
    read -r _ <"$tmp/sent"
    stop_server "$main_pid" TERM "the tiny-model server"
    wait "$inflight"
    tail -n +2 "$tmp/inflight.out" >"$tmp/body"
    if head -n 1 "$tmp/inflight.out" | grep -q '^HTTP/1.1 200'; then
        if out=$(check vectors "$tmp/body" "$ref"); then
            ok "the request uploaded during SIGTERM answered in full: $out"
        else
            bad "the request uploaded during SIGTERM: $out"
        fi
    else
        bad "the request uploaded during SIGTERM: $(head -c 300 "$tmp/inflight.out")"
    fi
    curl -s -o /dev/null --max-time 5 "$url/health"
    [ $? -eq 7 ] && ok "nothing listens after the exit" || bad "something still answers on $url"
}

# ---- the real model ----------------------------------------------------------------------------

real_mode() {
    model=${CLATTN_TEST_MODEL_DIR:-${CLATTN_MODEL_CACHE:-$HOME/.cache/clattn}/all-MiniLM-L6-v2}
    if [ ! -s "$model/tokenizer.json" ]; then
        echo "real model not found at $model: run tools/fetch-model.sh"
        if [ "${CLATTN_REQUIRE_REAL_MODEL:-}" = 1 ]; then
            bad "CLATTN_REQUIRE_REAL_MODEL=1: the real model is required"
            return
        fi
        exit 77
    fi
    [ "$(bash "$here/../tools/fetch-model.sh" 2>/dev/null)" = "$model" ] &&
        ok "tools/fetch-model.sh finds $model" || [ -n "${CLATTN_TEST_MODEL_DIR:-}" ] ||
        bad "tools/fetch-model.sh does not print $model"
    # The golden lines (empty ones, accents, CJK, emoji, long ones) and a text above 256 tokens.
    texts=$golden/minilm/lines.txt long=$tmp/long.txt
    for _ in $(seq 300); do printf 'word '; done | sed 's/ $//' >"$long"
    echo >>"$long"
    ref=$tmp/ref.npy ref_raw=$tmp/ref_raw.npy long_ref=$tmp/long.npy
    "$embed" --model "$model" --input "$texts" --output "$ref" &&
        "$embed" --model "$model" --input "$texts" --no-normalize --output "$ref_raw" &&
        "$embed" --model "$model" --input "$long" --output "$long_ref" || {
        bad "embed could not make the reference embeddings"
        return
    }
    served_name=all-MiniLM-L6-v2 served_names=all-MiniLM-L6-v2 max_tokens=256 hidden=384
    # --auto-truncate: a few golden lines are longer than 256 tokens, which embed truncates.
    echo "--- a server on all-MiniLM-L6-v2, --auto-truncate"
    start_server "$tmp/real.log" --model "$model" --served-model-name "$served_name" \
        --auto-truncate || return
    local pid=$server_pid
    routes
    post /embed "{\"inputs\": $(check json-lines "$long"), \"truncate\": false}"
    refused 413 tei "256" "/embed a text of 302 tokens, truncate false"

    echo "--- SIGTERM while a request runs: it is answered in full, then exit 0"
    # The golden lines twice (96 texts, some long: most of a second on a CPU), sent whole; the
    # signal comes 0.2 s later, while the server runs them.
    cat "$texts" "$texts" >"$tmp/twice.txt"
    printf '{"input": %s}' "$(check json-lines "$tmp/twice.txt")" >"$tmp/running.json"
    "$embed" --model "$model" --input "$tmp/twice.txt" --output "$tmp/twice.npy"
    curl -s -o "$tmp/running.body" -w '%{http_code}' --max-time 60 -H 'Content-Type: application/json' \
        --data-binary @"$tmp/running.json" "$url/v1/embeddings" >"$tmp/running.code" &
    local running=$!
    sleep 0.2
    stop_server "$pid" TERM "the real-model server"
    wait "$running"
    local curl_rc=$?
    cp "$tmp/running.body" "$tmp/body"
    if [ "$curl_rc" -eq 0 ] && [ "$(cat "$tmp/running.code")" = 200 ] &&
        out=$(check vectors "$tmp/body" "$tmp/twice.npy"); then
        ok "the request running at SIGTERM: 200, $out"
    else
        bad "the request running at SIGTERM: curl exit $curl_rc, status $(cat "$tmp/running.code"): $(head -c 300 "$tmp/body")"
    fi
}

case $mode in
tiny) tiny_mode ;;
real) real_mode ;;
*) echo "usage: test_serve.sh SERVE EMBED GOLDEN_DIR tiny|real" >&2; exit 2 ;;
esac
echo "--- $failures failure(s)"
[ "$failures" -eq 0 ]
