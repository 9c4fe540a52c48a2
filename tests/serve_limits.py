#!/usr/bin/env python3
"""Clients for tests/test_serve.sh's checks of clattn-serve's limits and stop (the Python standard
library only). Each prints one "ok:" or "FAIL:" line per check; exit status 1 when one failed.

  serve_limits.py admission URL KEY
      On a server with --api-key KEY --max-concurrent-requests 2: two requests admitted (their
      headers and 2 bytes of their body, then nothing) and six refused at their headers whose
      bodies are being read (no key, a wrong key, an unknown route, a wrong method, two past the
      limit): a good request gets 429. The two admitted clients leave: a good request gets 200
      within 5 s, though the six refused ones still hold their connections. Each of those then
      sends the rest of its body and gets its answer (401, 401, 404, 405, 429, 429).
  serve_limits.py threads URL PID KEY
      The answer threads' stacks, through the server's address-space limit (RLIMIT_AS, set with
      prlimit): with 256 KiB of address space left no thread can start, and the request gets
      503 with Retry-After (not 500); with 6 MiB left one can (its stack is 1 MiB; glibc's
      default, the 8 MiB stack limit, would not fit): 200. The server must run with
      GLIBC_TUNABLES=glibc.pthread.stack_cache_size=0 (so that every thread maps a new stack),
      and must have run the model once before (its own threads started).
  serve_limits.py hold-refused URL
      A request refused at its headers (no key) that sends 2 bytes of its 1000-byte body and
      then nothing; prints "sent" a second after the bytes are out (the server has read the
      headers by then), then how the connection ended.
  serve_limits.py stop URL PID CLIENTS SECONDS
      CLIENTS connections (accepted before anything is sent), each a request of 64 texts; the
      server gets SIGTERM SECONDS after they are sent. Every client must get an answer, 200
      or 503 (the server ran with --shutdown-timeout 0: those still queued get 503), none a
      closed connection. Prints "503s: N" last.
"""
import json
import os
import resource
import signal
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

failures = 0


def check(condition, what):
    global failures
    print(("ok:   " if condition else "FAIL: ") + what, flush=True)
    failures += 0 if condition else 1


def post(url, key, body=None):
    """A good /v1/embeddings request: (status, headers, body); status a string without answer."""
    body = json.dumps(body or {"input": "a cat"}).encode()
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    request = urllib.request.Request(url + "/v1/embeddings", body, headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()
    except OSError as e:  # closed without an answer, reset, timed out
        return repr(e), {}, b""


def connect(url):
    u = urllib.parse.urlparse(url)
    return socket.create_connection((u.hostname, u.port), timeout=30)


def hold(url, path, key):
    """A POST's headers and the first 2 bytes of its 1000-byte body, then nothing: its socket."""
    s = connect(url)
    auth = b"Authorization: Bearer %s\r\n" % key.encode() if key else b""
    s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n%s"
              b"Content-Length: 1000\r\n\r\n{\"" % (path.encode(), auth))
    return s


def read_answer(s):
    """The status and the headers of the answer on s (the status "closed" when none came)."""
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            more = s.recv(65536)
            if not more:
                break
            data += more
    except OSError:
        pass
    lines = data.split(b"\r\n\r\n", 1)[0].decode(errors="replace").split("\r\n")
    status = lines[0][9:12] if lines[0].startswith("HTTP/1.1 ") else "closed"
    headers = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
    return status, headers


def admission(url, key):
    admitted = [hold(url, "/v1/embeddings", key) for _ in range(2)]
    time.sleep(0.5)  # admitted before the others
    refused = [(hold(url, "/v1/embeddings", None), "401", "no key"),
               (hold(url, "/embed", "wrong"), "401", "a wrong key"),
               (hold(url, "/v1/no-such-route", key), "404", "an unknown route"),
               (hold(url, "/health", key), "405", "POST /health"),
               (hold(url, "/v1/embeddings", key), "429", "past the limit"),
               (hold(url, "/embed", key), "429", "past the limit (TEI)")]
    time.sleep(0.5)
    status = post(url, key)[0]
    check(status == 429, "2 requests admitted (--max-concurrent-requests 2), 6 refused: a good "
          "request -> %s (429)" % status)
    for s in admitted:
        s.close()
    deadline = time.monotonic() + 5
    while True:
        status = post(url, key)[0]
        if status != 429 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    check(status == 200, "the 2 admitted clients gone, the 6 refused ones still sending their "
          "bodies: a good request -> %s (200: refused requests do not count)" % status)
    for s, want, what in refused:
        s.sendall(b" " * 998)
        status, headers = read_answer(s)
        s.close()
        check(status == want and (want != "429" or headers.get("retry-after") == "1"),
              "the refused request (%s), its body then sent -> %s%s (%s)"
              % (what, status, ", Retry-After " + headers["retry-after"]
                 if "retry-after" in headers else "", want))


