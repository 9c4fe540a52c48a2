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
expect 2 "--tokenize only prints token ids" -- "$embed" --model "$tiny" --tokenize --prompt "a " x
expect 2 "give --prompt or --prompt-name, not both" -- "$embed" --model "$tiny" --prompt a \
    --prompt-name b x

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
# start_stopped LOG VAR=VALUE... -- ARGS...: `job ARGS` in the background with the test hooks
# VAR=VALUE (embed_job.c), once one of them stopped it (SIGSTOP); its pid in $pid.
start_stopped() {
    local log=$1 vars=()
    shift
    while [ "$1" != -- ]; do vars+=("$1") && shift; done
    shift
    env "${vars[@]}" "$embed" --model "$tmp/tiny" --input "$tmp/corpus.txt" "$@" >"$log" 2>&1 &
    pid=$!
    for _ in $(seq 600); do
        [ "$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)" = T ] && return
        sleep 0.1
    done
    echo "FAIL: ${vars[*]}: the job never stopped"
    failures=$((failures + 1))
}
# continue_stopped: lets $pid go on, waits for it (60 s at most: a job that hangs, on a FIFO say,
# is killed and fails the test), its exit status in $rc.
continue_stopped() {
    local state
    kill -CONT "$pid"
    for _ in $(seq 600); do
        state=$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)
        [ -z "$state" ] || [ "$state" = Z ] && break
        sleep 0.1
    done
    if [ -n "$state" ] && [ "$state" != Z ]; then
        echo "FAIL: the job still runs 60 s after it was continued (waiting on a FIFO?)"
        failures=$((failures + 1))
        kill -KILL "$pid"
    fi
    wait "$pid"
    rc=$?
}
expect 2 "--resume, --shard-size and --progress are for a corpus job" -- \
    "$embed" --model "$tmp/tiny" --input - --output "$tmp/x.npy" --resume
expect 2 "--shard-size needs a positive number of bytes" -- job --output "$tmp/x.npy" --shard-size 0
expect 2 "is the same file as --input" -- job --output "$tmp/corpus.txt"
expect 1 "is not a regular file" -- "$embed" --model "$tmp/tiny" --input /dev/null --output "$tmp/x.npy"
expect 1 "holds no text" -- "$embed" --model "$tmp/tiny" --input "$tmp/empty.txt" --output "$tmp/x.npy"
mkfifo "$tmp/fifo"
expect 1 "is not a regular file" -- timeout 60 "$embed" --model "$tmp/tiny" --input "$tmp/fifo" --output "$tmp/x.npy"
expect 2 "it names a directory, not a regular file" -- job --output "$tmp"
# A new output in a folder that does not exist: refused up front, not after the work.
for run in job memory; do
    args=(--input "$tmp/corpus.txt")
    [ $run = memory ] && args=(hello)
    expect 2 "--output $tmp/none/x.npy: its folder $tmp/none does not exist" -- \
        "$embed" --model "$tmp/tiny" "${args[@]}" --output "$tmp/none/x.npy"
done
# One shard (the default 1 MiB holds the whole corpus): the very bytes of the in-memory path.
"$embed" --model "$tmp/tiny" --input - --output "$tmp/memory.npy" <"$tmp/corpus.txt"
expect 0 "" -- job --output "$tmp/one_shard.npy"
expect 0 "" -- cmp "$tmp/memory.npy" "$tmp/one_shard.npy"
# Shards of 256 bytes (37 of them), each batched on its own, and the in-memory path in batches of
# 1, 7 and 64: batch invariance (clattn/context.h) gives every text the same bytes.
expect 0 '"shards": 37, "resumed_shards": 0, "texts": 160' -- job --output "$tmp/ref.npy" --shard-size 256 --json
expect 0 "" -- cmp "$tmp/ref.npy" "$tmp/memory.npy"
for batch in 1 7 64; do
    "$embed" --model "$tmp/tiny" --input - --batch-size "$batch" --output "$tmp/batch$batch.npy" \
        <"$tmp/corpus.txt"
    expect 0 "" -- cmp "$tmp/batch$batch.npy" "$tmp/memory.npy"
done
# The corpus shuffled: each text's row the same bytes as in the corpus's order.
awk 'BEGIN { srand(11) } { sub(/\r$/, ""); print rand() "\t" NR "\t" $0 }' "$tmp/corpus.txt" | sort -k1,1 |
    cut -f2 >"$tmp/order.txt"
awk -F'\t' 'NR == FNR { line[FNR] = $0; next } { print line[$1] }' \
    <(sed 's/\r$//' "$tmp/corpus.txt"; echo) "$tmp/order.txt" >"$tmp/shuffled.txt"
