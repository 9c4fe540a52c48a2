#!/usr/bin/env python3
"""Serving throughput and latency: clattn-serve against the offline `embed` and Infinity.

usage: serve_bench.py --serve build/examples/serve --embed build/examples/embed --model DIR
                      [--count N] [--concurrency 1,8,32] [--repeat R]
                      [--infinity-venv DIR | --no-infinity] [--threads T] [--out bench/results]

Not a test. One command measures, on the same machine and in the same run, with one
sentence-transformers model (made for all-MiniLM-L6-v2; `tools/fetch-model.sh` prints its
folder) and two workloads of N texts each (default 1000):

  short   retrieval queries: 5-15 words from bench/embed_bench.py's word list (seeded)
  mixed   bench/embed_bench.py's make_corpus: sentence-like texts of mixed lengths (~33 tokens)

through three engines:

  embed        `examples/embed --input - --output E.npy --json` on all N texts at once (the
               offline in-memory path: the batching a server could at best reach); texts/s is
               embed's own `seconds` (model loading excluded)
  clattn-serve `examples/serve --model DIR --port 0 --auto-truncate` (else its defaults), POST
               /v1/embeddings with one text per request, encoding_format base64
  infinity     Infinity (PyPI `infinity-emb[server,torch]`, its torch engine on the CPU) serving
               the same model folder (`infinity_emb v2 --model-id DIR`, HF_HUB_OFFLINE=1: no
               download), POST /embeddings with one text per request, base64 as well

Each server gets the same load: C client threads (C = 1, 8, 32), each with one keep-alive HTTP
connection (http.client, the standard library), share the N texts, one request per text, after
a warm-up of 64 requests. texts/s is N over the wall time of the pass; p50 and p99 are the
requests' latencies at the client. The client runs on the same machine (its CPU time is
reported: it takes CPU from the server it measures, the same for both servers). Every engine
has T threads (default 2): PoCL's POCL_CPU_MAX_CU_NUM, torch's OMP_NUM_THREADS /
MKL_NUM_THREADS. Each cell is the median over R passes (default 1).

Cross-check: clattn-serve's vectors must equal embed's byte for byte (batch invariance), and
Infinity's must agree with embed's to 1e-4 (another implementation, float32 rounding); a
mismatch stops the script (exit 1) before anything is written.

Infinity lives in a venv (--infinity-venv, default ~/.cache/clattn/infinity-venv) that the
script creates and fills from PyPI when it cannot import infinity_emb (torch, several GB). When
it cannot be installed or does not start, the script says why and reports the rest.

Writes OUT/serve.json (everything) and OUT/serve.md (the table, the machine, versions, the load
average during the run, and a section for the README).
"""
import argparse
import base64
import http.client
import json
import os
import platform
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from embed_bench import WORDS, make_corpus  # noqa: E402  (the same generator as embed's bench)

import random  # noqa: E402

INFINITY_SPEC = "infinity-emb[server,torch]==0.0.78"
WARMUP_REQUESTS = 64


def say(message):
    print(message, file=sys.stderr, flush=True)


def make_queries(count, seed=21):
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        words = [rng.choice(WORDS) for _ in range(rng.randint(5, 15))]
        out.append(" ".join(words)[:1].upper() + " ".join(words)[1:] + rng.choice(["?", "", "."]))
    return out


def load_average():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


# ---- the offline reference -------------------------------------------------------------------

def run_embed(embed, model, texts, workdir, env):
    """embed --input - --output on all texts: (texts/s, rows as bytes, the --json stats)."""
    out = os.path.join(workdir, "embed.npy")
    p = subprocess.run([embed, "--model", model, "--input", "-", "--output", out, "--json"],
                       input="".join(t + "\n" for t in texts).encode(), stdout=subprocess.PIPE,
                       check=True, env=env)
    stats = json.loads(p.stdout)
    with open(out, "rb") as f:
        data = f.read()
    (header_len,) = struct.unpack_from("<H", data, 8)
    body = data[10 + header_len:]
    width = len(body) // len(texts)
    return stats["count"] / stats["seconds"], [body[i * width:(i + 1) * width]
                                               for i in range(len(texts))], stats


