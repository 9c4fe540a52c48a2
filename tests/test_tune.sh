#!/bin/bash
# examples/tune end to end on a small layer: usage errors (exit 2); --quick --dry-run times the
# GEMM paths and the attention variants, prints the device's defaults and the best, stores
# nothing; without --dry-run the best lands in the tuning cache, which a new run reads back; a
# FIFO or a device as the cache is neither read nor replaced.
# usage: test_tune.sh TUNE FIFO_AT_FSYNC_SHIM
set -u
tune=$1 shim=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/clattn-tune.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/expect.sh"
export CLATTN_TUNING_CACHE=$tmp/tuning.json

expect 2 "--batch needs a positive integer" -- "$tune" --batch 0
expect 2 "unexpected argument" -- "$tune" extra
small=(--config base --batch 1 --seq 24 --repeat 1 --quick)
expect 0 "the library's CPU GEMM:" -- "$tune" "${small[@]}" --dry-run
out=$("$tune" "${small[@]}" --dry-run 2>&1)
if grep -q "micro-tiled *wg" <<<"$out" && grep -q "local 0 qpw [48] tk" <<<"$out" &&
    grep -q "^defaults: gemm_kernel [012], fused untiled [01]" <<<"$out" &&
    grep -q "^best: *gemm_kernel [012], fused untiled [01] .* ms per layer" <<<"$out" &&
    grep -q "nothing stored" <<<"$out" && [ ! -e "$CLATTN_TUNING_CACHE" ]; then
    echo "ok:   --dry-run: both GEMM paths and attention variants timed, defaults and best printed, no cache"
else
    echo "FAIL: --dry-run output:"
    sed 's/^/    /' <<<"$out" | head -40
    failures=$((failures + 1))
fi
# Storing: the best lands in the cache, and a new run (a new context) starts from it.
config() { sed -n "s/^$1: *\(gemm_kernel [012], fused untiled [01] local [01] qpw [0-9]* tk [0-9]* wg [0-9]*\).*/\1/p"; }
out=$("$tune" "${small[@]}" 2>&1)
best=$(config best <<<"$out")
if grep -q "stored in $CLATTN_TUNING_CACHE" <<<"$out" && grep -q '"gemm_kernel"' "$CLATTN_TUNING_CACHE" &&
    grep -q '"fused_untiled"' "$CLATTN_TUNING_CACHE"; then
    echo "ok:   stored in the cache: $best"
else
    echo "FAIL: nothing stored, or the cache lacks gemm_kernel or fused_untiled:"
    sed 's/^/    /' <<<"$out" | tail -5
    cat "$CLATTN_TUNING_CACHE"
    failures=$((failures + 1))
fi
again=$(config defaults <<<"$("$tune" "${small[@]}" --dry-run 2>&1)")
if [ -n "$best" ] && [ "$again" = "$best" ]; then
    echo "ok:   a new run starts from the stored tuning"
else
    echo "FAIL: a new run's defaults '$again' are not the stored best '$best'"
    failures=$((failures + 1))
fi

# A FIFO or a device as the cache: never opened (a FIFO blocked every context creation forever)
# nor replaced (a device node was once replaced by a regular file): a warning where it is read,
# a usage error (exit 2, as for any program's --output) naming it where tune would store. Each run under its own timeout, so that
# without the fix this fails instead of hanging. The nodes live in $tmp, never under /dev.
fifo=$tmp/fifo.json
mkfifo "$fifo"
expect 2 "tuning cache $fifo is a FIFO, not a regular file; ignored" -- \
    env CLATTN_TUNING_CACHE="$fifo" timeout 120 "$tune" --config no-such-preset --dry-run
expect 2 "the tuning cache $fifo is not a regular file" -- \
    env CLATTN_TUNING_CACHE="$fifo" timeout 300 "$tune" "${small[@]}"
device=$tmp/full.json
if mknod "$device" c 1 7 2>/dev/null; then # the numbers of /dev/full; root only (CI runs as root)
    expect 2 "the tuning cache $device is not a regular file" -- \
        env CLATTN_TUNING_CACHE="$device" timeout 300 "$tune" "${small[@]}"
else
    echo "note: mknod not permitted: the character-device case is not run"
    device=
fi
if [ -p "$fifo" ] && { [ -z "$device" ] || [ -c "$device" ]; }; then
    echo "ok:   the FIFO and the device are still what they were"
else
    echo "FAIL: a special file was replaced:"
    ls -l "$tmp"
    failures=$((failures + 1))
fi

# The rule of every file the programs write (examples/cli.c, cli_may_write), checked before any
# timing: a directory, a link to a FIFO and a link to nothing are refused and left as they are;
# a link to a regular file is followed (the file it names is replaced, the link stays).
mkdir "$tmp/dir.json"
ln -s fifo.json "$tmp/to-fifo.json"
ln -s missing.json "$tmp/dangling.json"
for cache in "dir.json:a directory, not a regular file" \
    "to-fifo.json:a symbolic link to a FIFO, not to a regular file" \
    "dangling.json:a symbolic link that cannot be followed"; do
    expect 2 "the tuning cache $tmp/${cache%%:*} is not a regular file: it names ${cache#*:}" -- \
        env CLATTN_TUNING_CACHE="$tmp/${cache%%:*}" timeout 60 "$tune" "${small[@]}"
done
if [ -d "$tmp/dir.json" ] && [ -z "$(ls -A "$tmp/dir.json")" ] && [ -p "$tmp/fifo.json" ] &&
    [ "$(readlink "$tmp/to-fifo.json")" = fifo.json ] && [ "$(readlink "$tmp/dangling.json")" = missing.json ] &&
    [ ! -e "$tmp/missing.json" ]; then
    echo "ok:   the directory and the links are as they were"
else
    echo "FAIL: a refused cache changed:"
    ls -l "$tmp"
    failures=$((failures + 1))
fi
echo '{"format": 1, "entries": []}' >"$tmp/real.json"
ln -s real.json "$tmp/to-real.json"
expect 0 "stored in $tmp/to-real.json" -- env CLATTN_TUNING_CACHE="$tmp/to-real.json" "$tune" "${small[@]}"
expect 0 "" -- grep -q '"gemm_kernel"' "$tmp/real.json"
expect 0 "" -- test -L "$tmp/to-real.json"
# Something else takes the cache's name while tune writes it (tests/fifo_at_fsync.c makes a
# FIFO there at the sync just before the cache is put in place): refused, the FIFO left as it is,
# no temporary file left behind.
raced=$tmp/raced.json
expect 1 "names a FIFO now, which took the name while the cache was written: left unchanged" -- \
    env CLATTN_TUNING_CACHE="$raced" CLATTN_TEST_FIFO_AT_FSYNC="$raced" LD_PRELOAD="$shim" \
    timeout 300 "$tune" "${small[@]}"
if [ -p "$raced" ] && [ -z "$(find "$tmp" -maxdepth 1 -name 'raced.json.*')" ]; then
    echo "ok:   the FIFO that took the cache's name is left as it is, no temporary file left"
else
    echo "FAIL: the cache's race:"
    ls -l "$tmp"
    failures=$((failures + 1))
fi

echo "--- $failures failure(s)"
[ "$failures" -eq 0 ]