"$embed" --model "$tmp/tiny" --input - --output "$tmp/shuffled.npy" <"$tmp/shuffled.txt"
expect 0 "" -- "$compare" --rows "$tmp/order.txt" "$tmp/shuffled.npy" "$tmp/memory.npy" 0
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
expect 1 "records another job" -- job --output "$tmp/out.npy" --shard-size 256 --pooling cls --resume
# --resume embeds the shards after the failed one only: the same bytes as the job run whole (in
# batches of another size: batch invariance, so --batch-size is not part of the job's identity).
expect 0 '"shards": 37, "resumed_shards": 5,' -- job --output "$tmp/out.npy" --shard-size 256 --resume --json --batch-size 5
expect 0 "" -- cmp "$tmp/out.npy" "$tmp/ref.npy"
expect 0 "" -- test ! -e "$tmp/out.npy.partial" -a ! -e "$tmp/out.npy.progress"
# Killed part-way (SIGKILL: no clean-up at all), then resumed.
CLATTN_EMBED_KILL_SHARD=20 expect 137 "" -- job --output "$tmp/killed.npy" --shard-size 256
expect 0 "" -- test ! -e "$tmp/killed.npy"
expect 0 '"resumed_shards": 20,' -- job --output "$tmp/killed.npy" --shard-size 256 --resume --json
expect 0 "" -- cmp "$tmp/killed.npy" "$tmp/ref.npy"
# The .npy header in OUT.partial damaged (as a kill between sizing the file and writing the header
# leaves it): --resume writes it again.
CLATTN_EMBED_FAIL_SHARD=20 expect 1 "" -- job --output "$tmp/header.npy" --shard-size 256
printf 'XXXXXXXXXXXXXXXX' | dd of="$tmp/header.npy.partial" conv=notrunc status=none
expect 0 "its .npy header is not the job's" -- job --output "$tmp/header.npy" --shard-size 256 --resume
expect 0 "" -- cmp "$tmp/header.npy" "$tmp/ref.npy"
# Killed between the final rename and the removal of OUT.progress: --resume sees that OUT is the
# finished job's file (every shard recorded, its rows as recorded) and only removes the progress
# file; with a row of OUT changed, it says so and leaves both as they are.
for damage in none row; do
    CLATTN_EMBED_KILL_AT=rename expect 137 "" -- job --output "$tmp/renamed.npy" --shard-size 256
    expect 0 "" -- test -s "$tmp/renamed.npy" -a -s "$tmp/renamed.npy.progress" -a ! -e "$tmp/renamed.npy.partial"
    if [ $damage = none ]; then
        expect 0 "note: --resume: the job was finished: $tmp/renamed.npy holds every shard's rows as recorded" -- \
            job --output "$tmp/renamed.npy" --shard-size 256 --resume
        expect 0 "" -- test ! -e "$tmp/renamed.npy.progress"
        expect 0 "" -- cmp "$tmp/renamed.npy" "$tmp/ref.npy"
    else
        dd if=/dev/zero of="$tmp/renamed.npy" bs=1 seek=20000 count=4 conv=notrunc status=none
        cp "$tmp/renamed.npy" "$tmp/renamed.kept"
        expect 1 "is missing, and $tmp/renamed.npy is not the job's finished file (its rows of lines" -- \
            job --output "$tmp/renamed.npy" --shard-size 256 --resume
        expect 0 "" -- cmp "$tmp/renamed.npy" "$tmp/renamed.kept"
        expect 0 "" -- test -s "$tmp/renamed.npy.progress"
    fi
done
# --resume with nothing to resume starts afresh, saying so.
expect 0 "note: --resume: there is nothing to resume (no $tmp/fresh.npy.progress): the job starts from the beginning" -- \
    job --output "$tmp/fresh.npy" --shard-size 256 --resume
rm "$tmp/fresh.npy"
expect 0 '"resumed_shards": 0,' -- job --output "$tmp/fresh.npy" --shard-size 256 --resume --json
expect 0 "" -- cmp "$tmp/fresh.npy" "$tmp/ref.npy"

echo "--- outputs: only a regular file or a new one is written; anything else is refused up front"
# A FIFO, a directory, a character device (mknod: root only) and a link to a FIFO as --output,
# for the in-memory path, a corpus job and its --resume: exit 2 before any work, the node as it
# was, no OUT.partial or OUT.progress made (a job once replaced a FIFO and, run as root,
# /dev/full with a regular file). Every run under a timeout: nothing may wait on a FIFO.
mkdir "$tmp/special"
mkfifo "$tmp/special/fifo.npy"
mkdir "$tmp/special/dir.npy"
ln -s fifo.npy "$tmp/special/link.npy"
kinds=("fifo.npy:a FIFO, not a regular file" "dir.npy:a directory, not a regular file"
    "link.npy:a symbolic link to a FIFO, not to a regular file")
if mknod "$tmp/special/char.npy" c 1 7 2>/dev/null; then # /dev/full's numbers, in $tmp only
    kinds+=("char.npy:a character device, not a regular file")
else
    echo "note: mknod not permitted: the character-device case is not run"
fi
special_kept() { # NODE TYPE: NODE is still of TYPE (stat %F) and has no job files beside it
    if [ "$(stat -c %F "$1")" = "$2" ] && [ ! -e "$1.partial" ] && [ ! -e "$1.progress" ]; then
        echo "ok:   $1 is still a $2, no job files beside it"
    else
        echo "FAIL: $1 is now a $(stat -c %F "$1"), or the job made its files: $(ls -A "$tmp/special")"
        failures=$((failures + 1))
    fi
}
for kind in "${kinds[@]}"; do
    node=$tmp/special/${kind%%:*} problem=${kind#*:}
    type=$(stat -c %F "$node")
    for run in memory job resume; do
        case $run in
        memory) args=(--model "$tmp/tiny" hello) ;;
        job) args=(--model "$tmp/tiny" --input "$tmp/corpus.txt" --shard-size 256) ;;
        resume) args=(--model "$tmp/tiny" --input "$tmp/corpus.txt" --shard-size 256 --resume) ;;
        esac
        expect 2 "--output $node: it names $problem; only a regular file or a new one is written (left unchanged)" -- \
            timeout 60 "$embed" "${args[@]}" --output "$node"
        special_kept "$node" "$type"
    done
done
# An empty path: a usage error up front, nothing made in the current folder.
for args in "hello" "--input $tmp/corpus.txt" "--input $tmp/corpus.txt --resume"; do
    # shellcheck disable=SC2086
    expect 2 "--output needs a file's path, not an empty string" -- \
        bash -c 'cd "$1" && shift && "$@"' _ "$tmp/special" "$(realpath "$embed")" --model "$tmp/tiny" $args --output ""
