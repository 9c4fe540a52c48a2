#!/usr/bin/env python3
"""Chat serving throughput and latency: clattn-serve against llama.cpp's llama-server.

usage: serve_chat_bench.py --serve build/examples/serve --llama-bin DIR --model GGUF [--model ...]
                           [--concurrency 1,4,16] [--requests-per-client 4] [--rounds 2]
                           [--threads 2] [--ctx-size 1024] [--out bench/results]
                           [--llama-build-note TEXT]

Not a test. For each GGUF file, each concurrency C and each round, both servers are started on
the same file with C slots (clattn-serve --parallel C --ctx-size CTX; llama-server -t T
--parallel C --ctx-size C*CTX, so each slot has CTX tokens, continuous batching on, its web UI
off), warmed up with one short request, and sent the same load: C client threads send
requests-per-client streamed chat requests (a new connection per request: llama-server closes a
connection after a streamed answer; POST
/v1/chat/completions, stream with include_usage, temperature 0) from one seeded list of
requests: a user message of random words made to be 50-500 tokens (counted with the server's own
/tokenize), max_tokens 64-256. The engines alternate within each round (which one goes first
alternates too).

Reported per (model, engine, C), medians over the rounds:
  tokens/s   the completion tokens of every request (the usage chunk) over the wall time of the
             load
  TTFT       time to first token at the client: from sending the request to the first chunk
             with content; p50 and p99 over the requests
  ITL        inter-token latency: the gaps between a stream's content chunks; p50 and p99
clattn-serve runs on PoCL's CPU device with T threads (POCL_MAX_PTHREAD_COUNT), llama-server
with -t T; the client runs on the same machine. Writes OUT/llm_serve.json and OUT/llm_serve.md
with the machine, its CPU flags and the llama.cpp build.
"""
import argparse
import http.client
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request

WORDS = ("time year people way day man thing woman life child world school state family "
         "student group country problem hand part place case week company system program "
         "question work government number night point home water room mother area money "
         "story fact month lot right study book eye job word business issue side kind head "
         "house service friend father power hour game line end member law car city name "
         "river mountain garden music paper window letter market energy picture table").split()


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                keep = ("avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
                        "avx512_bf16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16")
                have = line.split(":", 1)[1].split()
                return " ".join(k for k in keep if k in have)
    return "?"


def cpu_name():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "?"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Engine:
    def __init__(self, name, argv, env, url, log):
        self.name = name
        self.log = open(log, "wb")
        self.process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=self.log)
        self.url = url
        if url is None:  # clattn-serve prints its URL
            self.url = self.process.stdout.readline().decode().strip()
        deadline = time.time() + 300
        while True:
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if self.process.poll() is not None or time.time() > deadline:
                raise RuntimeError("%s did not start (see %s)" % (name, log))
            time.sleep(0.3)

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def tokens(self, text):
        req = urllib.request.Request(self.url + "/tokenize", json.dumps({"content": text}).encode(),
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            return len(json.loads(r.read())["tokens"])


def make_requests(engine, count, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        target = rng.randint(50, 500)
        words = [rng.choice(WORDS) for _ in range(max(1, int(target / 1.2)))]
        text = "Tell me a long story about " + " ".join(words)
        while engine.tokens(text) > target and len(words) > 1:
            words = words[:-max(1, len(words) // 20)]
            text = "Tell me a long story about " + " ".join(words)
        out.append({"messages": [{"role": "user", "content": text}],
                    "max_tokens": rng.randint(64, 256), "temperature": 0, "stream": True,
                    "stream_options": {"include_usage": True}})
    return out


def one_request(conn, body):
    """(ttft s, [gaps s], completion tokens) of one streamed request."""
    start = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", json.dumps(body),
                 {"Content-Type": "application/json"})
    r = conn.getresponse()
    if r.status != 200:
        raise RuntimeError("status %d: %s" % (r.status, r.read()[:200]))
    first, last, gaps, tokens, chunks = None, None, [], None, 0
    while True:
        line = r.readline()
        if not line:
            break
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            if line == b"data: [DONE]":
                break
            continue
        event = json.loads(line[6:])
        if event.get("usage"):
            tokens = event["usage"]["completion_tokens"]
        choices = event.get("choices") or []
        if choices and (choices[0].get("delta") or {}).get("content"):
            now = time.perf_counter()
            chunks += 1
            if first is None:
                first = now - start
            else:
                gaps.append(now - last)
            last = now
    r.read()
    return first if first is not None else time.perf_counter() - start, gaps, \
        tokens if tokens is not None else chunks


def run_load(engine, requests, concurrency):
    u = urllib.parse.urlparse(engine.url)
    queue = list(enumerate(requests))
    lock = threading.Lock()
    results = [None] * len(requests)
    errors = []

    def client():
        while True:
            with lock:
                if not queue:
                    break
                i, body = queue.pop(0)
            conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
            try:
                results[i] = one_request(conn, body)
            except Exception as e:  # reported, not hidden
                errors.append(repr(e))
            conn.close()
    start = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    done = [r for r in results if r]
    ttft = sorted(r[0] for r in done)
    gaps = sorted(g for r in done for g in r[1])
    tokens = sum(r[2] for r in done)

    def pct(v, p):
        return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))] if v else float("nan")
    return {"tokens_per_s": tokens / wall, "tokens": tokens, "wall_s": wall,
            "ttft_p50_ms": pct(ttft, 50) * 1e3, "ttft_p99_ms": pct(ttft, 99) * 1e3,
            "itl_p50_ms": pct(gaps, 50) * 1e3, "itl_p99_ms": pct(gaps, 99) * 1e3,
            "errors": len(errors), "error_samples": errors[:3]}