def vm_size(pid):
    with open("/proc/%d/status" % pid) as f:
        return 1024 * next(int(l.split()[1]) for l in f if l.startswith("VmSize:"))


def threads(url, pid, key):
    status = post(url, key)[0]
    check(status == 200, "a first request (the model's own threads started) -> %s" % status)
    limits = resource.prlimit(pid, resource.RLIMIT_AS)
    try:
        resource.prlimit(pid, resource.RLIMIT_AS, (vm_size(pid) + (256 << 10), limits[1]))
        status, headers, body = post(url, key)
        check(status == 503 and headers.get("Retry-After") == "1" and b"thread" in body,
              "256 KiB of address space left, no room for an answer thread -> %s, Retry-After "
              "%s: %.200r (503, 1)" % (status, headers.get("Retry-After"), body))
        # 6 MiB: room for the 1 MiB stack and what the request's work maps (an OpenCL
        # implementation may map more under load, e.g. Mesa's threads), not for glibc's 8 MiB.
        resource.prlimit(pid, resource.RLIMIT_AS, (vm_size(pid) + (6 << 20), limits[1]))
        status, headers, body = post(url, key)
        check(status == 200, "6 MiB of address space left: an answer thread's stack fits -> "
              "%s: %.200r" % (status, body))
    finally:
        resource.prlimit(pid, resource.RLIMIT_AS, limits)
    status = post(url, key)[0]
    check(status == 200, "the address-space limit restored -> %s" % status)


def hold_refused(url):
    s = hold(url, "/v1/embeddings", None)
    # The bytes are out, but the server may not have read the headers yet; a stop before that
    # closes a connection that never became a request (and logs none). A second is ample.
    time.sleep(1.0)
    print("sent", flush=True)
    start = time.monotonic()
    s.settimeout(60)
    status = read_answer(s)[0]
    print("%s after %.1f s" % (status, time.monotonic() - start), flush=True)


def stop(url, pid, clients, seconds):
    text = " ".join(["the cat is on the mat"] * 5)  # 52 tokens, the tiny model takes 64
    body = json.dumps({"input": [text] * 64}).encode()
    request = (b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n" % len(body)) + body
    sockets = [connect(url) for _ in range(clients)]
    time.sleep(0.5)  # accepted: the stop closes the listening socket only
    for s in sockets:
        s.sendall(request)
    time.sleep(seconds)
    os.kill(pid, signal.SIGTERM)
    statuses = {}
    for s in sockets:
        s.settimeout(60)
        status = read_answer(s)[0]
        s.close()
        statuses[status] = statuses.get(status, 0) + 1
    check(set(statuses) <= {"200", "503"}, "%d requests, SIGTERM %g s after, --shutdown-timeout "
          "0: every one answered 200 or 503, none closed without an answer: %s"
          % (clients, seconds, " ".join("%s x%d" % kv for kv in sorted(statuses.items()))))
    print("503s: %d" % statuses.get("503", 0))


def main():
    commands = {"admission": (admission, 2), "threads": (threads, 3),
                "hold-refused": (hold_refused, 1), "stop": (stop, 4)}
    if len(sys.argv) < 2 or sys.argv[1] not in commands or len(sys.argv) - 2 != commands[sys.argv[1]][1]:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    args = sys.argv[2:]
    if sys.argv[1] == "threads":
        args[1] = int(args[1])
    if sys.argv[1] == "stop":
        args = [args[0], int(args[1]), int(args[2]), float(args[3])]
    commands[sys.argv[1]][0](*args)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