done
expect 0 "" -- test ! -e "$tmp/special/.partial" -a ! -e "$tmp/special/.progress"
# The job's own files: a FIFO as OUT.partial or OUT.progress is neither removed, written, nor
# waited on.
mkfifo "$tmp/special/p.npy.partial" "$tmp/special/q.npy.progress"
expect 2 "the job's file $tmp/special/p.npy.partial: it names a FIFO" -- \
    timeout 60 "$embed" --model "$tmp/tiny" --input "$tmp/corpus.txt" --output "$tmp/special/p.npy"
expect 2 "the job's file $tmp/special/q.npy.progress: it names a FIFO" -- \
    timeout 60 "$embed" --model "$tmp/tiny" --input "$tmp/corpus.txt" --output "$tmp/special/q.npy" \
    --resume
expect 0 "" -- test -p "$tmp/special/p.npy.partial" -a -p "$tmp/special/q.npy.progress" \
    -a ! -e "$tmp/special/p.npy.progress" -a ! -e "$tmp/special/q.npy.partial" \
    -a ! -e "$tmp/special/p.npy" -a ! -e "$tmp/special/q.npy"
# A link to a regular file is followed, as the in-memory path's writer does: the job runs beside
# the file it names (so that its final rename stays on one file system), the link stays.
mkdir "$tmp/special/sub"
echo old >"$tmp/special/sub/target.npy"
ln -s sub/target.npy "$tmp/special/to-file.npy"
CLATTN_EMBED_FAIL_SHARD=5 expect 1 "" -- job --output "$tmp/special/to-file.npy" --shard-size 256
expect 0 "" -- test -s "$tmp/special/sub/target.npy.progress" -a ! -e "$tmp/special/to-file.npy.progress"
expect 0 '"resumed_shards": 5,' -- job --output "$tmp/special/to-file.npy" --shard-size 256 --resume --json
expect 0 "" -- cmp "$tmp/special/sub/target.npy" "$tmp/ref.npy"
expect 0 "" -- test -L "$tmp/special/to-file.npy" -a ! -e "$tmp/special/sub/target.npy.partial"
# A FIFO that takes --output's name while the job runs: the final rename leaves it as it is and
# keeps the finished job's .npy in OUT.partial.
CLATTN_EMBED_STOP_SHARD=36 "$embed" --model "$tmp/tiny" --input "$tmp/corpus.txt" \
    --output "$tmp/special/late.npy" --shard-size 256 >"$tmp/late.log" 2>&1 &
pid=$!
for _ in $(seq 600); do
    [ "$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)" = T ] && break
    sleep 0.1
done
mkfifo "$tmp/special/late.npy"
kill -CONT "$pid"
wait "$pid"
expect 0 "" -- test $? -eq 1
expect 0 "--output $tmp/special/late.npy: it names a FIFO, not a regular file now (left unchanged)" -- \
    cat "$tmp/late.log"
expect 0 "" -- test -p "$tmp/special/late.npy"
expect 0 "" -- cmp "$tmp/special/late.npy.partial" "$tmp/ref.npy"
# A FIFO that takes OUT.partial's name after embed looked, before the job makes its files, or
# after it made its progress file and before it opens OUT.partial: refused, left as it is (the
# job once removed it), nothing of the job's left; never waited on.
for step in files open; do
    start_stopped "$tmp/race.log" CLATTN_EMBED_STOP_AT=$step -- --output "$tmp/special/$step.npy" --shard-size 256
    mkfifo "$tmp/special/$step.npy.partial"
    continue_stopped
    expect 0 "$tmp/special/$step.npy.partial: it names a FIFO, not a regular file" -- \
        bash -c 'cat "$1"; exit "$2"' _ "$tmp/race.log" "$((rc == 1 ? 0 : 1))"
    expect 0 "" -- test -p "$tmp/special/$step.npy.partial" -a ! -e "$tmp/special/$step.npy.progress" \
        -a ! -e "$tmp/special/$step.npy"
done
# OUT.partial replaced (by a FIFO) while the job runs: the finished job renames only the file it
# wrote; the FIFO stays where it is (it once became OUT), and so does the progress file.
start_stopped "$tmp/race.log" CLATTN_EMBED_STOP_SHARD=36 -- --output "$tmp/special/swapped.npy" --shard-size 256
rm "$tmp/special/swapped.npy.partial"
mkfifo "$tmp/special/swapped.npy.partial"
continue_stopped
expect 0 "$tmp/special/swapped.npy.partial is not the file this job wrote any more (it names a FIFO now): it is left as it is" -- \
    bash -c 'cat "$1"; exit "$2"' _ "$tmp/race.log" "$((rc == 1 ? 0 : 1))"
expect 0 "" -- test -p "$tmp/special/swapped.npy.partial" -a ! -e "$tmp/special/swapped.npy" \
    -a -s "$tmp/special/swapped.npy.progress"
# Two jobs on one output: the second (new or --resume) is refused while the first runs (it holds
# an flock on OUT.progress) and touches none of its files; the first then finishes as alone.
start_stopped "$tmp/first.log" CLATTN_EMBED_STOP_SHARD=10 -- --output "$tmp/twice.npy" --shard-size 256
cp "$tmp/twice.npy.progress" "$tmp/twice.progress.kept"
cp "$tmp/twice.npy.partial" "$tmp/twice.partial.kept"
expect 1 "another embed is running on $tmp/twice.npy (it holds $tmp/twice.npy.progress)" -- \
    job --output "$tmp/twice.npy" --shard-size 256