# ---- servers ---------------------------------------------------------------------------------

class Process:
    """A server in the background, its output in a log file."""

    def __init__(self, argv, env, log_path):
        self.log_path = log_path
        self.log = open(log_path, "wb")
        self.process = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, env=env,
                                        start_new_session=True)

    def tail(self, n=15):
        with open(self.log_path, "rb") as f:
            return "\n".join(f.read().decode(errors="replace").splitlines()[-n:])

    def wait_healthy(self, url, seconds):
        deadline = time.time() + seconds
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("exited with status %d:\n%s" % (self.process.returncode,
                                                                    self.tail()))
            try:
                with urllib.request.urlopen(url + "/health", timeout=5) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.3)
        raise RuntimeError("/health not 200 within %d s:\n%s" % (seconds, self.tail()))

    def stop(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(40)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


def start_clattn(serve, model, env, workdir):
    log = os.path.join(workdir, "clattn-serve.log")
    # --auto-truncate: the mixed corpus has texts above 256 tokens, which embed and Infinity cut.
    p = Process([serve, "--model", model, "--port", "0", "--auto-truncate"], env, log)
    deadline = time.time() + 180
    url = None
    while url is None and time.time() < deadline and p.process.poll() is None:
        with open(log, "rb") as f:
            for line in f.read().decode(errors="replace").splitlines():
                if line.startswith("clattn-serve: listening on "):
                    url = line.split("listening on ", 1)[1].strip()
        time.sleep(0.1)
    if url is None:
        p.stop()
        raise RuntimeError("clattn-serve did not start:\n" + p.tail())
    p.wait_healthy(url, 180)
    return p, url


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def infinity_python(venv):
    """The venv's python with infinity_emb importable, installing it first; (python, why not)."""
    python = os.path.join(venv, "bin", "python")
    check = [python, "-c", "import infinity_emb, torch"]
    if os.path.exists(python) and subprocess.run(check, capture_output=True).returncode == 0:
        return python, None
    say("installing %s into %s (PyPI; torch is large: minutes)" % (INFINITY_SPEC, venv))
    if not os.path.exists(python):
        made = subprocess.run([sys.executable, "-m", "venv", venv], capture_output=True, text=True)
        if made.returncode != 0:
            return None, "cannot create the venv %s: %s" % (venv, made.stderr.strip()[-300:])
    pip = subprocess.run([python, "-m", "pip", "install", "--disable-pip-version-check",
                          INFINITY_SPEC], capture_output=True, text=True)
    if pip.returncode != 0:
        return None, "pip install %s failed: %s" % (INFINITY_SPEC, pip.stdout.strip()[-500:])
    if subprocess.run(check, capture_output=True).returncode != 0:
        return None, "infinity_emb installed but does not import"
    return python, None


def start_infinity(python, model, env, workdir, threads):
    port = free_port()
    env = dict(env, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", INFINITY_ANONYMOUS_USAGE_STATS="0",
               DO_NOT_TRACK="1", OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    cli = os.path.join(os.path.dirname(python), "infinity_emb")
    p = Process([cli, "v2", "--model-id", model, "--engine", "torch", "--device", "cpu",
                 "--host", "127.0.0.1", "--port", str(port), "--no-bettertransformer"],
                env, os.path.join(workdir, "infinity.log"))
    url = "http://127.0.0.1:%d" % port
    try:
        p.wait_healthy(url, 600)
    except RuntimeError:
        p.stop()
        raise
    return p, url


# ---- the load ----------------------------------------------------------------------------------

def post_json(conn, path, body):
    data = json.dumps(body).encode()
    conn.request("POST", path, data, {"Content-Type": "application/json"})
    r = conn.getresponse()
    payload = r.read()
    if r.status != 200:
        raise RuntimeError("%s answered %d: %r" % (path, r.status, payload[:300]))
    return json.loads(payload)


def vector_bytes(item):
    e = item["embedding"]
    if isinstance(e, str):
        return base64.b64decode(e)
    return struct.pack("<%df" % len(e), *e)


def run_load(url, path, model_name, texts, concurrency, encoding):
    """One request per text from `concurrency` keep-alive connections: (texts/s, p50 ms,
    p99 ms, client CPU s, rows as bytes in text order)."""
    host = urllib.parse.urlparse(url)
    order = list(range(len(texts)))
    lock = threading.Lock()
    rows = [None] * len(texts)
    latencies, errors = [], []

    def worker():
        conn = http.client.HTTPConnection(host.hostname, host.port, timeout=300)
        try:
            while True:
                with lock:
                    if not order:
                        return
                    i = order.pop()
                start = time.perf_counter()
                body = post_json(conn, path, {"model": model_name, "input": texts[i],
                                              "encoding_format": encoding})
                elapsed = time.perf_counter() - start
                row = vector_bytes(body["data"][0])
                with lock:
                    latencies.append(elapsed)
                    rows[i] = row
        except Exception as e:  # reported below: a benchmark with errors is not a result
            with lock:
                errors.append(repr(e))
        finally:
            conn.close()

    cpu0 = time.process_time()
    start = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu0
    if errors:
        raise RuntimeError("%d client errors, the first: %s" % (len(errors), errors[0]))
    lat = sorted(latencies)
    return {"texts_per_s": len(texts) / wall, "p50_ms": 1000 * lat[len(lat) // 2],
            "p99_ms": 1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))],
            "client_cpu_s": cpu, "wall_s": wall}, rows


