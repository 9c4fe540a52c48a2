#!/bin/bash
# End-to-end tests of examples/embed: usage errors (exit 2), runtime errors (exit 1) naming the
# cause, and, on the real all-MiniLM-L6-v2 (tools/fetch-model.sh), token ids equal to Hugging
# Face's fast tokenizer and embeddings equal to sentence-transformers' (tests/golden/minilm,
# written by tools/gen_minilm_golden.py). Without the model those checks skip (exit 77), unless
# CLATTN_REQUIRE_REAL_MODEL=1, which fails them.
# usage: test_embed.sh EMBED NPY_COMPARE GOLDEN_DIR
set -u
embed=$1 compare=$2 golden=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/clattn-embed.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/expect.sh"


tiny=$golden/bert/gelu
echo "--- usage errors (exit 2)"
expect 0 "usage: embed" -- "$embed" --help
expect 2 "--model DIR is required" -- "$embed" hello
expect 2 "no texts" -- "$embed" --model "$tiny"
expect 2 "either with --input or as arguments" -- "$embed" --model "$tiny" --input - hello
expect 2 "--max-length needs an integer of at least 2" -- "$embed" --model "$tiny" --max-length 1 x
expect 2 "--max-length needs an integer" -- "$embed" --model "$tiny" --max-length " 5" x
expect 2 "--batch-size needs a positive integer" -- "$embed" --model "$tiny" --batch-size 0 x
expect 2 "--pooling must be mean or cls" -- "$embed" --model "$tiny" --pooling max x
expect 2 "unknown option '--nope'" -- "$embed" --nope
expect 2 "--tokenize only prints token ids" -- "$embed" --model "$tiny" --tokenize --json x

echo "--- runtime errors (exit 1)"
expect 1 "/no/such/dir/config.json: cannot open" -- "$embed" --model /no/such/dir x
expect 1 "model_type \"gpt2\" is not supported" -- "$embed" --model "$golden/bert/bad_model_type" x
expect 1 "--input: $tmp/missing.txt: cannot open" -- "$embed" --model "$tiny" --input "$tmp/missing.txt"
: >"$tmp/empty.txt"
expect 1 "holds no text" -- "$embed" --model "$tiny" --input "$tmp/empty.txt"

echo "--- a corpus job in one process (--input FILE --output OUT.npy): shards, failure, resume"
source "$(dirname "$0")/tiny_corpus.sh"
make_tiny_embedder "$tmp/tiny" "$golden"
make_corpus "$tmp/corpus.txt" 160
job() { "$embed" --model "$tmp/tiny" --input "$tmp/corpus.txt" "$@"; }
expect 2 "--resume, --shard-size and --progress are for a corpus job" -- \
    "$embed" --model "$tmp/tiny" --input - --output "$tmp/x.npy" --resume
expect 2 "--shard-size needs a positive number of bytes" -- job --output "$tmp/x.npy" --shard-size 0
expect 2 "is the same file as --input" -- job --output "$tmp/corpus.txt"
expect 1 "is not a regular file" -- "$embed" --model "$tmp/tiny" --input /dev/null --output "$tmp/x.npy"
expect 1 "holds no text" -- "$embed" --model "$tmp/tiny" --input "$tmp/empty.txt" --output "$tmp/x.npy"
mkfifo "$tmp/fifo"
expect 1 "is not a regular file" -- timeout 60 "$embed" --model "$tmp/tiny" --input "$tmp/fifo" --output "$tmp/x.npy"
expect 2 "is a directory" -- job --output "$tmp"
# One shard (the default 1 MiB holds the whole corpus): the very bytes of the in-memory path.
"$embed" --model "$tmp/tiny" --input - --output "$tmp/memory.npy" <"$tmp/corpus.txt"
expect 0 "" -- job --output "$tmp/one_shard.npy"
expect 0 "" -- cmp "$tmp/memory.npy" "$tmp/one_shard.npy"
# Shards of 256 bytes (37 of them), each batched on its own: the same vectors to float rounding.
expect 0 '"shards": 37, "resumed_shards": 0, "texts": 160' -- job --output "$tmp/ref.npy" --shard-size 256 --json
expect 0 "" -- "$compare" "$tmp/ref.npy" "$tmp/memory.npy" 1e-5
if [ -e "$tmp/ref.npy.partial" ] || [ -e "$tmp/ref.npy.progress" ]; then
    echo "FAIL: a finished job left its .partial or .progress"
    failures=$((failures + 1))
fi
# A failing shard: nothing under the output's name (an older file there stays as it was).
echo old >"$tmp/out.npy"
CLATTN_EMBED_FAIL_SHARD=5 expect 1 "failing as CLATTN_EMBED_FAIL_SHARD asks" -- \
    job --output "$tmp/out.npy" --shard-size 256