expect 1 "another embed is running on $tmp/twice.npy" -- job --output "$tmp/twice.npy" --shard-size 256 --resume
expect 0 "" -- cmp "$tmp/twice.npy.progress" "$tmp/twice.progress.kept"
expect 0 "" -- cmp "$tmp/twice.npy.partial" "$tmp/twice.partial.kept"
continue_stopped
expect 0 "" -- test "$rc" -eq 0
expect 0 "" -- cmp "$tmp/twice.npy" "$tmp/ref.npy"

echo "--- outputs that are files embed reads (by inode, whatever the spelling): refused"
make_tiny_embedder "$tmp/guard" "$golden"
mkdir "$tmp/guard/extra" && echo notes >"$tmp/guard/extra/notes.txt"
ln "$tmp/guard/model.safetensors" "$tmp/weights.link"
cp -r "$tmp/guard" "$tmp/guard.orig"
for file in model.safetensors config.json vocab.txt extra/notes.txt; do
    expect 2 "of --model $tmp/guard; refusing to overwrite" -- \
        "$embed" --model "$tmp/guard" --output "$tmp/guard/$file" hello
    expect 2 "of --model $tmp/guard; refusing to overwrite" -- \
        "$embed" --model "$tmp/guard" --input "$tmp/corpus.txt" --output "$tmp/guard/$file"
done
expect 2 "of --model $tmp/guard/; refusing to overwrite" -- \
    "$embed" --model "$tmp/guard/" --output "$tmp/weights.link" hello
expect 2 "of --model" -- "$embed" --model "$tmp/guard" --output "$tmp/guard/./vocab.txt" hello
expect 0 "" -- diff -r "$tmp/guard" "$tmp/guard.orig"
# ... but a result written into the model folder (no model file is an array) may be replaced.
expect 0 "" -- "$embed" --model "$tmp/guard" --output "$tmp/guard/out.npy" hello
expect 0 "" -- "$embed" --model "$tmp/guard" --output "$tmp/guard/out.npy" hello again
rm "$tmp/guard/out.npy"
# The corpus job's own files (OUT.partial, OUT.progress) are never the input.
cp "$tmp/corpus.txt" "$tmp/in.npy.partial"
cp "$tmp/corpus.txt" "$tmp/in.npy.progress"
expect 2 "the job's file $tmp/in.npy.partial is the same file as --input" -- \
    "$embed" --model "$tmp/tiny" --input "$tmp/in.npy.partial" --output "$tmp/in.npy"
expect 2 "the job's file $tmp/in.npy.progress is the same file as --input" -- \
    "$embed" --model "$tmp/tiny" --input "$tmp/in.npy.progress" --output "$tmp/in.npy" --resume
expect 0 "" -- cmp "$tmp/in.npy.partial" "$tmp/corpus.txt"
expect 0 "" -- cmp "$tmp/in.npy.progress" "$tmp/corpus.txt"
expect 0 "" -- test ! -e "$tmp/in.npy"
# Standard input is compared too: --input - --output F <F would replace F.
cp "$tmp/corpus.txt" "$tmp/stdin.txt"
expect 2 "is the same file as standard input" -- \
    bash -c '"$1" --model "$2" --input - --output "$3" <"$3"' _ \
    "$embed" "$tmp/tiny" "$tmp/stdin.txt"
expect 0 "" -- cmp "$tmp/stdin.txt" "$tmp/corpus.txt"

echo "--- the job is named by content: resumed under other spellings, refused for another model"
CLATTN_EMBED_KILL_SHARD=20 expect 137 "" -- job --output "$tmp/spelled.npy" --shard-size 256
embed_path=$(cd "$(dirname "$embed")" && pwd)/$(basename "$embed")
expect 0 '"resumed_shards": 20,' -- bash -c 'cd "$1" && "$2" --model ./tiny/ --input ./corpus.txt \
    --output spelled.npy --shard-size 256 --resume --json' _ "$tmp" "$embed_path"
expect 0 "" -- cmp "$tmp/spelled.npy" "$tmp/ref.npy"
# The same --model path (a link) moved to another model: its config differs (same weights file
# size, time and header), then its weights (same size and header; another time).
make_tiny_embedder "$tmp/relu" "$golden"
sed -i 's/"hidden_act": "gelu"/"hidden_act": "relu"/' "$tmp/relu/config.json"
touch -r "$tmp/tiny/model.safetensors" "$tmp/relu/model.safetensors"
make_tiny_embedder "$tmp/reweighted" "$golden"
python3 - "$tmp/reweighted/model.safetensors" <<'EOF'
import json, struct, sys
path = sys.argv[1]
with open(path, "r+b") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    begin = json.loads(f.read(n))["encoder.layer.1.output.dense.bias"]["data_offsets"][0]
    f.seek(8 + n + begin)
    f.write(struct.pack("<f", 0.75))
EOF
touch -d '2001-01-01 00:00:00' "$tmp/reweighted/model.safetensors"
for other in relu reweighted; do
    ln -sfn "$tmp/tiny" "$tmp/model.link"
    CLATTN_EMBED_KILL_SHARD=20 expect 137 "" -- "$embed" --model "$tmp/model.link" \
        --input "$tmp/corpus.txt" --output "$tmp/moved.npy" --shard-size 256
    ln -sfn "$tmp/$other" "$tmp/model.link"
    expect 1 "recorded: files' checksum" -- "$embed" --model "$tmp/model.link" \
        --input "$tmp/corpus.txt" --output "$tmp/moved.npy" --shard-size 256 --resume
    rm -f "$tmp/moved.npy.partial" "$tmp/moved.npy.progress"
done

