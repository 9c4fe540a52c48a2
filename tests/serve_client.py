#!/usr/bin/env python3
"""clattn-serve driven by the official `openai` Python client, and a load test.

usage: serve_client.py --serve SERVE --embed EMBED --venv DIR
                       [--requests N] [--warmup N] [--clients C] [--pool N]

On the real all-MiniLM-L6-v2 (tools/fetch-model.sh; CLATTN_TEST_MODEL_DIR overrides), against a
server it starts (`SERVE --model DIR --port 0`, the port read from its "listening on" line,
/health polled until 200):

1. openai.OpenAI(base_url=.../v1).embeddings.create with one string, a list, encoding_format
   "float" and "base64" (and none: the client then asks for base64 itself) and `dimensions`; an
   over-long text, an empty list, a body of 7 MB (over the default --payload-limit: the client
   sends it whole before it reads, and gets the 413, not a broken connection) and another model
   name (404 model_not_found) raise the client's own errors. Every vector is the same bytes as
   `embed --output` gives for the same text (with `dimensions`: embed's row cut and
   re-normalised, to 1e-6).
2. A load test: a pool of distinct texts (1-200 words, mostly short); each text's single-text
   result (a request of that text alone) must equal embed's row; then C concurrent clients
   (threads, default 32) send a warm-up of W requests and then N (default 2000) requests of 1-16
   texts drawn from the pool, and every row of every answer must be that text's single-text
   result, with zero errors (the client's retries are off: a 429 or 5xx counts). The server's
   resident memory (VmRSS of /proc/PID/status) after the load must stay within 10 % of its
   value after the warm-up.
3. SIGTERM: the server exits 0 within 35 s.

The client comes from PyPI: DIR is a venv (created, or reused when it imports openai) where
`pip install openai` runs; the script then re-runs itself there. When PyPI cannot be reached the
test skips (exit 77) saying why, unless CLATTN_REQUIRE_SERVE_CLIENT=1 (.ci/run), which fails it.
Without the real model it skips too, unless CLATTN_REQUIRE_REAL_MODEL=1.
Exit status: 0 passed, 1 failed, 77 skipped.
"""
import argparse
import base64
import math
import os
import random
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

SKIP = 77


def say(message):
    print(message, flush=True)


def skip_or_fail(reason, require_variable):
    if os.environ.get(require_variable) == "1":
        say("FAIL: %s (%s=1: required)" % (reason, require_variable))
        sys.exit(1)
    say("SKIP: " + reason)
    sys.exit(SKIP)


# ---- the venv with the official client ----------------------------------------------------------

def venv_python(venv):
    return os.path.join(venv, "bin", "python")


def imports_openai(python):
    return os.path.exists(python) and subprocess.run(
        [python, "-c", "import openai"], stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL).returncode == 0