expect 0 "" -- grep -qx old "$tmp/out.npy"
expect 0 "" -- test -s "$tmp/out.npy.partial" -a -s "$tmp/out.npy.progress"
expect 1 "add --resume to finish it" -- job --output "$tmp/out.npy" --shard-size 256
expect 1 "records another job" -- job --output "$tmp/out.npy" --shard-size 256 --batch-size 5 --resume
# --resume embeds the shards after the failed one only: the same bytes as the job run whole.
expect 0 '"shards": 37, "resumed_shards": 5,' -- job --output "$tmp/out.npy" --shard-size 256 --resume --json
expect 0 "" -- cmp "$tmp/out.npy" "$tmp/ref.npy"
expect 0 "" -- test ! -e "$tmp/out.npy.partial" -a ! -e "$tmp/out.npy.progress"
# Killed part-way (SIGKILL: no clean-up at all), then resumed.
CLATTN_EMBED_KILL_SHARD=20 expect 137 "" -- job --output "$tmp/killed.npy" --shard-size 256
expect 0 "" -- test ! -e "$tmp/killed.npy"
expect 0 '"resumed_shards": 20,' -- job --output "$tmp/killed.npy" --shard-size 256 --resume --json
expect 0 "" -- cmp "$tmp/killed.npy" "$tmp/ref.npy"
# --resume with nothing to resume starts afresh.
expect 0 '"resumed_shards": 0,' -- job --output "$tmp/fresh.npy" --shard-size 256 --resume --json
expect 0 "" -- cmp "$tmp/fresh.npy" "$tmp/ref.npy"

model_dir=${CLATTN_TEST_MODEL_DIR:-${CLATTN_MODEL_CACHE:-$HOME/.cache/clattn}/all-MiniLM-L6-v2}
if [ ! -s "$model_dir/tokenizer.json" ]; then
    echo "real model not found at $model_dir: run tools/fetch-model.sh"
    if [ "${CLATTN_REQUIRE_REAL_MODEL:-}" = 1 ]; then
        echo "FAIL: CLATTN_REQUIRE_REAL_MODEL=1: the real model is required"
        exit 1
    fi
    [ "$failures" -eq 0 ] || exit 1
    exit 77
fi

echo "--- the real model"
if "$embed" --model "$model_dir" --tokenize --input "$golden/minilm/lines.txt" >"$tmp/ids.txt" &&
    cmp -s "$tmp/ids.txt" "$golden/minilm/lines_ids.txt"; then
    echo "ok:   --tokenize gives Hugging Face's ids for every line"
else
    echo "FAIL: --tokenize differs from the fast tokenizer's ids"
    diff "$tmp/ids.txt" "$golden/minilm/lines_ids.txt" | head -10
    failures=$((failures + 1))
fi
# Read from stdin, batches of 5: the same rows as sentence-transformers, in input order.
if "$embed" --model "$model_dir" --input - --batch-size 5 --output "$tmp/emb.npy" --json \
    <"$golden/minilm/lines.txt" >"$tmp/stats.json" &&
    "$compare" "$tmp/emb.npy" "$golden/minilm/lines_embeddings.npy" 1e-5 &&
    grep -q '"texts_per_s": [0-9]' "$tmp/stats.json" && grep -q '"count": 48' "$tmp/stats.json"; then
    echo "ok:   --output equals sentence-transformers to 1e-5; --json reports throughput"
else
    echo "FAIL: embeddings or --json statistics"
    cat "$tmp/stats.json"
    failures=$((failures + 1))
fi
# The corpus job on the same lines in two shards: sentence-transformers' rows, in order.
expect 0 '"count": 48' -- "$embed" --model "$model_dir" --input "$golden/minilm/lines.txt" \
    --output "$tmp/job.npy" --shard-size 3000 --json
expect 0 "max abs difference" -- "$compare" "$tmp/job.npy" "$golden/minilm/lines_embeddings.npy" 1e-5
# Texts as arguments, JSON arrays on stdout: one line per text with 384 numbers.
out=$("$embed" --model "$model_dir" "A man is eating food." "")
lines=$(wc -l <<<"$out")
numbers=$(head -n 1 <<<"$out" | tr ',' '\n' | wc -l)
if [ "$lines" -eq 2 ] && [ "$numbers" -eq 384 ]; then
    echo "ok:   arguments give one JSON array of 384 numbers per text"
else
    echo "FAIL: expected 2 lines of 384 numbers, got $lines lines, $numbers numbers"
    failures=$((failures + 1))
fi
# --no-normalize changes the vectors' length; --pooling cls changes them too.
norm() { python3 -c 'import sys,json,math; v=json.loads(sys.stdin.readline()); print(round(math.sqrt(sum(x*x for x in v)),4))'; }
n1=$("$embed" --model "$model_dir" "hello world" | norm)
n2=$("$embed" --model "$model_dir" --no-normalize "hello world" | norm)
if [ "$n1" = "1.0" ] && [ "$n2" != "1.0" ]; then
    echo "ok:   normalised length 1 ($n1), --no-normalize $n2"
else
    echo "FAIL: lengths $n1 and $n2"
    failures=$((failures + 1))
fi
expect 1 "texts[1]: clattn_tokenizer_encode: invalid argument: the text is not valid UTF-8 at byte 4" -- "$embed" --model "$model_dir" fine $'bad \xff'

echo "--- $failures failure(s)"
[ "$failures" -eq 0 ]