echo "--- --resume refuses another job's files, naming each fact that differs"
# The progress file's header holds every fact that changes a row's bytes; a resume with any one
# changed is refused (exit 1), naming it with both values, and leaves the job's files as they
# were; the same facts (another --batch-size, a --max-length at or above the model's) resume.
# A model with a Normalize module, so that --no-normalize changes the rows.
mkdir "$tmp/normed"
cp "$tmp/tiny"/* "$tmp/normed/"
printf '[{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}, {"idx": 1, "name": "1", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]\n' \
    >"$tmp/normed/modules.json"
idjob() { "$embed" --model "$tmp/normed" --input "$tmp/corpus.txt" --output "$tmp/id.npy" --shard-size 256 "$@"; }
CLATTN_EMBED_FAIL_SHARD=5 expect 1 "" -- idjob
cp "$tmp/id.npy.progress" "$tmp/id.progress.kept"
cp "$tmp/id.npy.partial" "$tmp/id.partial.kept"
fact() { sed -n "s/^$1: //p" "$tmp/id.progress.kept"; }
# refused_naming FACT RECORDED NOW -- COMMAND...: exit 1, the three lines naming FACT, the job's
# files unchanged.
refused_naming() {
    local name=$1 recorded=$2 now=$3 out rc
    shift 4
    out=$("$@" 2>&1)
    rc=$?
    last_out=$out
    local block=$'\n'"  $name"$'\n'"    recorded: $recorded"$'\n'"    now:      $now"$'\n'
    if [ "$rc" -eq 1 ] && [[ "$out" == *"records another job"*"$block"* ]] &&
        cmp -s "$tmp/id.npy.partial" "$tmp/id.partial.kept"; then
        echo "ok:   $name: refused ($recorded, now $now)"
    else
        echo "FAIL: $* -> exit $rc (expected 1), output must name $name: $recorded -> $now:"
        sed 's/^/    /' <<<"$out" | head -20
        failures=$((failures + 1))
    fi
    # as they were (a test's edit, or a resume that should have been refused), case by case
    cp "$tmp/id.progress.kept" "$tmp/id.npy.progress"
    cp "$tmp/id.partial.kept" "$tmp/id.npy.partial"
    rm -f "$tmp/id.npy"
}
for precision in bf16 int8; do
    if "$embed" --model "$tmp/normed" --precision "$precision" hello >/dev/null 2>&1; then
        refused_naming precision fp32 "$precision" -- idjob --resume --precision "$precision"
    else
        echo "note: --precision $precision is not supported on this device: its case is not run"
    fi
done
refused_naming max-length "64 tokens" "16 tokens" -- idjob --resume --max-length 16
refused_naming pooling mean cls -- idjob --resume --pooling cls
refused_naming normalize yes no -- idjob --resume --no-normalize
refused_naming prompt none '"the "' -- idjob --resume --prompt "the "
refused_naming shard-size "256 bytes" "512 bytes" -- idjob --resume --shard-size 512
if grep -q "input checksum" <<<"$last_out"; then # per shard: another cut, other checksums
    echo "FAIL: another --shard-size is said to change the input's checksum"
    failures=$((failures + 1))
fi
qpw=$(fact tuning | grep -o 'fused_qpw [0-9]*' | grep -o '[0-9]*$')
other=$([ "$qpw" = 4 ] && echo 2 || echo 4)
CLATTN_TUNE=fused_qpw=$other refused_naming tuning "$(fact tuning)" \
    "$(fact tuning | sed "s/fused_qpw $qpw/fused_qpw $other/")" -- idjob --resume
# What a test cannot change (the device, its driver, the library) recorded otherwise: the
# progress file's line edited in place (the same length), as another machine would have written.
for name in device driver library; do
    value=$(fact "$name")
    sed -i "s/^$name: ./$name: ~/" "$tmp/id.npy.progress"
    refused_naming "$name" "~${value:1}" "$value" -- idjob --resume
done
# A damaged header (NUL bytes, as a crash before the file reached the disk may leave) is said to
# be damaged, not another job's.
header=$(sed -n '1s/^clattn-embed progress 3 header=0*//p' "$tmp/id.progress.kept")
dd if=/dev/zero of="$tmp/id.npy.progress" bs=1 seek=$((header / 2)) count=40 conv=notrunc status=none
expect 1 "$tmp/id.npy.progress is damaged (its header holds NUL bytes" -- idjob --resume
expect 1 "" -- grep -q "records another job" <<<"$(idjob --resume 2>&1)"
cp "$tmp/id.progress.kept" "$tmp/id.npy.progress"
# A huge recorded value (1 MB; a header may be up to 1 MiB) is echoed cut, at 200 bytes.
python3 - "$tmp/id.progress.kept" "$tmp/id.npy.progress" <<'PY'
import re, sys
data = open(sys.argv[1], "rb").read()
n = int(re.match(rb"clattn-embed progress 3 header=(\d+)\n", data).group(1))
header = re.sub(rb"\ndevice: [^\n]*", b"\ndevice: " + b"x" * 1000000, data[:n])
header = re.sub(rb"header=\d+", b"header=%08d" % len(header), header, count=1)
open(sys.argv[2], "wb").write(header + data[n:])
PY
out=$(idjob --resume 2>&1)
if [[ "$out" == *"recorded: $(printf 'x%.0s' $(seq 200))…"* ]] && [ "$(wc -L <<<"$out")" -lt 400 ]; then
    echo "ok:   a 1 MB recorded value is echoed cut at 200 bytes"
else
    echo "FAIL: a 1 MB recorded value: $(wc -c <<<"$out") bytes of output, its longest line $(wc -L <<<"$out")"
    failures=$((failures + 1))
