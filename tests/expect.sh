# Sourced by the end-to-end test scripts: `expect` and the failure count.
failures=0

# expect STATUS NEEDLE -- COMMAND...: runs COMMAND, checks its exit status and that NEEDLE occurs
# in its output (stdout and stderr together); counts a failure otherwise.
expect() {
    local status=$1 needle=$2
    shift 3
    local out rc
    out=$("$@" 2>&1)
    rc=$?
    if [ "$rc" -ne "$status" ] || ! grep -qF -- "$needle" <<<"$out"; then
        echo "FAIL: $* -> exit $rc (expected $status), output must contain: $needle"
        sed 's/^/    /' <<<"$out" | head -20
        failures=$((failures + 1))
    else
        echo "ok:   $*"
    fi
}