def enter_venv(args):
    """Re-runs this script in the venv, creating it and installing openai first if needed."""
    python = venv_python(args.venv)
    if not imports_openai(python):
        if not os.path.exists(python):
            say("creating the venv " + args.venv)
            made = subprocess.run([sys.executable, "-m", "venv", "--clear", args.venv])
            if made.returncode != 0:
                say("FAIL: %s -m venv %s failed (Debian: apt-get install python3-venv; "
                    "tools/install-deps.sh does)" % (sys.executable, args.venv))
                sys.exit(1)
        say("pip install openai (PyPI) into " + args.venv)
        pip = subprocess.run([python, "-m", "pip", "install", "--disable-pip-version-check",
                              "--timeout", "30", "--retries", "2", "openai>=1.0"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if pip.returncode != 0:
            tail = "\n".join(pip.stdout.strip().splitlines()[-5:])
            skip_or_fail("cannot install the openai client from PyPI (offline?):\n" + tail,
                         "CLATTN_REQUIRE_SERVE_CLIENT")
    os.execv(python, [python, os.path.abspath(__file__), "--in-venv"] + sys.argv[1:])


# ---- references ---------------------------------------------------------------------------------

def read_npy_rows(path):
    """The rows of a float32 [rows, cols] .npy file as bytes (embed --output writes version 1)."""
    import ast
    with open(path, "rb") as f:
        data = f.read()
    assert data[:6] == b"\x93NUMPY", path
    (header_len,) = struct.unpack_from("<H", data, 8)
    header = ast.literal_eval(data[10:10 + header_len].decode("latin-1"))
    assert header["descr"] == "<f4" and not header["fortran_order"], header
    rows, cols = header["shape"]
    body = data[10 + header_len:]
    return [body[r * cols * 4:(r + 1) * cols * 4] for r in range(rows)]


def embed_reference(embed, model, texts, workdir, name):
    """embed --output of the texts (one a line): their rows as float32 bytes."""
    path = os.path.join(workdir, name + ".txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in texts))
    out = os.path.join(workdir, name + ".npy")
    subprocess.run([embed, "--model", model, "--input", path, "--output", out], check=True)
    return read_npy_rows(out)


def as_bytes(vector):
    """A client's embedding as float32 bytes: a list of Python floats (read from float32, so
    exact), or the base64 string that the client hands back as it is when base64 was asked."""
    if isinstance(vector, str):
        return base64.b64decode(vector)
    return struct.pack("<%df" % len(vector), *vector)


def as_floats(vector):
    raw = as_bytes(vector)
    return struct.unpack("<%df" % (len(raw) // 4), raw)


def cut_and_renormalize(row, dims):
    values = struct.unpack("<%df" % (len(row) // 4), row)[:dims]
    norm = math.sqrt(sum(x * x for x in values))
    return [x / max(norm, 1e-12) for x in values]


WORDS = ("the of and to in is was for on that with as by at from it an be this are a model "
         "text query search vector server batch token embedding sentence retrieval document "
         "café naïve résumé über straße 東京 42 3.14 2024 hello world, fox. dog! quick brown "
         "lazy jumps over river mountain science history music data learning").split()


def make_pool(count, rng):
    """Distinct texts: ~70 % of 1-15 words, ~25 % of 16-60, ~5 % of 61-200."""
    pool, seen = [], set()
    while len(pool) < count:
        r = rng.random()
        n = rng.randint(1, 15) if r < 0.70 else rng.randint(16, 60) if r < 0.95 else \
            rng.randint(61, 200)
        text = " ".join(rng.choice(WORDS) for _ in range(n))
        if text not in seen:
            seen.add(text)
            pool.append(text)
    return pool


# ---- the server ---------------------------------------------------------------------------------

class Server:
    def __init__(self, serve, model, workdir):
        self.log_path = os.path.join(workdir, "serve.log")
        self.log = open(self.log_path, "wb")
        # The URL is stdout's first line (and the stderr line's end).
        self.process = subprocess.Popen([serve, "--model", model, "--port", "0"],
                                        stdout=subprocess.PIPE, stderr=self.log)
        self.url = None

    def log_tail(self, lines=20):
        with open(self.log_path, "rb") as f:
            return "\n".join(f.read().decode(errors="replace").splitlines()[-lines:])

    def wait_ready(self, seconds=180):
        """The URL on stdout, then /health 200 (503 meanwhile); a cold compile is slow."""
        deadline = time.time() + seconds
        self.url = self.process.stdout.readline().decode().strip()
        if not self.url.startswith("http://"):
            raise RuntimeError("the server printed %r, not its URL, on stdout:\n%s"
                               % (self.url, self.log_tail()))
        while True:
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=10) as r:
                    if r.status == 200:
                        return
            except urllib.error.HTTPError as e:
                if e.code != 503:
                    raise RuntimeError("/health answered %d while warming up" % e.code)
            except OSError:
                pass
            if self.process.poll() is not None or time.time() > deadline:
                raise RuntimeError("/health not 200 in %d s:\n%s" % (seconds, self.log_tail()))
            time.sleep(0.2)

    def rss_kib(self):
        with open("/proc/%d/status" % self.process.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    def terminate(self, seconds=35):
        """SIGTERM; returns the exit status, or None when it did not exit in time."""
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(seconds)
        except subprocess.TimeoutExpired:
            return None

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


# ---- the checks ---------------------------------------------------------------------------------

class Checks:
    def __init__(self):
        self.failures = 0

    def expect(self, condition, what):
        if condition:
            say("ok:   " + what)
        else:
            say("FAIL: " + what)
            self.failures += 1
        return condition


def client_checks(openai, client, name, checks, embed, model, workdir):
    texts = ["A man is eating food.", "A man is riding a horse.", "",
             "Héllo, wörld! 東京 and naïve café", "The quick brown fox jumps over the lazy dog."]
    ref = embed_reference(embed, model, texts, workdir, "client")

    r = client.embeddings.create(model=name, input=texts[0])
    checks.expect(len(r.data) == 1 and as_bytes(r.data[0].embedding) == ref[0],
                  "embeddings.create(one string): embed's bytes (the client's default, base64)")
    checks.expect(r.usage.prompt_tokens == r.usage.total_tokens > 0 and r.model == name,
                  "usage %s, model %r" % (r.usage, r.model))
    for encoding in ("float", "base64"):
        r = client.embeddings.create(model=name, input=texts, encoding_format=encoding)
        checks.expect([d.index for d in r.data] == list(range(len(texts))) and
                      [as_bytes(d.embedding) for d in r.data] == ref,
                      "embeddings.create(%d strings, encoding_format=%r): embed's bytes"
                      % (len(texts), encoding))
    for encoding in ("float", "base64"):
        r = client.embeddings.create(model=name, input=texts, dimensions=64,
                                     encoding_format=encoding)
        diff = max(abs(a - b) for d, row in zip(r.data, ref)
                   for a, b in zip(as_floats(d.embedding), cut_and_renormalize(row, 64)))
        checks.expect(all(len(as_floats(d.embedding)) == 64 for d in r.data) and diff <= 1e-6,
                      "embeddings.create(dimensions=64, %s): embed's rows cut and re-normalised "
                      "(max abs difference %.2g)" % (encoding, diff))
    try:
        client.embeddings.create(model=name, input=" ".join(["word"] * 300))
        checks.expect(False, "a text of 302 tokens raises")
    except openai.APIStatusError as e:
        checks.expect(e.status_code == 413 and "256" in str(e),
                      "a text of 302 tokens: %s %d: %s" % (type(e).__name__, e.status_code, e))
    try:
        client.embeddings.create(model=name, input=[])
        checks.expect(False, "an empty list raises")
    except openai.BadRequestError as e:
        checks.expect(e.status_code == 400, "an empty list: BadRequestError: %s" % e)
    try:
        client.embeddings.create(model=name, input="word " * 1400000)
        checks.expect(False, "a body of 7 MB raises")
    except openai.APIStatusError as e:
        checks.expect(e.status_code == 413 and "2000000" in str(e),
                      "a body of 7 MB: %s %d: %s" % (type(e).__name__, e.status_code, e))
    except openai.APIConnectionError as e:
        checks.expect(False, "a body of 7 MB: no answer (%s: %s): the 413 expected"
                      % (type(e).__name__, e))
    try:
        client.embeddings.create(model="text-embedding-3-small", input="A man is eating food.")
        checks.expect(False, "another model name raises")
    except openai.NotFoundError as e:
        checks.expect(e.status_code == 404 and e.code == "model_not_found",
                      "model text-embedding-3-small: NotFoundError, code %r: %s" % (e.code, e))


def load_test(openai, url, name, server, checks, embed, model, workdir, args):
    rng = random.Random(21)
    pool = make_pool(args.pool, rng)
    ref = embed_reference(embed, model, pool, workdir, "pool")
    say("--- single-text results of the %d pool texts (one request each)" % len(pool))
    client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=120)
    single = [as_bytes(client.embeddings.create(model=name, input=t).data[0].embedding)
              for t in pool]
    same = sum(a == b for a, b in zip(single, ref))
    checks.expect(same == len(pool), "%d of %d single-text results equal embed's rows"
                  % (same, len(pool)))

    def run(requests, label):
        """C threads, each with its own client, share the requests; counts errors."""
        plans = [[rng.randrange(len(pool)) for _ in range(rng.randint(1, 16))]
                 for _ in range(requests)]
        lock = threading.Lock()
        stats = {"errors": 0, "mismatches": 0, "texts": 0, "latencies": [], "first_error": None}
        queue = list(range(requests))

        def worker():
            c = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=120)
            while True:
                with lock:
                    if not queue:
                        return
                    plan = plans[queue.pop()]
                start = time.monotonic()
                try:
                    r = c.embeddings.create(model=name, input=[pool[i] for i in plan])
                    rows = [as_bytes(d.embedding) for d in r.data]
                    bad = len(rows) != len(plan) or any(
                        row != single[i] for row, i in zip(rows, plan))
                    error = None
                except Exception as e:  # every failure counts, whatever the client raises
                    bad, error = False, e
                with lock:
                    stats["latencies"].append(time.monotonic() - start)
                    stats["texts"] += len(plan)
                    if error is not None:
                        stats["errors"] += 1
                        stats["first_error"] = stats["first_error"] or repr(error)
                    elif bad:
                        stats["mismatches"] += 1

        start = time.monotonic()
        threads = [threading.Thread(target=worker) for _ in range(args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        seconds = time.monotonic() - start
        lat = sorted(stats["latencies"])
        say("%s: %d requests, %d texts, %d clients, %.1f s, %.0f texts/s, %.0f requests/s, "
            "latency p50 %.0f ms p99 %.0f ms; %d errors, %d with other bytes"
            % (label, requests, stats["texts"], args.clients, seconds, stats["texts"] / seconds,
               requests / seconds, 1000 * lat[len(lat) // 2],
               1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))], stats["errors"],
               stats["mismatches"]))
        if stats["first_error"]:
            say("      first error: " + stats["first_error"])
        return stats

    say("--- warm-up load")
    warm = run(args.warmup, "warm-up")
    rss_warm = server.rss_kib()
    say("--- load test")
    load = run(args.requests, "load")
    rss_after = server.rss_kib()
    checks.expect(warm["errors"] == 0 and load["errors"] == 0,
                  "zero errors in %d requests" % (args.warmup + args.requests))
    checks.expect(warm["mismatches"] == 0 and load["mismatches"] == 0,
                  "every row of every answer is its text's single-text result, byte for byte")
    checks.expect(rss_after <= 1.10 * rss_warm,
                  "server RSS after the load %.1f MiB, after the warm-up %.1f MiB (%+.1f %%, "
                  "at most +10 %%)" % (rss_after / 1024, rss_warm / 1024,
                                       100.0 * (rss_after - rss_warm) / rss_warm))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--serve", required=True)
    parser.add_argument("--embed", required=True)
    parser.add_argument("--venv", required=True)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--pool", type=int, default=400)
    parser.add_argument("--in-venv", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.serve, args.embed = os.path.abspath(args.serve), os.path.abspath(args.embed)

    model = os.environ.get("CLATTN_TEST_MODEL_DIR") or os.path.join(
        os.environ.get("CLATTN_MODEL_CACHE") or os.path.expanduser("~/.cache/clattn"),
        "all-MiniLM-L6-v2")
    if not os.path.isfile(os.path.join(model, "tokenizer.json")):
        skip_or_fail("real model not found at %s: run tools/fetch-model.sh" % model,
                     "CLATTN_REQUIRE_REAL_MODEL")
    if not args.in_venv:
        enter_venv(args)
    import openai
    say("openai %s (the official client, from PyPI)" % openai.__version__)

    # meson's timeout sends SIGTERM: leave through the finally below, which kills the server.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    checks = Checks()
    with tempfile.TemporaryDirectory(prefix="clattn-serve-client.") as workdir:
        server = Server(args.serve, model, workdir)
        try:
            server.wait_ready()
            say("server at %s (pid %d)" % (server.url, server.process.pid))
            name = "all-MiniLM-L6-v2"
            client = openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0,
                                   timeout=120)
            name = client.models.list().data[0].id
            say("--- the official client")
            client_checks(openai, client, name, checks, args.embed, model, workdir)
            load_test(openai, server.url, name, server, checks, args.embed, model, workdir, args)
            rc = server.terminate()
            checks.expect(rc == 0, "SIGTERM: exit status %s (0 within 35 s expected)" % rc)
        except Exception as e:
            checks.expect(False, "%s: %s\nserver log:\n%s" % (type(e).__name__, e,
                                                              server.log_tail()))
        finally:
            server.kill()
    say("--- %d failure(s)" % checks.failures)
    sys.exit(1 if checks.failures else 0)


if __name__ == "__main__":
    main()