fi
cp "$tmp/id.progress.kept" "$tmp/id.npy.progress"
# The same facts: another --batch-size (batch invariance) and --max-length above the model's 64.
"$embed" --model "$tmp/normed" --input - --output "$tmp/normed.npy" <"$tmp/corpus.txt"
expect 0 '"resumed_shards": 5,' -- idjob --resume --batch-size 7 --max-length 100000 --json
expect 0 "" -- cmp "$tmp/id.npy" "$tmp/normed.npy"
# A progress file of an earlier embed (format 2): refused as such.
CLATTN_EMBED_FAIL_SHARD=5 expect 1 "" -- idjob
printf 'clattn-embed progress 2 shards=37 rows=160 hidden=48 job=0123456789abcdef' |
    dd of="$tmp/id.npy.progress" conv=notrunc status=none
expect 1 "was written by another version of embed" -- idjob --resume
rm "$tmp/id.npy.partial" "$tmp/id.npy.progress"

echo "--- --resume trusts no record and no row without its checksum"
# Every record corrupted towards "done" (each 0 made a 1): embedded again, not taken as zeros.
CLATTN_EMBED_KILL_SHARD=20 expect 137 "" -- job --output "$tmp/records.npy" --shard-size 256
header=$(sed -n '1s/^clattn-embed progress 3 header=0*//p' "$tmp/records.npy.progress") # bytes
{ head -c "$header" "$tmp/records.npy.progress"; tail -c +$((header + 1)) "$tmp/records.npy.progress" | tr 0 1; } \
    >"$tmp/progress.corrupt" && cp "$tmp/progress.corrupt" "$tmp/records.npy.progress"
expect 0 "are damaged" -- job --output "$tmp/records.npy" --shard-size 256 --resume
expect 0 "" -- cmp "$tmp/records.npy" "$tmp/ref.npy"
# Rows of a recorded shard zeroed in the .partial: read back, found wrong, embedded again.
CLATTN_EMBED_KILL_SHARD=20 expect 137 "" -- job --output "$tmp/rows.npy" --shard-size 256
dd if=/dev/zero of="$tmp/rows.npy.partial" bs=1 seek=200 count=64 conv=notrunc status=none
expect 0 "differ from their records" -- job --output "$tmp/rows.npy" --shard-size 256 --resume
expect 0 "" -- cmp "$tmp/rows.npy" "$tmp/ref.npy"

echo "--- the data is synced before its shard is recorded"
# CLATTN_JOB_IO_TRACE logs each write and sync after the system call: between a shard's rows
# written to the .partial and its record in the .progress there must be a sync of the .partial.
synced_before_recorded() { # TRACE: "PID write PATH OFFSET BYTES" / "PID sync PATH" lines
    awk '$2 == "write" && $3 ~ /\.partial$/ { dirty[$1] = 1 }
         $2 == "sync" && $3 ~ /\.partial$/ { dirty[$1] = 0 }
         $2 == "write" && $3 ~ /\.progress$/ && $4 >= 128 { marks++; if (dirty[$1]) early++ }
         END { printf "%d records, %d before their data was synced\n", marks, early
               exit !(marks >= 37 && early == 0) }' "$1"
}
CLATTN_JOB_IO_TRACE="$tmp/io.log" expect 0 "" -- job --output "$tmp/traced.npy" --shard-size 256
expect 0 "37 records, 0 before their data was synced" -- synced_before_recorded "$tmp/io.log"
expect 0 "" -- cmp "$tmp/traced.npy" "$tmp/ref.npy"

echo "--- non-finite embeddings: an error unless --allow-non-finite; JSON stays JSON"
# The word embedding of "z" (id 30 of the tiny vocabulary) made NaN: texts with a word starting
# with z embed to NaN, the others do not.
make_tiny_embedder "$tmp/nan" "$golden"
python3 - "$tmp/nan/model.safetensors" <<'EOF'
import json, struct, sys
path = sys.argv[1]
with open(path, "r+b") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    begin = json.loads(f.read(n))["embeddings.word_embeddings.weight"]["data_offsets"][0]
    f.seek(8 + n + begin + 30 * 48 * 4)
    f.write(struct.pack("<f", float("nan")))
EOF
strict_json() { # each line of stdin must be strict JSON (no NaN or Infinity)
    python3 -c 'import json, sys
def bad(c): raise ValueError("not JSON: " + c)
for line in sys.stdin: json.loads(line, parse_constant=bad)
print("valid JSON")'
}
expect 1 "1 of 3 embeddings are not finite (NaN or infinity; the first: text 2)" -- \
    "$embed" --model "$tmp/nan" "the cat" "zoo" "dog"
expect 1 "1 of 3 embeddings are not finite" -- \
    "$embed" --model "$tmp/nan" --output "$tmp/nan.npy" "the cat" "zoo" "dog"
expect 0 "" -- test ! -e "$tmp/nan.npy"
"$embed" --model "$tmp/nan" --allow-non-finite "the cat" "zoo" "dog" \
    >"$tmp/nan.jsonl" 2>"$tmp/nan.err"
expect 0 "" -- test $? -eq 0
expect 0 "valid JSON" -- strict_json <"$tmp/nan.jsonl"
expect 0 "" -- grep -q '^\[null, null' <(sed -n 2p "$tmp/nan.jsonl")
expect 0 "" -- grep -qv null <(sed -n 1p "$tmp/nan.jsonl")
expect 0 "note: 1 of 3 embeddings are not finite" -- cat "$tmp/nan.err"
"$embed" --model "$tmp/nan" --allow-non-finite --json zoo dog >"$tmp/nan.json" 2>/dev/null
expect 0 "" -- test $? -eq 0
expect 0 "valid JSON" -- strict_json <"$tmp/nan.json"
expect 0 "" -- "$embed" --model "$tmp/nan" --allow-non-finite --output "$tmp/nan.npy" zoo dog
expect 0 "" -- test -s "$tmp/nan.npy"
# The corpus job: the shard stops the job, no output; --resume --allow-non-finite finishes it.
expect 1 "embeddings are not finite" -- "$embed" --model "$tmp/nan" --input "$tmp/corpus.txt" \
    --output "$tmp/nanjob.npy" --shard-size 256
