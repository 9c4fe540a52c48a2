#!/bin/bash
# File-system faults around examples/encode's files: a full disk, a read-only directory, an
# existing output (replaced only on success), FIFOs (rejected at once, never waited on), a
# directory, symbolic links, a character device. Each case checks the exit status, the message
# and that no existing file changed (checksums and file types before and after) and that no
# temporary file is left behind.
# The full-disk and read-only cases mount a small tmpfs; where mounting is not allowed (not
# root, or a container without CAP_SYS_ADMIN) those cases alone are skipped, saying why. The
# character-device case needs mknod (root), else it is skipped.
# A FIFO that takes --output's name while the file is written (made by an LD_PRELOAD shim,
# tests/fifo_at_fsync.c, at the sync just before the rename) is left as it is.
# usage: test_files.sh ENCODE GOLDEN_DIR FIFO_AT_FSYNC_SHIM
set -u
encode=$1 golden=$2 shim=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/clattn-files.XXXXXX")
mounts=()
cleanup() {
    for m in "${mounts[@]}"; do umount "$m" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
failures=0
model="$golden/enc_post_ln_relu/model.safetensors"
input="$golden/enc_post_ln_relu/input.npy"

# snapshot DIR: every entry's name, type, link target and checksum (what must not change).
snapshot() {
    (cd "$1" && find . -mindepth 1 | sort | while read -r f; do
        if [ -L "$f" ]; then echo "$f link $(readlink "$f")"
        elif [ -f "$f" ]; then echo "$f file $(cksum <"$f")"
        else echo "$f $(stat -c %F "$f")"; fi
    done)
}

# case_ NAME STATUS NEEDLE DIR -- COMMAND...: COMMAND (under a 20 s timeout: nothing may block)
# exits with STATUS, prints NEEDLE, and leaves DIR exactly as it was.
case_() {
    local name=$1 status=$2 needle=$3 dir=$4
    shift 5
    local before after out rc
    before=$(snapshot "$dir")
    out=$(timeout 20 "$@" 2>&1)
    rc=$?
    after=$(snapshot "$dir")
    if [ "$rc" -ne "$status" ] || ! grep -qF -- "$needle" <<<"$out" || [ "$before" != "$after" ]; then
        echo "FAIL: $name: exit $rc (expected $status), output must contain: $needle"
        sed 's/^/    /' <<<"$out" | head -10
        [ "$before" != "$after" ] && diff <(echo "$before") <(echo "$after") | sed 's/^/    /'
        failures=$((failures + 1))
    else
        echo "ok:   $name"
    fi
}

run=("$encode" --model "$model" --input "$input")

# A valid result to compare with, and an old output to protect.
"${run[@]}" --output "$tmp/want.npy" >/dev/null 2>&1 || { echo "FAIL: encode does not run"; exit 1; }
printf 'old output, must survive' >"$tmp/old.txt"

echo "--- an existing output file: replaced on success, keeping its permissions"
mkdir "$tmp/replace"
cp "$tmp/old.txt" "$tmp/replace/y.npy"
chmod 640 "$tmp/replace/y.npy"
ln -s y.npy "$tmp/replace/link.npy"
out=$("${run[@]}" --output "$tmp/replace/link.npy" 2>&1)
rc=$?
if [ "$rc" -eq 0 ] && cmp -s "$tmp/replace/y.npy" "$tmp/want.npy" && [ -L "$tmp/replace/link.npy" ] &&
    [ "$(stat -c %a "$tmp/replace/y.npy")" = 640 ] && [ "$(ls -A "$tmp/replace" | wc -l)" -eq 2 ]; then
    echo "ok:   an output through a symbolic link replaced the file it names; the link stays"
else
    echo "FAIL: replacing an existing output (exit $rc): $(ls -lA "$tmp/replace")"
    sed 's/^/    /' <<<"$out" | head -10
    failures=$((failures + 1))
fi

echo "--- FIFOs: rejected at once, never opened for a blocking read or write"
mkdir "$tmp/fifo"
mkfifo "$tmp/fifo/p"
for opt in model input tokens mask; do
    case $opt in
    model) args=(--model "$tmp/fifo/p" --input "$input") ;;
    input) args=(--model "$model" --input "$tmp/fifo/p") ;;
    tokens) args=(--model "$golden/enc_tokens/model.safetensors" --tokens "$tmp/fifo/p") ;;
    mask) args=(--model "$model" --input "$input" --mask "$tmp/fifo/p") ;;
    esac
    case_ "--$opt FIFO" 1 "$tmp/fifo/p: not a regular file (a FIFO)" "$tmp/fifo" -- \
        "$encode" "${args[@]}"
done
# An output that exists and is not a regular file: refused up front (exit 2, before any work) by
# the programs' rule (examples/cli.c, cli_check_output); the library's writer refuses it too.
out_rule="only a regular file or a new one is written (left unchanged)"
case_ "--output FIFO" 2 "--output $tmp/fifo/p: it names a FIFO, not a regular file; $out_rule" \
    "$tmp/fifo" -- "${run[@]}" --output "$tmp/fifo/p"