def max_abs_diff(rows_a, rows_b):
    worst = 0.0
    for a, b in zip(rows_a, rows_b):
        fa = struct.unpack("<%df" % (len(a) // 4), a)
        fb = struct.unpack("<%df" % (len(b) // 4), b)
        worst = max(worst, max(abs(x - y) for x, y in zip(fa, fb)))
    return worst


def measure_server(name, url, path, model_name, encoding, workloads, levels, repeat, ref,
                   results):
    for wname, texts in workloads.items():
        # Warm-up: the first requests compile, allocate and fill caches.
        run_load(url, path, model_name, texts[:WARMUP_REQUESTS], min(8, max(levels)), encoding)
        for c in levels:
            passes = []
            for r in range(repeat):
                la = load_average()
                stats, rows = run_load(url, path, model_name, texts, c, encoding)
                stats["load_average"] = la
                passes.append(stats)
                if name == "clattn-serve":
                    same = sum(a == b for a, b in zip(rows, ref[wname]))
                    if same != len(texts):
                        raise SystemExit("clattn-serve: %d of %d vectors differ from embed's "
                                         "bytes (%s, concurrency %d)" % (len(texts) - same,
                                                                         len(texts), wname, c))
                    stats["max_abs_diff"] = 0.0
                else:
                    stats["max_abs_diff"] = max_abs_diff(rows, ref[wname])
                    if stats["max_abs_diff"] > 1e-4:
                        raise SystemExit("%s: vectors differ from embed's by %.3g" %
                                         (name, stats["max_abs_diff"]))
            cell = {k: statistics.median(p[k] for p in passes)
                    for k in ("texts_per_s", "p50_ms", "p99_ms", "client_cpu_s", "wall_s")}
            cell.update(engine=name, workload=wname, concurrency=c, passes=passes,
                        max_abs_diff=max(p["max_abs_diff"] for p in passes))
            results.append(cell)
            say("%-12s %-6s c=%-2d %8.1f texts/s  p50 %7.1f ms  p99 %7.1f ms  (client CPU "
                "%.1f s of %.1f s)" % (name, wname, c, cell["texts_per_s"], cell["p50_ms"],
                                       cell["p99_ms"], cell["client_cpu_s"], cell["wall_s"]))


# ---- the report ----------------------------------------------------------------------------------

def machine():
    cpu = "unknown CPU"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem_gib = int(f.readline().split()[1]) / 2**20
    return "%s, %d logical CPUs, %.0f GiB RAM, Linux %s" % (cpu, os.cpu_count(), mem_gib,
                                                           platform.release())


def git_describe():
    try:
        return subprocess.run(["git", "-C", HERE, "describe", "--always", "--dirty"],
                              capture_output=True, text=True).stdout.strip() or "?"
    except OSError:
        return "?"


def write_report(out, info, offline, results, infinity_note):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "serve.json"), "w") as f:
        json.dump({"info": info, "offline": offline, "results": results,
                   "infinity": infinity_note}, f, indent=1)

    def cell(engine, workload, c):
        for r in results:
            if r["engine"] == engine and r["workload"] == workload and r["concurrency"] == c:
                return r
        return None

    table = ["| workload | engine | concurrency | texts/s | p50 ms | p99 ms | × offline embed |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for wname in info["workloads"]:
        off = offline[wname]["texts_per_s"]
        table.append("| %s | embed (offline, all texts at once) | — | %.0f | — | — | 1.00 |"
                     % (wname, off))
        for engine in ("clattn-serve", "infinity"):
            for c in info["concurrency"]:
                r = cell(engine, wname, c)
                if r:
                    table.append("| %s | %s | %d | %.0f | %.1f | %.1f | %.2f |" % (
                        wname, engine, c, r["texts_per_s"], r["p50_ms"], r["p99_ms"],
                        r["texts_per_s"] / off))
    loads = [p["load_average"] for r in results for p in r["passes"]]
    lines = [
        "# Serving: clattn-serve against the offline embed and Infinity", "",
        "Written by `bench/serve_bench.py` on %s (finished %s). %s, %d texts per workload, "
        "one request per text, %d pass(es) per cell (median)." % (
            info["started"], info["finished"], info["model_name"], info["count"],
            info["repeat"]), "",
    ] + table + [
        "",
        "*texts/s*: texts over the wall time of a pass (%d requests, after a warm-up of %d); "
        "*p50*, *p99*: request latency at the client; *× offline embed*: texts/s over "
        "`embed`'s on the same texts in one process (its own `seconds`, model loading "
        "excluded; the median of as many runs as passes, after one that warms the kernel "
        "cache). clattn-serve's vectors equal embed's byte for byte in every pass; "
        "Infinity's agree to %s (max abs)." % (
            info["count"], WARMUP_REQUESTS,
            "%.1e" % max((r["max_abs_diff"] for r in results if r["engine"] == "infinity"),
                         default=0.0) if any(r["engine"] == "infinity" for r in results)
            else "— (not run)"),
        "", "## Setup", "", "| | |", "|---|---|",
        "| machine | %s |" % info["machine"],
        "| device | %s (PoCL), %d threads (POCL_CPU_MAX_CU_NUM) |" % (info["device"],
                                                                    info["threads"]),
        "| clattn-serve | `examples/serve --model DIR --port 0 --auto-truncate`, otherwise its "
        "defaults, at %s |" %
        info["git"],
        "| Infinity | %s |" % infinity_note,
        "| client | Python %s http.client, one keep-alive connection per client thread, "
        "`encoding_format` base64, on the same machine |" % platform.python_version(),
        "| workloads | short: %d queries of 5–15 words (%d tokens); mixed: bench/embed_bench.py's "
        "make_corpus(%d) (%d tokens) |" % (info["count"], offline["short"]["tokens"],
                                           info["count"], offline["mixed"]["tokens"]),
        "| load average (1 min) | %.2f–%.2f during the passes |" % (min(loads, default=0),
                                                                   max(loads, default=0)),
        "",
    ]
    with open(os.path.join(out, "serve.md"), "w") as f:
        f.write("\n".join(lines))
    return "\n".join(table)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--serve", required=True)
    ap.add_argument("--embed", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--concurrency", default="1,8,32")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--infinity-venv", default=os.path.join(
        os.environ.get("CLATTN_MODEL_CACHE") or os.path.expanduser("~/.cache/clattn"),
        "infinity-venv"))
    ap.add_argument("--no-infinity", action="store_true")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    args = ap.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    model = os.path.abspath(args.model)
    env = dict(os.environ, POCL_CPU_MAX_CU_NUM=str(args.threads),
               POCL_MAX_PTHREAD_COUNT=str(args.threads))
    workloads = {"short": make_queries(args.count), "mixed": make_corpus(args.count)}
    info = {"started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "machine": machine(), "git": git_describe(), "count": args.count,
            "repeat": args.repeat, "threads": args.threads, "concurrency": levels,
            "workloads": list(workloads), "model_name": os.path.basename(model.rstrip("/"))}
    results, offline, ref = [], {}, {}
    with tempfile.TemporaryDirectory(prefix="clattn-serve-bench.") as workdir:
        for wname, texts in workloads.items():
            # A first run to warm PoCL's kernel cache (the servers get a warm-up too), then the
            # median of `repeat` runs.
            run_embed(args.embed, model, texts, workdir, env)
            runs = [run_embed(args.embed, model, texts, workdir, env) for _ in range(args.repeat)]
            tps = statistics.median(r[0] for r in runs)
            rows, stats = runs[0][1], runs[0][2]
            if any(r[1] != rows for r in runs):
                raise SystemExit("embed gave different bytes on the same texts (%s)" % wname)
            offline[wname] = {"texts_per_s": tps, "tokens": stats["tokens"],
                              "seconds": statistics.median(r[2]["seconds"] for r in runs),
                              "runs": [r[0] for r in runs]}
            ref[wname] = rows
            info["device"] = stats["device"]
            say("embed        %-6s      %8.1f texts/s (%d tokens)" % (wname, tps,
                                                                     stats["tokens"]))

        server, url = start_clattn(args.serve, model, env, workdir)
        try:
            with urllib.request.urlopen(url + "/v1/models") as r:
                name = json.load(r)["data"][0]["id"]
            measure_server("clattn-serve", url, "/v1/embeddings", name, "base64", workloads,
                           levels, args.repeat, ref, results)
        finally:
            server.stop()

        if args.no_infinity:
            infinity_note = "not run (--no-infinity)"
        else:
            python, why = infinity_python(args.infinity_venv)
            if python is None:
                infinity_note = "not run: " + why
            else:
                version = subprocess.run(
                    [python, "-c", "import infinity_emb, torch; print(infinity_emb.__version__, "
                     "torch.__version__)"], capture_output=True, text=True).stdout.split()
                infinity_note = ("infinity-emb %s (PyPI), torch %s, `infinity_emb v2 --engine "
                                 "torch --device cpu`, its default batch size, %d threads "
                                 "(OMP_NUM_THREADS)" % (version[0], version[1], args.threads))
                try:
                    server, url = start_infinity(python, model, env, workdir, args.threads)
                except RuntimeError as e:
                    infinity_note = "not run: it did not start: %s" % str(e)[-600:]
                else:
                    try:
                        measure_server("infinity", url, "/embeddings", model, "base64",
                                       workloads, levels, args.repeat, ref, results)
                    except RuntimeError as e:
                        infinity_note += "; failed under the load: %s" % e
                    finally:
                        server.stop()
        say("infinity: " + infinity_note)
    info["finished"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    print(write_report(args.out, info, offline, results, infinity_note))


if __name__ == "__main__":
    main()