expect 0 "" -- test ! -e "$tmp/nanjob.npy"
expect 1 "run again with --resume --allow-non-finite" -- "$embed" --model "$tmp/nan" \
    --input "$tmp/corpus.txt" --output "$tmp/nanjob.npy" --shard-size 256 --resume
expect 0 "embeddings are not finite (NaN or infinity); kept" -- "$embed" --model "$tmp/nan" \
    --input "$tmp/corpus.txt" --output "$tmp/nanjob.npy" --shard-size 256 --resume \
    --allow-non-finite
expect 0 "" -- test -s "$tmp/nanjob.npy"

echo "--- messages: texts and lines count from 1; --max-length above the model's is said once"
printf 'fine\nalso fine\nbad \xff\nfine\n' >"$tmp/bad.txt"
expect_not_texts_index() { # STATUS NEEDLE -- COMMAND: as expect, and no "texts[" in the output
    local out
    expect "$@"
    shift 3
    out=$("$@" 2>&1)
    if grep -qF 'texts[' <<<"$out"; then
        echo "FAIL: $* names a text by its array index: $out"
        failures=$((failures + 1))
    fi
}
expect_not_texts_index 1 "text 2: " -- "$embed" --model "$tmp/tiny" fine $'bad \xff'
expect_not_texts_index 1 "line 3: " -- "$embed" --model "$tmp/tiny" --input "$tmp/bad.txt"
expect_not_texts_index 1 "line 3: " -- "$embed" --model "$tmp/tiny" --input - <"$tmp/bad.txt"
expect_not_texts_index 1 "line 3: " -- "$embed" --model "$tmp/tiny" --input "$tmp/bad.txt" \
    --output "$tmp/bad.npy"
rm -f "$tmp/bad.npy.partial" "$tmp/bad.npy.progress"
expect 1 "mend --input $tmp/bad.txt" -- "$embed" --model "$tmp/tiny" --input "$tmp/bad.txt" \
    --output "$tmp/bad.npy"
rm -f "$tmp/bad.npy.partial" "$tmp/bad.npy.progress"
expect_not_texts_index 1 "line 3: " -- \
    "$embed" --model "$tmp/tiny" --tokenize --input "$tmp/bad.txt"