echo "--- directories"
mkdir -p "$tmp/dir/d"
cp "$tmp/old.txt" "$tmp/dir/d/inside"
case_ "--output DIRECTORY" 2 "--output $tmp/dir/d: it names a directory, not a regular file" \
    "$tmp/dir" -- "${run[@]}" --output "$tmp/dir/d"
case_ "--output \"\"" 2 "--output needs a file's path, not an empty string" "$tmp/dir" -- \
    bash -c 'cd "$1" && shift && "$@"' _ "$tmp/dir" "$(realpath "$encode")" --model "$model" \
    --input "$input" --output ""
case_ "--model DIRECTORY" 1 "$tmp/dir/d: not a regular file (a directory)" "$tmp/dir" -- \
    "$encode" --model "$tmp/dir/d"
case_ "--output in a missing directory: refused up front" 2 "--output $tmp/dir/none/y.npy: its folder $tmp/dir/none does not exist" \
    "$tmp/dir" -- "${run[@]}" --output "$tmp/dir/none/y.npy"

echo "--- devices and symbolic links to them: refused, neither written nor removed"
mkdir "$tmp/dev"
ln -s /dev/full "$tmp/dev/full-link"
ln -s missing "$tmp/dev/dangling"
case_ "--output LINK-TO-/dev/full" 2 "it names a symbolic link to a character device, not to a regular file" \
    "$tmp/dev" -- "${run[@]}" --output "$tmp/dev/full-link"
case_ "--output DANGLING-LINK" 2 "it names a symbolic link that cannot be followed" "$tmp/dev" -- \
    "${run[@]}" --output "$tmp/dev/dangling"
if mknod "$tmp/dev/full" c 1 7 2>/dev/null; then
    case_ "--output CHARACTER-DEVICE" 2 "it names a character device, not a regular file; $out_rule" \
        "$tmp/dev" -- "${run[@]}" --output "$tmp/dev/full"
else
    echo "skip: --output CHARACTER-DEVICE (mknod is not allowed here)"
fi
[ -c /dev/full ] || { echo "FAIL: /dev/full is gone"; failures=$((failures + 1)); }

echo "--- a FIFO takes --output's name while the file is written: left as it is"
# A new name, and a regular file's (removed, then the FIFO made): encode checked the name up
# front, the library again at create time; the rename must not replace the FIFO (it did).
mkdir "$tmp/race"
cp "$tmp/old.txt" "$tmp/race/old.npy"
for name in new.npy old.npy; do
    out=$(env LD_PRELOAD="$shim" ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
        CLATTN_TEST_FIFO_AT_FSYNC="$tmp/race/$name" timeout 20 "${run[@]}" --output "$tmp/race/$name" 2>&1)
    rc=$?
    if [ "$rc" -eq 1 ] && [ -p "$tmp/race/$name" ] &&
        grep -qF "$tmp/race/$name: it names a FIFO now, which took the name while the file was written: left unchanged" <<<"$out" &&
        [ -z "$(find "$tmp/race" -name '*.tmp-*')" ]; then
        echo "ok:   $name: the FIFO that took the name stays, no temporary file left"
    else
        echo "FAIL: $name: exit $rc (expected 1), $(stat -c %F "$tmp/race/$name"); $(ls -A "$tmp/race")"
        sed 's/^/    /' <<<"$out" | head -5
        failures=$((failures + 1))
    fi
done

echo "--- a full disk and a read-only directory (a small tmpfs)"
mkdir "$tmp/full" "$tmp/ro"
if mount -t tmpfs -o size=64k tmpfs "$tmp/full" 2>/dev/null; then
    mounts+=("$tmp/full")
    cp "$tmp/old.txt" "$tmp/full/y.npy"
    cp "$input" "$tmp/full/input.npy"
    dd if=/dev/zero of="$tmp/full/filler" bs=1k count=64 2>/dev/null # until the disk is full
    case_ "--output on a full disk: the old file stays" 1 "$tmp/full/y.npy: write failed: No space left on device" \
        "$tmp/full" -- "${run[@]}" --output "$tmp/full/y.npy"
    case_ "--output on a full disk, a new file: nothing left behind" 1 "No space left on device" \
        "$tmp/full" -- "${run[@]}" --output "$tmp/full/new.npy"
    case_ "--output = --input on a full disk: refused, the input stays" 2 "is the same file as --input" \
        "$tmp/full" -- "$encode" --model "$model" --input "$tmp/full/input.npy" --output "$tmp/full/input.npy"
else
    echo "skip: full disk (cannot mount a tmpfs here: not root, or no CAP_SYS_ADMIN)"
fi
if mount -t tmpfs -o size=64k tmpfs "$tmp/ro" 2>/dev/null; then
    mounts+=("$tmp/ro")
    cp "$tmp/old.txt" "$tmp/ro/y.npy"
    if mount -o remount,ro "$tmp/ro" 2>/dev/null; then
        case_ "--output in a read-only directory" 1 "cannot create a temporary file next to it: Read-only file system" \
            "$tmp/ro" -- "${run[@]}" --output "$tmp/ro/y.npy"
    else
        echo "skip: read-only directory (cannot remount the tmpfs read-only)"
    fi
else
    echo "skip: read-only directory (cannot mount a tmpfs here: not root, or no CAP_SYS_ADMIN)"
fi

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
