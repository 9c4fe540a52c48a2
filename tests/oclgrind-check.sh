#!/bin/sh
# Runs a test under oclgrind with data-race, uninitialised-value, memory and API checks, and fails
# if oclgrind reported anything: oclgrind exits with the program's own status even after it has
# reported errors, so its diagnostics are looked for on stderr (each names a "Kernel:" or, for API
# errors, a "Function:", or is an "OCLGRIND FATAL ERROR"). oclgrind's --log option writes nothing
# in version 21.10, hence the capture.
#
# -cl-opt-disable: oclgrind 21.10 (Debian 12) cannot interpret the LLVM `freeze` instruction that
# its optimiser emits, and aborts the kernel under --uninitialized; unoptimised code has none.
#
# KEEP_BUFFERS: a library preloaded ahead of oclgrind's runtime, see
# tests/oclgrind_keep_buffers.c for why; "-" for none (then a buffer used after its last release
# is reported, but so may be a buffer created after another was freed: see
# tests/test_layers_small.c for a test that is safe from that).
#
# usage: oclgrind-check.sh OCLGRIND KEEP_BUFFERS_LIB|- TEST [ARGS...]
oclgrind=$1
keep_buffers=$2
shift 2
errors=$(mktemp "${TMPDIR:-/tmp}/clattn-oclgrind.XXXXXX") || exit 1
if [ "$keep_buffers" != "-" ]; then
    set -- sh -c 'LD_PRELOAD="$0${LD_PRELOAD:+:$LD_PRELOAD}" exec "$@"' "$keep_buffers" "$@"
fi
CLATTN_TEST_SMALL=1 "$oclgrind" --data-races --uninitialized --check-api \
    --build-options -cl-opt-disable "$@" 2>"$errors"
status=$?
cat "$errors" >&2
if grep -qE '^	(Kernel|Function): |OCLGRIND FATAL ERROR|Oclgrind - ' "$errors"; then
    echo "oclgrind-check: oclgrind reported errors (above); failing" >&2
    status=1
fi
rm -f "$errors"
exit $status
