#!/bin/bash
# embed's corpus job under MPI (mpirun -np 2 on this machine): byte for byte the file of one
# process; a failing rank names itself and its lines and leaves no output; a job killed part-way
# finishes with --resume, again byte for byte. Skips (exit 77) when embed was built without MPI,
# unless CLATTN_REQUIRE_MPI=1 (set by .ci/run), which fails.
# usage: test_embed_mpi.sh EMBED MPI_BUILT(true|false) MPIRUN GOLDEN_DIR
set -u
embed=$1 mpi_built=$2 mpirun=$3 golden=$4
if [ "$mpi_built" != true ] || [ ! -x "$mpirun" ]; then
    echo "embed was built without MPI (or mpirun is missing): install libopenmpi-dev openmpi-bin"
    [ "${CLATTN_REQUIRE_MPI:-}" = 1 ] && { echo "FAIL: CLATTN_REQUIRE_MPI=1"; exit 1; }
    exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/clattn-embed-mpi.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/expect.sh"
source "$(dirname "$0")/tiny_corpus.sh"

# Two ranks on however many cores; as root when CI runs as root; shared memory without
# cross-memory attach (refused in many containers).
mpi_flags=(--oversubscribe --mca btl_vader_single_copy_mechanism none)
[ "$(id -u)" -eq 0 ] && mpi_flags+=(--allow-run-as-root)
# One PoCL thread per rank: two ranks share the two cores instead of fighting over them.
export POCL_MAX_PTHREAD_COUNT=1

make_tiny_embedder "$tmp/tiny" "$golden"
make_corpus "$tmp/corpus.txt" 3000
one() { "$embed" --model "$tmp/tiny" --input "$tmp/corpus.txt" --shard-size 4096 "$@"; }
mpi_extra=() # more mpirun options (-x VAR=VALUE) for the next runs
two() {
    "$mpirun" "${mpi_flags[@]}" "${mpi_extra[@]}" -np 2 "$embed" --model "$tmp/tiny" \
        --input "$tmp/corpus.txt" --shard-size 4096 --output "$tmp/two.npy" "$@"
}

echo "--- one process, then two ranks: the same bytes"
expect 0 '"processes": 1, "count": 3000, "hidden": 48, "shards": 43' -- one --output "$tmp/one.npy" --json
out=$(two --json --progress 2>&1)
echo "$out" | sed 's/^/    /' | head -5
if cmp -s "$tmp/one.npy" "$tmp/two.npy"; then
    echo "ok:   mpirun -np 2 writes the same file, byte for byte, as one process"
else
    echo "FAIL: the two ranks' file differs from one process's"
    failures=$((failures + 1))
fi
# Batch invariance: the in-memory path (one sort of all 3000 texts, other batches, other padded
# lengths) gives the same bytes as the sharded job on two ranks.
"$embed" --model "$tmp/tiny" --input - --output "$tmp/memory.npy" <"$tmp/corpus.txt"
expect 0 "" -- cmp "$tmp/memory.npy" "$tmp/two.npy"
if grep -q '"processes": 2, .*"per_process": \[{"rank": 0, .*"texts_per_s": [0-9].*{"rank": 1, ' <<<"$out" &&
    [ "$(grep -c 'texts/s over 2 processes' <<<"$out")" -ge 1 ]; then
    echo "ok:   --json reports each rank's throughput; one progress line for the job"
else
    echo "FAIL: --json per rank or the progress line"
    failures=$((failures + 1))
fi
expect 0 "" -- test ! -e "$tmp/two.npy.partial" -a ! -e "$tmp/two.npy.progress"
rm -f "$tmp/two.npy"

echo "--- each rank syncs its rows before it records their shard"
# CLATTN_JOB_IO_TRACE: every rank logs its writes and syncs ("PID write PATH OFFSET BYTES",
# "PID sync PATH") after the calls; a record (.progress past its header, over 128 bytes) must follow a
# sync of the .partial with no write of that rank's rows in between.
mpi_extra=(-x CLATTN_JOB_IO_TRACE="$tmp/io.log")
expect 0 "" -- two
mpi_extra=()
expect 0 "43 records by 2 ranks, 0 before their data was synced" -- \
    awk '$2 == "write" && $3 ~ /\.partial$/ { dirty[$1] = 1 }
         $2 == "sync" && $3 ~ /\.partial$/ { dirty[$1] = 0 }
         $2 == "write" && $3 ~ /\.progress$/ && $4 >= 128 {
             marks++; if (!($1 in ranks)) { ranks[$1] = 1; n++ } if (dirty[$1]) early++ }
         END { printf "%d records by %d ranks, %d before their data was synced\n", marks, n, early
               exit !(marks == 43 && n == 2 && early == 0) }' "$tmp/io.log"
expect 0 "" -- cmp "$tmp/one.npy" "$tmp/two.npy"
rm -f "$tmp/two.npy"