def start_engine(name, args, model, concurrency, workdir):
    env = dict(os.environ)
    log = os.path.join(workdir, "%s-%s-%d.log" % (name, os.path.basename(model), concurrency))
    if name == "clattn":
        env["POCL_MAX_PTHREAD_COUNT"] = str(args.threads)
        argv = [args.serve, "--model", model, "--port", "0", "--parallel", str(concurrency),
                "--ctx-size", str(args.ctx_size)]
        return Engine(name, argv, env, None, log)
    port = free_port()
    argv = [os.path.join(args.llama_bin, "llama-server"), "-m", model, "--host", "127.0.0.1",
            "--port", str(port), "-t", str(args.threads), "--parallel", str(concurrency),
            "--ctx-size", str(args.ctx_size * concurrency), "--no-webui"]
    env["LD_LIBRARY_PATH"] = args.llama_bin + ":" + env.get("LD_LIBRARY_PATH", "")
    return Engine(name, argv, env, "http://127.0.0.1:%d" % port, log)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--serve", required=True)
    p.add_argument("--llama-bin", required=True)
    p.add_argument("--model", action="append", required=True)
    p.add_argument("--concurrency", default="1,4,16")
    p.add_argument("--requests-per-client", type=int, default=4)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--ctx-size", type=int, default=1024)
    p.add_argument("--out", default="bench/results")
    p.add_argument("--workdir", default="/tmp")
    p.add_argument("--llama-build-note", default="",
                   help="how llama-server was built, for the report")
    args = p.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    rows = []
    for model in args.model:
        for c in levels:
            n = c * args.requests_per_client
            requests = None
            cells = {"clattn": [], "llama.cpp": []}
            for rnd in range(args.rounds):
                order = ["clattn", "llama.cpp"] if rnd % 2 == 0 else ["llama.cpp", "clattn"]
                for name in order:
                    engine = start_engine(name, args, model, c, args.workdir)
                    try:
                        if requests is None:
                            requests = make_requests(engine, n, 1000 + c)
                        warm = dict(requests[0], max_tokens=8, messages=[
                            {"role": "user", "content": "Say hello."}])
                        run_load(engine, [warm], 1)
                        cell = run_load(engine, requests, c)
                    finally:
                        engine.stop()
                    cells[name].append(cell)
                    print("%s C=%d %s round %d: %.1f tok/s, TTFT p50 %.0f p99 %.0f ms, ITL p50 "
                          "%.1f p99 %.1f ms, %d errors" % (
                              os.path.basename(model), c, name, rnd, cell["tokens_per_s"],
                              cell["ttft_p50_ms"], cell["ttft_p99_ms"], cell["itl_p50_ms"],
                              cell["itl_p99_ms"], cell["errors"]), flush=True)
            for name, runs in cells.items():
                row = {"model": os.path.basename(model), "engine": name, "concurrency": c,
                       "requests": n, "rounds": runs}
                for key in ("tokens_per_s", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms",
                            "itl_p99_ms"):
                    row[key] = statistics.median(r[key] for r in runs)
                row["errors"] = sum(r["errors"] for r in runs)
                rows.append(row)
    llama_version = subprocess.run(
        [os.path.join(args.llama_bin, "llama-server"), "--version"], capture_output=True,
        text=True, env=dict(os.environ, LD_LIBRARY_PATH=args.llama_bin)).stderr.strip()
    info = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": cpu_name(),
            "cores": os.cpu_count(), "cpu_flags": cpu_flags(), "threads": args.threads,
            "ctx_size_per_slot": args.ctx_size, "llama_server": llama_version,
            "requests_per_client": args.requests_per_client, "rounds": args.rounds,
            "llama_build_note": args.llama_build_note}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "llm_serve.json"), "w") as f:
        json.dump({"machine": info, "rows": rows}, f, indent=1)
    lines = ["# Chat serving: clattn-serve against llama-server (bench/llm/serve_chat_bench.py)",
             "", "%s; %s, %d cores; flags: %s; %d threads each; %d tokens per slot; %d "
             "requests per client, medians of %d rounds. llama-server: %s." % (
                 info["date"], info["cpu"], info["cores"], info["cpu_flags"], args.threads,
                 args.ctx_size, args.requests_per_client, args.rounds,
                 llama_version.splitlines()[0] if llama_version else "?")
             + (" " + args.llama_build_note if args.llama_build_note else ""), "",
             "| model | C | engine | tokens/s | TTFT p50 / p99 ms | ITL p50 / p99 ms | errors |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| %s | %d | %s | %.1f | %.0f / %.0f | %.1f / %.1f | %d |" % (
            r["model"], r["concurrency"], r["engine"], r["tokens_per_s"], r["ttft_p50_ms"],
            r["ttft_p99_ms"], r["itl_p50_ms"], r["itl_p99_ms"], r["errors"]))
    with open(os.path.join(args.out, "llm_serve.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
