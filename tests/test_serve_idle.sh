#!/bin/bash
# clattn-serve and idle connections (sockets that connect and send nothing), on the tiny random
# BERT of tests/golden, its defaults otherwise (--max-concurrent-requests 512):
#   - 700 idle sockets, more than the requests allowed at once: a good request still answers
#     200 (or 429) within 3 s;
#   - 1000 idle sockets held 60 s (the server runs with --request-timeout 120 so that it keeps
#     them): every one still open at the end, good requests answered within 3 s all along, and
#     the server's resident memory (VmRSS) grows by at most 64 KiB per socket.
# The test opens 1000 sockets itself: it raises its own open-file limit to the hard one, which
# must allow 1100. It waits most of its minute (suite 'serve', run in parallel with others).
# usage: test_serve_idle.sh SERVE GOLDEN_DIR
set -u
serve=$1 golden=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/clattn-serve-idle.XXXXXX")
# the cleanup on exit, ok and bad; start_server
source "$here/serve_lib.sh"
source "$here/tiny_corpus.sh"

make_tiny_embedder "$tmp/tiny" "$golden"
start_server "$tmp/idle.log" --model "$tmp/tiny" --request-timeout 120 || exit 1
grep -h 'at most [0-9]* connections' "$tmp/idle.log"
python3 - "$url" "$server_pid" <<'EOF' || failures=$((failures + 1))
import json, resource, socket, sys, time, urllib.error, urllib.parse, urllib.request

url, pid = sys.argv[1], int(sys.argv[2])
IDLE_FIRST, IDLE_ALL, HOLD_S, ANSWER_S, KIB_EACH = 700, 1000, 60, 3.0, 64
failures = 0


def check(condition, what):
    global failures
    print(("ok:   " if condition else "FAIL: ") + what, flush=True)
    failures += 0 if condition else 1


def rss_kib():
    with open("/proc/%d/status" % pid) as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))


def good_request(what):
    """A good request: 200 (or 429, the request limit) within ANSWER_S seconds."""
    body = json.dumps({"input": ["the cat is on the mat", "x"]}).encode()
    start = time.monotonic()
    try:
        request = urllib.request.Request(url + "/v1/embeddings", body,
                                         {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as r:
            status, rows = r.status, len(json.load(r)["data"])
    except urllib.error.HTTPError as e:
        status, rows = e.code, 0
    except OSError as e:  # closed without an answer, reset, timed out
        status, rows = repr(e), 0
    seconds = time.monotonic() - start
    check((status == 200 and rows == 2 or status == 429) and seconds <= ANSWER_S,
          "%s: a good request -> %s in %.2f s (200 or 429 within %g s)"
          % (what, status, seconds, ANSWER_S))


soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
want = IDLE_ALL + 100
if hard != resource.RLIM_INFINITY and hard < want:
    check(False, "this test opens %d sockets: the hard open-file limit is %d (ulimit -Hn)"
          % (IDLE_ALL, hard))
    sys.exit(1)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else want,
                                            hard))
host, port = urllib.parse.urlparse(url).hostname, urllib.parse.urlparse(url).port

for _ in range(3):  # the first requests' allocations before the baseline
    good_request("no idle socket")
before = rss_kib()
start = time.monotonic()
idle = [socket.create_connection((host, port)) for _ in range(IDLE_FIRST)]
print("%d idle sockets opened in %.2f s" % (IDLE_FIRST, time.monotonic() - start), flush=True)
good_request("%d idle sockets" % IDLE_FIRST)
idle += [socket.create_connection((host, port)) for _ in range(IDLE_ALL - IDLE_FIRST)]
good_request("%d idle sockets" % IDLE_ALL)
held_since = time.monotonic()
while time.monotonic() - held_since < HOLD_S:
    time.sleep(min(10, HOLD_S - (time.monotonic() - held_since)))
    if time.monotonic() - held_since < HOLD_S:
        good_request("%d idle sockets, %.0f s on" % (IDLE_ALL, time.monotonic() - held_since))
after = rss_kib()
good_request("%d idle sockets held %d s" % (IDLE_ALL, HOLD_S))
# An idle socket the server kept has nothing to read; one it closed reads end of stream.
open_sockets = 0
for s in idle:
    s.setblocking(False)
    try:
        open_sockets += s.recv(1) != b""
    except BlockingIOError:
        open_sockets += 1
    except OSError:
        pass
check(open_sockets == IDLE_ALL, "%d of %d idle sockets still open after %d s"
      % (open_sockets, IDLE_ALL, HOLD_S))
each = (after - before) / IDLE_ALL
check(each <= KIB_EACH, "the server's resident memory: %d KiB before, %d KiB with %d idle sockets "
      "held %d s: %.1f KiB each (at most %d)" % (before, after, IDLE_ALL, HOLD_S, each, KIB_EACH))
for s in idle:
    s.close()
good_request("the idle sockets closed")
sys.exit(1 if failures else 0)
EOF
stop_server "$server_pid" TERM "the server"
echo "--- $failures failure(s)"
[ "$failures" -eq 0 ]