echo "--- usage errors are printed once"
out=$("$mpirun" "${mpi_flags[@]}" -np 2 "$embed" --model "$tmp/tiny" --input - --output "$tmp/x.npy" 2>&1)
if [ "$(grep -c 'under mpirun, embed needs --input FILE' <<<"$out")" -eq 1 ]; then
    echo "ok:   stdin under mpirun: one usage error"
else
    echo "FAIL: expected the usage error once:"
    sed 's/^/    /' <<<"$out" | head
    failures=$((failures + 1))
fi

echo "--- a failing rank: its rank and lines named once, no output file"
# Shard 30 of 43 belongs to rank 1 (shards 21-42).
mpi_extra=(-x CLATTN_EMBED_FAIL_SHARD=30)
out=$(two 2>&1)
rc=$?
if [ "$rc" -ne 0 ] && [ "$(grep -c 'rank 1 of 2 (.*): lines [0-9]*-[0-9]*: failing as' <<<"$out")" -eq 1 ] &&
    [ ! -e "$tmp/two.npy" ] && grep -q "run again with --resume" <<<"$out"; then
    echo "ok:   exit $rc, '$(grep -o 'rank 1 of 2.*asks' <<<"$out")', no $tmp/two.npy"
else
    echo "FAIL: exit $rc; output:"
    sed 's/^/    /' <<<"$out" | head
    failures=$((failures + 1))
fi
# Resumed by one process: the job's facts are the same (one kind of device, driver and tuning on
# every rank), so its finished shards are kept, and the bytes are the same.
out=$(one --output "$tmp/two.npy" --resume --json 2>&1)
resumed=$(grep -o '"resumed_shards": [0-9]*' <<<"$out" | head -n 1 | grep -o '[0-9]*$')
if cmp -s "$tmp/one.npy" "$tmp/two.npy" && [ "${resumed:-0}" -gt 0 ]; then
    echo "ok:   two ranks' job resumed by one process: $resumed shards kept, the same bytes"
else
    echo "FAIL: two ranks' job resumed by one process (resumed ${resumed:-none}):"
    sed 's/^/    /' <<<"$out" | head
    failures=$((failures + 1))
fi
rm -f "$tmp/two.npy" "$tmp/two.npy.partial" "$tmp/two.npy.progress"

echo "--- a rank killed part-way, then --resume"
mpi_extra=(-x CLATTN_EMBED_KILL_SHARD=35)
out=$(two 2>&1)
rc=$?
if [ "$rc" -ne 0 ] && [ ! -e "$tmp/two.npy" ] && [ -s "$tmp/two.npy.progress" ]; then
    echo "ok:   killed: exit $rc, no output file, the progress kept"
else
    echo "FAIL: exit $rc after the kill, or an output file, or no progress file"
    failures=$((failures + 1))
fi
mpi_extra=()
# its .npy header damaged too: rank 0 writes it again (an independent MPI-IO write, then synced)
printf 'XXXXXXXXXXXXXXXX' | dd of="$tmp/two.npy.partial" conv=notrunc status=none
out=$(two --resume --json 2>&1)
resumed=$(grep -o '"resumed_shards": [0-9]*' <<<"$out" | head -n 1 | grep -o '[0-9]*$')
if cmp -s "$tmp/one.npy" "$tmp/two.npy" && [ "${resumed:-0}" -gt 0 ] &&
    grep -q "its .npy header is not the job's" <<<"$out"; then
    echo "ok:   --resume skipped $resumed finished shards, wrote the header again and the same bytes"
else
    echo "FAIL: --resume (resumed ${resumed:-none}):"
    sed 's/^/    /' <<<"$out" | head
    failures=$((failures + 1))
fi

echo "--- a job on an output another embed is running on: refused, once, touching nothing"
CLATTN_EMBED_STOP_SHARD=5 "$embed" --model "$tmp/tiny" --input "$tmp/corpus.txt" --shard-size 4096 \
    --output "$tmp/two.npy" >"$tmp/first.log" 2>&1 &
pid=$!
for _ in $(seq 600); do
    [ "$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)" = T ] && break
    sleep 0.1
done
cp "$tmp/two.npy.progress" "$tmp/progress.kept"
out=$(two 2>&1)
rc=$?
if [ "$rc" -eq 1 ] && [ "$(grep -c "another embed is running on $tmp/two.npy" <<<"$out")" -eq 1 ] &&
    cmp -s "$tmp/two.npy.progress" "$tmp/progress.kept"; then
    echo "ok:   two ranks refused while one process runs the job: exit 1, said once"
else
    echo "FAIL: exit $rc (expected 1, said once, the progress file unchanged):"
    sed 's/^/    /' <<<"$out" | head
    failures=$((failures + 1))
fi
kill -CONT "$pid"
wait "$pid"
expect 0 "" -- test $? -eq 0
expect 0 "" -- cmp "$tmp/one.npy" "$tmp/two.npy"

echo "--- $failures failure(s)"
[ "$failures" -eq 0 ]