note_once() { # COMMAND...: exit 0 and the --max-length note exactly once
    local out
    out=$("$@" 2>&1 >/dev/null) || return 1
    [ "$(grep -c "note: --max-length 100000 is more than the model's 64 tokens" <<<"$out")" -eq 1 ]
}
expect 0 "" -- note_once "$embed" --model "$tmp/tiny" --max-length 100000 "a text" "another"
expect 0 "" -- note_once job --output "$tmp/long.npy" --shard-size 256 --max-length 100000
# The input changed while the job ran (a letter, in place: the same lines, size and file): the
# advice is to start over, which then works (--resume would refuse the old input's shards).
cp "$tmp/corpus.txt" "$tmp/changing.txt"
CLATTN_EMBED_STOP_SHARD=5 "$embed" --model "$tmp/tiny" --input "$tmp/changing.txt" \
    --output "$tmp/changing.npy" --shard-size 256 >"$tmp/changing.log" 2>&1 &
pid=$!
for _ in $(seq 600); do
    [ "$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)" = T ] && break
    sleep 0.1
done
at=3000
until [[ "$(dd if="$tmp/changing.txt" bs=1 skip=$at count=1 status=none)" == [a-w] ]]; do
    at=$((at + 1))
done
printf 'z' | dd of="$tmp/changing.txt" bs=1 seek=$at conv=notrunc status=none
kill -CONT "$pid"
wait "$pid"
expect 1 "" -- test $? -eq 0
expect 0 "changed while the job ran" -- cat "$tmp/changing.log"
expect 0 "remove $tmp/changing.npy.partial and $tmp/changing.npy.progress and run again" -- \
    cat "$tmp/changing.log"
expect 1 "" -- grep -q "run again with --resume" "$tmp/changing.log"
expect 1 "  input checksum" -- "$embed" --model "$tmp/tiny" --input "$tmp/changing.txt" \
    --output "$tmp/changing.npy" --shard-size 256 --resume
rm "$tmp/changing.npy.partial" "$tmp/changing.npy.progress"
expect 0 "" -- "$embed" --model "$tmp/tiny" --input "$tmp/changing.txt" \
    --output "$tmp/changing.npy" --shard-size 256

echo "--- prompts (config_sentence_transformers.json): checks, and a prompt is text put before"
mkdir "$tmp/prompted"
cp "$tmp/tiny"/* "$tmp/prompted/"
printf '{"prompts": {"q": "the ", "p": "of is "}, "default_prompt_name": "q"}\n' \
    >"$tmp/prompted/config_sentence_transformers.json"
expect 2 "--prompt-name 'x' is not one of the model's prompts ('q', 'p')" -- \
    "$embed" --model "$tmp/prompted" --prompt-name x hello
expect 2 "--prompt-name 'q' is not one of the model's prompts (its config_sentence_transformers.json has none)" -- \
    "$embed" --model "$tmp/tiny" --prompt-name q hello
expect 2 "--prompt-name 'x' is not one of the model's prompts" -- \
    "$embed" --model "$tmp/prompted" --input "$tmp/corpus.txt" --output "$tmp/p.npy" --prompt-name x
mkdir "$tmp/bad-prompts"
cp "$tmp/tiny"/* "$tmp/bad-prompts/"
printf '{"prompts": {"q": "the "}, "default_prompt_name": "query"}' \
    >"$tmp/bad-prompts/config_sentence_transformers.json"
expect 1 'default_prompt_name "query" is not one of the prompts' -- \
    "$embed" --model "$tmp/bad-prompts" hello
printf '{"prompts": {"q": 3}}' >"$tmp/bad-prompts/config_sentence_transformers.json"
expect 1 'prompt "q" is not a string' -- "$embed" --model "$tmp/bad-prompts" hello
rm "$tmp/bad-prompts/config_sentence_transformers.json"
mkdir "$tmp/bad-prompts/1_Pooling"
printf '{"pooling_mode_mean_tokens": true, "include_prompt": false}' \
    >"$tmp/bad-prompts/1_Pooling/config.json"
expect 1 '"include_prompt": false' -- "$embed" --model "$tmp/bad-prompts" hello
# The default prompt ("the "), --prompt-name p, --prompt TEXT and --prompt "" against the texts
# with the prompt written out: the same bytes (sentence-transformers joins the strings).
printf 'cat dog\n\nis was zebra\n' >"$tmp/plain.txt"
printf 'the cat dog\nthe \nthe is was zebra\n' >"$tmp/q.txt"
printf 'of is cat dog\nof is \nof is is was zebra\n' >"$tmp/p.txt"
"$embed" --model "$tmp/tiny" --input "$tmp/q.txt" --output "$tmp/q.npy" &&
    "$embed" --model "$tmp/tiny" --input "$tmp/p.txt" --output "$tmp/p.npy" &&
    "$embed" --model "$tmp/tiny" --input "$tmp/plain.txt" --output "$tmp/plain.npy" || {
    echo "FAIL: embed without prompts"
    failures=$((failures + 1))
}
expect 0 "" -- "$embed" --model "$tmp/prompted" --input "$tmp/plain.txt" --output "$tmp/dq.npy"
expect 0 "" -- cmp "$tmp/dq.npy" "$tmp/q.npy"
expect 0 "" -- "$embed" --model "$tmp/prompted" --input "$tmp/plain.txt" --prompt-name p \
    --output "$tmp/dp.npy"
expect 0 "" -- cmp "$tmp/dp.npy" "$tmp/p.npy"
expect 0 "" -- "$embed" --model "$tmp/tiny" --input "$tmp/plain.txt" --prompt "of is " \
    --output "$tmp/tp.npy"
expect 0 "" -- cmp "$tmp/tp.npy" "$tmp/p.npy"
expect 0 "" -- "$embed" --model "$tmp/prompted" --input "$tmp/plain.txt" --prompt "" \
    --output "$tmp/none.npy"
expect 0 "" -- cmp "$tmp/none.npy" "$tmp/plain.npy"
# A corpus job records its prompt: resuming with another one is another job.
expect 0 "" -- "$embed" --model "$tmp/prompted" --input "$tmp/plain.txt" --output "$tmp/jq.npy"
expect 0 "" -- cmp "$tmp/jq.npy" "$tmp/q.npy"
CLATTN_EMBED_FAIL_SHARD=5 expect 1 "failing as CLATTN_EMBED_FAIL_SHARD asks" -- \
    "$embed" --model "$tmp/prompted" --input "$tmp/corpus.txt" --output "$tmp/jr.npy" \
    --shard-size 256
expect 1 "now:      \"of is \"" -- "$embed" --model "$tmp/prompted" --input "$tmp/corpus.txt" \
    --output "$tmp/jr.npy" --shard-size 256 --prompt-name p --resume
expect 1 "now:      \"the\"" -- "$embed" --model "$tmp/prompted" --input "$tmp/corpus.txt" \
    --output "$tmp/jr.npy" --shard-size 256 --prompt "the" --resume
expect 0 '"resumed_shards": 5,' -- "$embed" --model "$tmp/prompted" --input "$tmp/corpus.txt" \
    --output "$tmp/jr.npy" --shard-size 256 --prompt "the " --resume --json

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
expect 1 "text 2: clattn_tokenizer_encode: invalid argument: the text is not valid UTF-8 at byte 4" -- "$embed" --model "$model_dir" fine $'bad \xff'
# Prompts on the real model against sentence-transformers' encode (tests/golden/prompts, written by
# tools/gen_prompt_golden.py): the model's files linked into a folder with its prompts.
mkdir "$tmp/minilm-prompts"
cp -rs "$(cd "$model_dir" && pwd)"/. "$tmp/minilm-prompts/"
rm -f "$tmp/minilm-prompts/config_sentence_transformers.json"
cp "$golden/prompts/config_sentence_transformers.json" "$tmp/minilm-prompts/"
prompted() { "$embed" --model "$tmp/minilm-prompts" --input "$golden/prompts/texts.txt" "$@"; }
expect 0 "" -- prompted --output "$tmp/pd.npy"
expect 0 "max abs difference" -- "$compare" "$tmp/pd.npy" "$golden/prompts/default.npy" 1e-5
expect 0 "" -- prompted --prompt-name passage --output "$tmp/pp.npy"
expect 0 "max abs difference" -- "$compare" "$tmp/pp.npy" "$golden/prompts/passage.npy" 1e-5
expect 0 "" -- prompted --prompt "Represent this sentence for retrieval: " --output "$tmp/pc.npy"
expect 0 "max abs difference" -- "$compare" "$tmp/pc.npy" "$golden/prompts/custom.npy" 1e-5
expect 0 "" -- prompted --prompt-name empty --output "$tmp/pe.npy"
expect 0 "max abs difference" -- "$compare" "$tmp/pe.npy" "$golden/prompts/none.npy" 1e-5

echo "--- $failures failure(s)"
[ "$failures" -eq 0 ]
