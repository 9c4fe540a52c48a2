#!/bin/bash
# Shared by the clattn-serve tests (test_serve.sh, test_serve_rerank.sh), sourced after they set
# `serve` (the executable) and `tmp` (a scratch folder, removed on exit).

# ---- the scaffolding -----------------------------------------------------------------------

# The servers started (start_server adds each pid): killed on exit, whatever the exit.
servers=()
cleanup() {
    local pid
    for pid in "${servers[@]}"; do
        kill -KILL "$pid" 2>/dev/null
    done
    wait 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 143' TERM INT # meson's timeout: the servers are killed all the same
# ok and bad: a passing and a failing check, the failures counted (expect.sh's count when the
# script sourced it first).
failures=${failures:-0}
ok() { echo "ok:   $*"; }
bad() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}

# ---- the server ----------------------------------------------------------------------------

# start_server LOG ARGS...: starts $serve --port 0 ARGS in the background and waits for the
# "listening on" line (stderr, into LOG; the URL alone must also be stdout's first line, into
# LOG.out), then polls /health until 200 (a cold kernel compile may take a while): sets
# server_pid and url. With `key` set, /health is asked with it. Returns 1 on failure.
start_server() {
    local log=$1 line code deadline=$((SECONDS + 180)) auth=()
    shift
    [ -n "${key:-}" ] && auth=(-H "Authorization: Bearer $key")
    "$serve" --port 0 "$@" >"$log.out" 2>"$log" &
    server_pid=$!
    servers+=("$server_pid")
    url=
    while [ $SECONDS -lt $deadline ]; do
        line=$(grep -m 1 -o 'clattn-serve: listening on http://[^ ]*' "$log")
        if [ -n "$line" ]; then
            url=${line#clattn-serve: listening on }
            break
        fi
        if ! kill -0 "$server_pid" 2>/dev/null; then
            bad "$serve $* exited before listening:"
            sed 's/^/    /' "$log" | tail -20
            return 1
        fi
        sleep 0.1
    done
    [ -n "$url" ] || { bad "$serve $* printed no 'listening on' line in 180 s"; return 1; }
    # The same URL alone on stdout, for scripts (printed right after the stderr line).
    for _ in 1 2 3 4 5 6 7 8 9 10; do [ -s "$log.out" ] && break; sleep 0.1; done
    [ "$(head -n 1 "$log.out")" = "$url" ] ||
        bad "$serve $*: stdout's first line is '$(head -c 100 "$log.out")', not the URL $url"
    # Until the warm-up pass has run /health answers 503, then 200; nothing else.
    while [ $SECONDS -lt $deadline ]; do
        code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "${auth[@]}" "$url/health")
        case $code in
        200) ok "$serve $* listens on $url; /health 200"; return 0 ;;
        503) ;;
        *) bad "/health answered $code while warming up (503 or 200 expected)"; return 1 ;;
        esac
        sleep 0.2
    done
    bad "/health not 200 within 180 s"
    return 1
}

# stop_server PID SIGNAL WHAT: the server exits 0 within 35 s (its drain is bounded by 30 s).
stop_server() {
    local pid=$1 signal=$2 rc tenths=0
    kill "-$signal" "$pid"
    # Running until it is gone or a zombie (bash may reap it meanwhile: wait still has its status).
    while [ $tenths -lt 350 ] && kill -0 "$pid" 2>/dev/null &&
        [ "$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)" != Z ]; do
        sleep 0.1
        tenths=$((tenths + 1))
    done
    if [ $tenths -ge 350 ]; then
        bad "$3: still running 35 s after SIG$signal"
        kill -KILL "$pid"
        wait "$pid" 2>/dev/null
        return
    fi
    wait "$pid"
    rc=$?
    [ "$rc" -eq 0 ] && ok "$3: SIG$signal, exit 0" || bad "$3: SIG$signal, exit $rc (0 expected)"
}

# ---- requests --------------------------------------------------------------------------------

# call METHOD ROUTE [CURL ARGS...]: $code is the HTTP status (000: no answer), the body is in
# $tmp/body and the headers in $tmp/headers. With `key` set, it is sent as the bearer token.
call() {
    local method=$1 route=$2 auth=()
    shift 2
    [ -n "${key:-}" ] && auth=(-H "Authorization: Bearer $key")
    code=$(curl -s -X "$method" -o "$tmp/body" -D "$tmp/headers" -w '%{http_code}' --max-time 60 \
        "${auth[@]}" "$@" "$url$route")
}
# post ROUTE JSON [CURL ARGS...]: POSTs JSON (given as a string) as application/json.
post() {
    local route=$1
    printf '%s' "$2" >"$tmp/request"
    shift 2
    call POST "$route" -H 'Content-Type: application/json' --data-binary @"$tmp/request" "$@"
}
# want CODES WHAT: the last status is one of CODES ("200", "400 422").
want() {
    if [[ " $1 " == *" $code "* ]]; then
        ok "$2 -> $code"
        return 0
    fi
    bad "$2 -> $code (expected $1): $(head -c 300 "$tmp/body")"
    return 1
}
