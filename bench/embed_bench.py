#!/usr/bin/env python3
"""Sentence-embedding throughput: libclattn against sentence-transformers, ONNX Runtime and OpenVINO.

usage: embed_bench.py --embed build/examples/embed --model DIR [--python VENV_PYTHON]
                      [--quick] [--repeat R] [--count N] [--threads T] [--device SPEC]
                      [--engines E,...] [--clattn-precisions fp32,bf16,int8]
                      [--out bench/results] [--keep DIR]

One command measures, on the same machine and in the same run, how many texts per second each
engine turns into normalised sentence embeddings with one sentence-transformers model (made for
all-MiniLM-L6-v2, which `tools/fetch-model.sh` prints the folder of; all-mpnet-base-v2 from
`tools/fetch-model.sh --model all-mpnet-base-v2` works the same way):

  clattn      libclattn's `examples/embed --model DIR --input corpus.txt --output E.npy --json`
              (OpenCL; --device, default `cpu`: PoCL's CPU device on this machine)
  st          sentence-transformers (PyTorch): SentenceTransformer(DIR, device="cpu")
              .encode(texts, batch_size=32), torch.set_num_threads(T)
  st-skylakex the same with OPENBLAS_CORETYPE=SkylakeX, run only when OpenBLAS does not
              recognise the CPU by itself (Debian's OpenBLAS 0.3.21 calls a Sapphire Rapids
              VM "Prescott", i.e. no AVX at all, and PyTorch's matrix products then run on SSE3)
  onnxruntime transformers' AutoModel from DIR (BertModel, MPNetModel), exported once with
              torch.onnx.export (opset 14, dynamic batch and sequence axes; the inputs the
              model's tokenizer gives), run by onnxruntime's CPUExecutionProvider
              (intra_op_num_threads T, inter_op 1, all graph optimisations) on the same batches
              as sentence-transformers: texts sorted by decreasing length, 32 per batch,
              tokenised by the fast tokenizer (tokenizer.json, truncation at the model's
              max_seq_length, padding to the longest in the batch with tokenizer.json's padding
              token, else [PAD] 0), then mean pooling over the
              attention mask and L2 normalisation in numpy
  onnxruntime-int8
              the same with the exported model quantised once by
              onnxruntime.quantization.quantize_dynamic (QInt8 weights, per tensor; activations
              quantised at run time: ONNX Runtime's usual int8 CPU path)
  openvino    OpenVINO on the same exported model and batches: core.compile_model(model, "CPU",
              {INFERENCE_PRECISION_HINT: f32, INFERENCE_NUM_THREADS: T, PERFORMANCE_HINT:
              LATENCY})
  openvino-default
              the same without the precision hint: OpenVINO's default, bf16 on CPUs with
              AVX512_BF16 or AMX (the precision it chose is recorded), f32 elsewhere
  clattn-P    libclattn's embed with `--precision P` for each P of --clattn-precisions other
              than fp32 (e.g. `--clattn-precisions fp32,bf16,int8`); a precision that this
              build of embed refuses (tried once on one text first) is skipped with its message

--engines picks a subset (default: all of them; st, the reference, is always run; an engine
whose Python package --python cannot import is skipped with a message).

Every engine uses T threads (default 2, this machine's core count): torch.set_num_threads,
OMP/OPENBLAS/MKL_NUM_THREADS, onnxruntime's intra_op_num_threads, and PoCL's
POCL_CPU_MAX_CU_NUM (POCL_MAX_PTHREAD_COUNT for older PoCL).

The corpus is generated (no download): N texts (default 1000; 200 with --quick) from a seeded
generator over a fixed English word list with some numbers, punctuation and accented words, of
mixed lengths, sentence-like mostly (about 50 % of 4-15 words, 40 % of 16-40, 9 % of 41-100,
1 % of 200-300 which the model truncates at 256 tokens): about 33 tokens a text. It is written
to a temporary folder, one text per line. On an idle 2-core machine a full run takes a few
minutes; on a loaded one much longer (the default size was chosen so that it stays within
about 20 minutes at a load average of 5 on 2 cores).

What is timed, for every engine alike: one pass from the list of texts (already in memory) to
the normalised embeddings, tokenisation included, model loading and process start excluded
(reported apart as load_s). No warm-up pass for anyone. Each run is its own process, so each
peak memory (maximum resident set size, from wait4) is its own; engines are interleaved
(rotated order) over R repetitions (default 3, also with --quick); the tables give the median and
the min-max over the repetitions, because this kind of machine is shared and noisy.

Cross-check: every run's embeddings are compared with the first sentence-transformers run's
(the fp32 reference): the maximum absolute difference, and the cosine of each text's embedding
with the reference's (worst and mean over the corpus). For the engines that compute in fp32
(clattn, st, st-skylakex, onnxruntime, openvino) the maximum absolute difference must be below
1e-4 or the script stops with exit status 1 (after printing the differences) and writes no
results; the reduced-precision engines (onnxruntime-int8, openvino-default, clattn-bf16,
clattn-int8) are measured, not judged: their cosines are the result. The token counts (with
[CLS] and [SEP], after truncation, without padding) must agree for every engine.

Writes OUT/embed.json (everything), OUT/embed.md (the table, the machine, versions, thread
counts, the corpus, the load average during the run, and a section for the project README) and,
when matplotlib is importable by --python, OUT/embed_throughput.png. For a model other than
all-MiniLM-L6-v2 the names carry the folder's name: OUT/embed_all-mpnet-base-v2.json etc.

The script runs under any Python 3; when --python names another interpreter (a venv with
torch, transformers, sentence-transformers, onnxruntime, onnx, openvino, numpy, threadpoolctl,
matplotlib) it re-runs itself under that one. Nothing is downloaded: HF_HUB_OFFLINE=1 and
TRANSFORMERS_OFFLINE=1 for every child.
"""
import argparse
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOLERANCE = 1e-4
BATCH = 32

# --------------------------------------------------------------------------------------------
# The corpus


WORDS = """
the of and to in a is that for it as was with be by on not he this are or his from at which
but have an they you were her she there been one all we their has would when if so no will
what can more about up out them some could other into than then now only its time new people
may these two way like first also after any work our just over most made before well through
back where much should good year very down even how many state life world day between both
under last never being long house system program question during government small number
place great old every while part high school around however home another point public use
family might next began group without country water city business since company against
important give form case night american early far member power money story research health
model language sentence vector embedding encoder attention kernel device memory network data
transformer layer token batch matrix buffer queue driver compiler library benchmark result
measure speed throughput latency accuracy paper study evidence method analysis process change
problem history market energy climate policy music river mountain garden kitchen window table
doctor teacher student engineer artist farmer village harbour station bridge forest island
morning evening summer winter spring autumn yellow green purple silver quiet bright heavy
simple careful ancient modern rapid gentle strange famous useful private general local common
write read build carry follow open close answer explain improve reduce compare describe
""".split()
ACCENTED = ["café", "naïve", "Zürich", "façade", "résumé", "São Paulo", "Ångström", "jalapeño",
            "crème brûlée", "Dvořák", "Łódź", "smörgåsbord"]
PUNCT = [",", ",", ";", ":", " -", "!", "?"]


def random_text(rng, words, endings):
    """A sentence-like text of `words` words from WORDS (some numbers, accented words,
    punctuation and sentence breaks), then one of `endings`."""
    out, start = [], True
    for i in range(words):
        r = rng.random()
        if r < 0.04:
            w = str(rng.randint(0, 2025))
        elif r < 0.06:
            w = rng.choice(ACCENTED)
        else:
            w = rng.choice(WORDS)
        if start:
            w = w[:1].upper() + w[1:]
            start = False
        out.append(w)
        if i < words - 1 and rng.random() < 0.08:
            if rng.random() < 0.6:
                out[-1] += "."
                start = True
            else:
                out[-1] += rng.choice(PUNCT)
    return " ".join(out) + rng.choice(endings)


def make_corpus(count, seed=20241130):
    """count texts of mixed lengths, deterministic for a seed (random.Random is stable)."""
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        u = rng.random()
        if u < 0.50:
            n = rng.randint(4, 15)
        elif u < 0.90:
            n = rng.randint(16, 40)
        elif u < 0.99:
            n = rng.randint(41, 100)
        else:
            n = rng.randint(200, 300)
        texts.append(random_text(rng, n, [".", ".", ".", "!", "?", ""]))
    return texts


def read_corpus(path):
    with open(path, encoding="utf-8", newline="") as f:
        data = f.read()
    return data.split("\n")[:-1]  # as examples/embed reads it: one text per line


# --------------------------------------------------------------------------------------------
# Workers: each runs in its own child process under --python and prints one JSON line


def emit(obj):
    import resource
    obj["peak_rss_self_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print("RESULT " + json.dumps(obj), flush=True)


def blas_info():
    try:
        import threadpoolctl
        return [{k: i.get(k) for k in ("internal_api", "architecture", "version", "num_threads",
                                         "threading_layer", "filepath")}
                for i in threadpoolctl.threadpool_info()]
    except Exception as e:  # threadpoolctl missing
        return [{"error": str(e)}]


def count_tokens(model_dir, texts, max_length):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.enable_truncation(max_length)
    tok.no_padding()
    return sum(len(e.ids) for e in tok.encode_batch(texts))


def max_seq_length(model_dir):
    try:
        with open(os.path.join(model_dir, "sentence_bert_config.json")) as f:
            return int(json.load(f)["max_seq_length"])
    except (OSError, KeyError, ValueError):
        return 512


def worker_st(a):
    import numpy as np
    import torch
    torch.set_num_threads(a.threads)
    import sentence_transformers
    import transformers
    texts = read_corpus(a.corpus)
    t0 = time.perf_counter()
    model = sentence_transformers.SentenceTransformer(a.model, device="cpu")
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    emb = model.encode(texts, batch_size=BATCH, show_progress_bar=False, convert_to_numpy=True)
    seconds = time.perf_counter() - t0
    np.save(a.output, emb.astype(np.float32))
    emit({"engine": a.worker, "seconds": seconds, "load_s": load_s, "count": len(texts),
          "tokens": count_tokens(a.model, texts, model.max_seq_length),
          "threads": torch.get_num_threads(), "blas": blas_info(),
          "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
          "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                       "sentence_transformers": sentence_transformers.__version__,
                       "numpy": np.__version__, "python": platform.python_version()}})


def worker_export(a):
    import torch
    import transformers
    torch.set_num_threads(a.threads)
    model = transformers.AutoModel.from_pretrained(a.model).eval()
    enc = transformers.AutoTokenizer.from_pretrained(a.model)(
        ["an example sentence", "another, somewhat longer example sentence"],
        padding=True, return_tensors="pt")
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in enc]
    axes = {n: {0: "batch", 1: "sequence"} for n in names}
    axes["last_hidden_state"] = {0: "batch", 1: "sequence"}
    # The TorchScript exporter (torch 2.9 and later default to dynamo, which needs onnxscript).
    kwargs = {"dynamo": False} if "dynamo" in torch.onnx.export.__code__.co_varnames else {}
    t0 = time.perf_counter()
    with torch.no_grad():
        torch.onnx.export(model, tuple(enc[n] for n in names), a.output, input_names=names,
                          output_names=["last_hidden_state"], dynamic_axes=axes,
                          opset_version=14, do_constant_folding=True, **kwargs)
    emit({"engine": "export", "seconds": time.perf_counter() - t0, "opset": 14,
          "torch": torch.__version__, "bytes": os.path.getsize(a.output)})


def batch_tokenizer(model_dir, max_len):
    """tokenizers' fast tokenizer as sentence-transformers' batches see it: truncation at
    max_len, padding to the longest in a batch with tokenizer.json's padding token."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.enable_truncation(max_len)
    with open(os.path.join(model_dir, "tokenizer.json"), encoding="utf-8") as f:
        padding = json.load(f).get("padding") or {}
    tok.enable_padding(pad_id=padding.get("pad_id", 0), pad_type_id=0,
                       pad_token=padding.get("pad_token", "[PAD]"))  # to the longest in a batch
    return tok


def embed_batches(texts, tok, run, wanted):
    """Normalised mean-pooled embeddings of `texts` in sentence-transformers' batches (by
    decreasing length, BATCH a batch): run(feeds) -> last_hidden_state [b, n, hidden] of a
    batch; `wanted`: the graph's input names."""
    import numpy as np
    # sentence-transformers' order: by decreasing length (its _text_length: len() of a str)
    order = np.argsort([-len(t) for t in texts], kind="stable")
    out = None
    for s in range(0, len(texts), BATCH):
        idx = order[s:s + BATCH]
        encs = tok.encode_batch([texts[i] for i in idx])
        ids = np.array([e.ids for e in encs], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encs], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask,
                 "token_type_ids": np.array([e.type_ids for e in encs], dtype=np.int64)}
        hidden = run({k: v for k, v in feeds.items() if k in wanted})
        m = mask[:, :, None].astype(np.float32)
        pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        if out is None:
            out = np.empty((len(texts), pooled.shape[1]), dtype=np.float32)
        out[idx] = pooled / np.clip(norms, 1e-12, None)
    return out


def worker_ort(a):
    """onnxruntime (a.onnx: the exported model) and onnxruntime-int8 (a.onnx: its
    quantize_dynamic copy): the same code, another graph."""
    import numpy as np
    import onnxruntime as ort
    import tokenizers
    texts = read_corpus(a.corpus)
    max_len = max_seq_length(a.model)
    t0 = time.perf_counter()
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(a.onnx, so, providers=["CPUExecutionProvider"])
    tok = batch_tokenizer(a.model, max_len)
    wanted = {i.name for i in sess.get_inputs()}
    load_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    out = embed_batches(texts, tok, lambda feeds: sess.run(None, feeds)[0], wanted)
    seconds = time.perf_counter() - t0
    np.save(a.output, out)
    emit({"engine": a.worker, "seconds": seconds, "load_s": load_s, "count": len(texts),
          "tokens": count_tokens(a.model, texts, max_len), "threads": a.threads,
          "providers": sess.get_providers(), "graph": os.path.basename(a.onnx),
          "versions": {"onnxruntime": ort.__version__, "tokenizers": tokenizers.__version__,
                       "numpy": np.__version__}})


def worker_quantize(a):
    """The exported model's int8 copy, as ONNX Runtime's documentation makes one for CPUs:
    quantize_dynamic with QInt8 weights (per tensor), the rest of its defaults."""
    import onnxruntime
    from onnxruntime.quantization import QuantType, quantize_dynamic
    t0 = time.perf_counter()
    quantize_dynamic(a.onnx, a.output, weight_type=QuantType.QInt8)
    emit({"engine": "quantize", "seconds": time.perf_counter() - t0,
          "bytes": os.path.getsize(a.output),
          "how": "onnxruntime.quantization.quantize_dynamic(weight_type=QuantType.QInt8), "
                 "onnxruntime %s" % onnxruntime.__version__})


def worker_openvino(a):
    """openvino (f32 forced) and openvino-default (OpenVINO's own choice of precision) on the
    exported ONNX model, the same batches as onnxruntime."""
    import numpy as np
    import openvino as ov
    import tokenizers
    texts = read_corpus(a.corpus)
    max_len = max_seq_length(a.model)
    t0 = time.perf_counter()
    core = ov.Core()
    config = {"INFERENCE_NUM_THREADS": str(a.threads), "PERFORMANCE_HINT": "LATENCY"}
    if a.worker == "openvino":
        config["INFERENCE_PRECISION_HINT"] = "f32"
    compiled = core.compile_model(core.read_model(a.onnx), "CPU", config)
    request = compiled.create_infer_request()
    wanted = {p.get_any_name() for p in compiled.inputs}
    tok = batch_tokenizer(a.model, max_len)
    load_s = time.perf_counter() - t0

    def run(feeds):
        request.infer(feeds)
        return request.get_output_tensor(0).data

    t0 = time.perf_counter()
    out = embed_batches(texts, tok, run, wanted)
    seconds = time.perf_counter() - t0
    np.save(a.output, out)

    def prop(name):
        try:
            value = compiled.get_property(name)
            # ov.Type (the precision) prints as "<Type: 'bfloat16'>"; its name is "bf16".
            return value.get_type_name() if hasattr(value, "get_type_name") else str(value)
        except Exception as e:  # a property this version does not report
            return "unknown (%s)" % str(e).splitlines()[0][:80]
    emit({"engine": a.worker, "seconds": seconds, "load_s": load_s, "count": len(texts),
          "tokens": count_tokens(a.model, texts, max_len), "threads": a.threads,
          "inference_precision": prop("INFERENCE_PRECISION_HINT"),
          "num_streams": prop("NUM_STREAMS"), "config": config,
          "optimization_capabilities": [str(c) for c in core.get_property(
              "CPU", "OPTIMIZATION_CAPABILITIES")],
          "versions": {"openvino": ov.__version__, "tokenizers": tokenizers.__version__,
                       "numpy": np.__version__}})


def worker_compare(a):
    """Max |a - b|, the cosines of the rows (worst, mean) and the worst rows, for each FILE
    against REF."""
    import numpy as np
    ref = np.load(a.ref)
    res = {}
    for f in a.files:
        x = np.load(f)
        if x.shape != ref.shape:
            res[f] = {"error": "shape %s, reference %s" % (x.shape, ref.shape)}
            continue
        x64, r64 = x.astype(np.float64), ref.astype(np.float64)
        d = np.abs(x64 - r64)
        cos = (x64 * r64).sum(axis=1) / np.clip(
            np.linalg.norm(x64, axis=1) * np.linalg.norm(r64, axis=1), 1e-30, None)
        res[f] = {"max_abs": float(d.max()), "mean_abs": float(d.mean()),
                  "worst_text": int(d.max(axis=1).argmax()),
                  "min_cosine": float(cos.min()), "mean_cosine": float(cos.mean()),
                  "worst_cosine_text": int(cos.argmin())}
    print("RESULT " + json.dumps(res), flush=True)


def worker_plot(a):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with open(a.json) as f:
        r = json.load(f)
    rows = r["summary"]
    names = [x["label"] for x in rows]
    med = [x["texts_per_s"]["median"] for x in rows]
    lo = [x["texts_per_s"]["median"] - x["texts_per_s"]["min"] for x in rows]
    hi = [x["texts_per_s"]["max"] - x["texts_per_s"]["median"] for x in rows]
    colors = ["#d62728" if x["engine"].startswith("clattn") else "#1f77b4" for x in rows]
    fig, ax = plt.subplots(figsize=(10, 0.7 * len(rows) + 2.2))
    y = list(range(len(rows)))[::-1]
    ax.barh(y, med, xerr=[lo, hi], color=colors, capsize=4)
    for yi, x in zip(y, rows):
        m, top = x["texts_per_s"]["median"], x["texts_per_s"]["max"]
        ax.text(top, yi, "  %s texts/s" % ("%.1f" % m if m < 100 else "%.0f" % m),
                va="center", ha="left")
    ax.set_yticks(y)
    ax.set_yticklabels(names)
    ax.set_xlabel("texts/s (median; bars: min-max of %d runs)" % r["repeat"])
    ax.set_xlim(0, max(x["texts_per_s"]["max"] for x in rows) * 1.3)
    c = r["corpus"]
    ax.set_title("%s, %d generated texts (%d tokens), %d threads for every engine\n"
                 "%s, %d logical CPUs; shared machine: load average %.1f-%.1f during the run"
                 % (os.path.basename(r["model"].rstrip("/")), c["count"], c["tokens"],
                    r["threads"], r["machine"]["cpu"], r["machine"]["logical_cpus"],
                    r["loadavg"]["min"], r["loadavg"]["max"]), fontsize=9)
    fig.tight_layout()
    fig.savefig(a.png, dpi=110)


# --------------------------------------------------------------------------------------------
# The driver


def child_env(threads, extra=None):
    env = dict(os.environ)
    t = str(threads)
    env.update({"OMP_NUM_THREADS": t, "OPENBLAS_NUM_THREADS": t, "MKL_NUM_THREADS": t,
                "POCL_CPU_MAX_CU_NUM": t, "POCL_MAX_PTHREAD_COUNT": t,
                "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                "TOKENIZERS_PARALLELISM": "false", "PYTHONWARNINGS": "ignore"})
    for k, v in (extra or {}).items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def run_child(cmd, env, tmp, timeout=1800):
    """Runs cmd, returns (rc, stdout, stderr, peak RSS MiB of that child alone, wall s)."""
    out_path, err_path = os.path.join(tmp, "child.out"), os.path.join(tmp, "child.err")
    with open(out_path, "w") as out, open(err_path, "w") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        deadline = t0 + timeout
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                p.kill()
                pid, status, ru = os.wait4(p.pid, 0)
                break
            time.sleep(0.02)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
    with open(out_path) as f:
        stdout = f.read()
    with open(err_path) as f:
        stderr = f.read()
    return p.returncode, stdout, stderr, ru.ru_maxrss / 1024.0, wall


def parse_result(stdout):
    for line in stdout.splitlines()[::-1]:
        if line.startswith("RESULT "):
            return json.loads(line[7:])
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError("no result in output: %r" % stdout[-300:])


def run_worker(script, args, worker, tmp, extra_env=None, **kw):
    """Runs `script --worker WORKER --threads N --KEY VALUE...` (a list value: several values)
    under --python, in run_child."""
    cmd = [args.python, os.path.abspath(script), "--worker", worker, "--threads",
           str(args.threads)]
    for k, v in kw.items():
        cmd += ["--" + k.replace("_", "-")] + ([str(x) for x in v] if isinstance(v, list)
                                               else [str(v)])
    return run_child(cmd, child_env(args.threads, extra_env), tmp)


def py_worker(args, worker, tmp, extra_env=None, **kw):
    return run_worker(__file__, args, worker, tmp, extra_env, model=args.model, **kw)


def die(msg):
    print("embed_bench: " + msg, file=sys.stderr, flush=True)
    sys.exit(1)


def stats(xs):
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "runs": list(xs)}


def summarize(engines, runs, labels, cross, unit="texts"):
    """Each engine's medians and ranges over its runs (`unit`: what its rate counts, the runs'
    UNIT_per_s), its speed relative to libclattn's and its cross-check."""
    summary = []
    ours = statistics.median(x[unit + "_per_s"] for x in runs["clattn"])
    for e in engines:
        xs = runs[e]
        rate = stats([x[unit + "_per_s"] for x in xs])
        summary.append({
            "engine": e, "label": labels[e], unit + "_per_s": rate,
            "tokens_per_s": stats([x["tokens_per_s"] for x in xs]),
            "seconds": stats([x["seconds"] for x in xs]),
            "load_s": stats([x["load_s"] for x in xs]),
            "peak_rss_mib": stats([x["peak_rss_mib"] for x in xs]),
            "clattn_relative": ours / rate["median"], "cross_check": cross[e]})
    return summary


def loadavg_summary(loads):
    """The os.getloadavg() samples taken before each run: their 1-minute values and range."""
    load1 = [l[0] for l in loads]
    return {"samples_1min": load1, "min": min(load1), "max": max(load1),
            "median": statistics.median(load1), "first": loads[0], "last": loads[-1]}


# The CPU flags that decide which kernels (and precisions) the engines pick.
VECTOR_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512dq",
                "avx512cd", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16",
                "amx_tile", "amx_bf16", "amx_int8")


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            line = next((l for l in f if l.startswith("flags")), "")
    except OSError:
        return []
    return line.split(":", 1)[1].split() if ":" in line else []


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
    except OSError:
        return platform.processor() or "unknown", False
    name = next((l.split(":", 1)[1].strip() for l in info.splitlines()
                 if l.startswith("model name")), "unknown")
    flags = next((l.split(":", 1)[1].split() for l in info.splitlines()
                  if l.startswith("flags")), [])
    return name, "avx512f" in flags


def machine_info(threads):
    cpu, avx512 = cpu_model()
    mem = "unknown"
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
        mem = "%.0f GiB" % (kb / 2 ** 20)
    except (OSError, ValueError, IndexError):
        pass
    hyper = ""
    try:
        hyper = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        hyper = next((l.split(":", 1)[1].strip() for l in hyper.splitlines()
                      if l.startswith("Hypervisor vendor")), "")
    except OSError:
        pass
    flags = cpu_flags()
    return {"cpu": cpu, "avx512": avx512, "logical_cpus": os.cpu_count(), "memory": mem,
            "kernel": platform.release(), "hypervisor": hyper or None, "threads": threads,
            "vector_flags": [f for f in VECTOR_FLAGS if f in flags]}


def pkg_version(name):
    try:
        return subprocess.run(["dpkg-query", "-W", "-f=${Version}", name], capture_output=True,
                              text=True).stdout.strip() or None
    except OSError:
        return None


def git_rev():
    try:
        return subprocess.run(["git", "-C", HERE, "describe", "--always", "--dirty"],
                              capture_output=True, text=True).stdout.strip() or None
    except OSError:
        return None


# The engines in the order of the tables; the reduced-precision ones are measured against the
# fp32 reference (cosines), not held to TOLERANCE.
ENGINES = ["clattn", "st", "st-skylakex", "onnxruntime", "onnxruntime-int8", "openvino",
           "openvino-default"]
REDUCED = {"onnxruntime-int8", "openvino-default"}
CLATTN_PRECISIONS = ("fp32", "bf16", "int8")
# What each optional engine needs importable under --python.
NEEDS = {"onnxruntime": "onnxruntime", "onnxruntime-int8": "onnxruntime.quantization",
         "openvino": "openvino", "openvino-default": "openvino"}


def reduced(engine):
    return engine in REDUCED or engine.startswith("clattn-")


def clattn_cmd(a, engine, corpus, emb):
    """examples/embed on the corpus; clattn-P adds --precision P."""
    cmd = [a.embed, "--model", a.model, "--device", a.device, "--input", corpus,
           "--output", emb, "--batch-size", str(BATCH), "--json"]
    if engine != "clattn":
        cmd += ["--precision", engine.split("-", 1)[1]]
    return cmd


def choose_engines(a, as_found, machine, tmp):
    """The engines of this run: --engines (st always), st-skylakex only where OpenBLAS
    misreads an AVX-512 CPU, the optional ones only when --python can import what they need,
    clattn-P for each precision of --clattn-precisions that embed accepts."""
    wanted = [e for e in a.engines.split(",") if e] if a.engines else list(ENGINES)
    unknown = [e for e in wanted if e not in ENGINES]
    if unknown:
        die("--engines: unknown %s (engines: %s)" % (", ".join(unknown), ", ".join(ENGINES)))
    # clattn: what the others are compared with; st: the fp32 reference of every comparison.
    wanted += [e for e in ("clattn", "st") if e not in wanted]
    engines = []
    for e in ENGINES:
        if e not in wanted:
            continue
        if e == "st-skylakex" and not (machine["avx512"] and as_found and not str(
                as_found).lower().startswith(("skylakex", "cooperlake", "sapphirerapids"))):
            continue
        if e in NEEDS:
            rc, so, se, _, _ = run_child([a.python, "-c", "import " + NEEDS[e]],
                                         child_env(a.threads), tmp, 300)
            if rc != 0:
                print("skipping %s: %s cannot import %s (%s)" % (
                    e, a.python, NEEDS[e], (se.strip().splitlines() or ["?"])[-1]), flush=True)
                continue
        engines.append(e)
        if e == "clattn":
            engines += clattn_precisions(a, tmp)
    return engines


def clattn_precisions(a, tmp):
    """clattn-P for each P of --clattn-precisions other than fp32 that embed accepts: tried
    once on one text (a build without --precision, or a CPU without the precision's
    instructions, refuses it; it is then skipped with embed's message)."""
    out = []
    for p in [p for p in a.clattn_precisions.split(",") if p]:
        if p not in CLATTN_PRECISIONS:
            die("--clattn-precisions: unknown %s (precisions: %s)"
                % (p, ", ".join(CLATTN_PRECISIONS)))
        if p == "fp32":
            continue  # the clattn engine itself
        cmd = [a.embed, "--model", a.model, "--device", a.device, "--precision", p,
               "a probe of the precision"]
        rc, so, se, _, _ = run_child(cmd, child_env(a.threads), tmp, 600)
        if rc != 0:
            print("skipping clattn-%s: embed refuses --precision %s (exit %d): %s" % (
                p, p, rc, " ".join(se.strip().splitlines()[-2:])[:300]), flush=True)
            continue
        out.append("clattn-" + p)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--embed", help="libclattn's examples/embed executable")
    ap.add_argument("--model", required=True, help="the sentence-transformers model folder")
    ap.add_argument("--python", default=sys.executable,
                    help="interpreter with torch, sentence-transformers, onnxruntime, onnx, "
                         "openvino, numpy")
    ap.add_argument("--quick", action="store_true", help="200 texts instead of 1000")
    ap.add_argument("--count", type=int, help="texts in the corpus (default 1000, 200 quick)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each engine (default 3)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu", help="libclattn's --device (default cpu)")
    ap.add_argument("--engines", help="a comma-separated subset of %s (default: all; clattn and st "
                                      "are always run)" % ",".join(ENGINES))
    ap.add_argument("--clattn-precisions", default="fp32",
                    help="libclattn's precisions, e.g. fp32,bf16,int8: each other than fp32 is "
                         "an engine clattn-P, embed --precision P (default fp32)")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--keep", help="keep the corpus, the ONNX models and the embeddings here")
    ap.add_argument("--no-results", action="store_true", help="print only; write nothing")
    # worker mode (internal)
    ap.add_argument("--worker", choices=["st", "st-skylakex", "export", "quantize",
                                         "onnxruntime", "onnxruntime-int8", "openvino",
                                         "openvino-default", "compare", "plot"],
                    help=argparse.SUPPRESS)
    ap.add_argument("--corpus", help=argparse.SUPPRESS)
    ap.add_argument("--output", help=argparse.SUPPRESS)
    ap.add_argument("--onnx", help=argparse.SUPPRESS)
    ap.add_argument("--ref", help=argparse.SUPPRESS)
    ap.add_argument("--files", nargs="*", help=argparse.SUPPRESS)
    ap.add_argument("--json", help=argparse.SUPPRESS)
    ap.add_argument("--png", help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.worker:
        {"st": worker_st, "st-skylakex": worker_st, "export": worker_export,
         "quantize": worker_quantize, "onnxruntime": worker_ort,
         "onnxruntime-int8": worker_ort, "openvino": worker_openvino,
         "openvino-default": worker_openvino, "compare": worker_compare,
         "plot": worker_plot}[a.worker](a)
        return

    # The driver runs under --python, like its workers.
    if (os.path.realpath(a.python) != os.path.realpath(sys.executable)
            and os.environ.get("EMBED_BENCH_REEXEC") != "1"):
        os.environ["EMBED_BENCH_REEXEC"] = "1"
        os.execv(a.python, [a.python, os.path.abspath(__file__)] + sys.argv[1:])
    if not a.embed:
        die("--embed (build/examples/embed) is required")
    a.embed = os.path.abspath(a.embed)
    a.model = os.path.abspath(a.model)
    count = a.count or (200 if a.quick else 1000)
    repeat = a.repeat
    tmp = a.keep or tempfile.mkdtemp(prefix="embed_bench.")
    os.makedirs(tmp, exist_ok=True)
    loads = [os.getloadavg()]
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())

    corpus = os.path.join(tmp, "corpus.txt")
    texts = make_corpus(count)
    with open(corpus, "w", encoding="utf-8", newline="") as f:
        f.write("".join(t + "\n" for t in texts))
    words = [len(t.split()) for t in texts]
    chars = [len(t) for t in texts]
    print("corpus: %d texts, %d-%d words (median %d), %d bytes, in %s"
          % (count, min(words), max(words), statistics.median(words),
             os.path.getsize(corpus), corpus), flush=True)

    # Is OpenBLAS's kernel the CPU's? Ask the BLAS that PyTorch loads, as the environment is.
    probe = ("import torch, json, threadpoolctl; print('RESULT ' + json.dumps("
             "[i.get('architecture') for i in threadpoolctl.threadpool_info()"
             " if i.get('internal_api') == 'openblas']))")
    rc, so, se, _, _ = run_child([a.python, "-c", probe], child_env(a.threads), tmp, 300)
    arch = parse_result(so) if rc == 0 else ["unknown (%s)" % se.strip()[-200:]]
    machine = machine_info(a.threads)
    as_found = arch[0] if arch else None
    engines = choose_engines(a, as_found, machine, tmp)
    print("OpenBLAS kernel as the environment is (OPENBLAS_CORETYPE=%s): %s; engines: %s"
          % (os.environ.get("OPENBLAS_CORETYPE"), as_found, ", ".join(engines)), flush=True)

    onnx_path = os.path.join(tmp, "model.onnx")
    int8_path = os.path.join(tmp, "model.int8.onnx")
    export = quantize = None
    if any(e.startswith(("onnxruntime", "openvino")) for e in engines):
        rc, so, se, rss, wall = py_worker(a, "export", tmp, output=onnx_path)
        if rc != 0:
            die("ONNX export failed:\n" + se[-2000:])
        export = parse_result(so)
        print("ONNX export: %.1f s, %.1f MB" % (export["seconds"], export["bytes"] / 1e6),
              flush=True)
    if "onnxruntime-int8" in engines:
        rc, so, se, rss, wall = py_worker(a, "quantize", tmp, onnx=onnx_path, output=int8_path)
        if rc != 0:
            die("quantize_dynamic failed:\n" + se[-2000:])
        quantize = parse_result(so)
        print("int8 model (quantize_dynamic): %.1f s, %.1f MB" % (
            quantize["seconds"], quantize["bytes"] / 1e6), flush=True)

    runs = {e: [] for e in engines}
    outputs = {e: [] for e in engines}
    for r in range(repeat):
        order = engines[r % len(engines):] + engines[:r % len(engines)]
        for e in order:
            emb = os.path.join(tmp, "emb-%s-%d.npy" % (e, r))
            loads.append(os.getloadavg())
            if e.startswith("clattn"):
                rc, so, se, rss, wall = run_child(clattn_cmd(a, e, corpus, emb),
                                                  child_env(a.threads), tmp)
            elif e.startswith(("onnxruntime", "openvino")):
                rc, so, se, rss, wall = py_worker(
                    a, e, tmp, corpus=corpus, output=emb,
                    onnx=int8_path if e == "onnxruntime-int8" else onnx_path)
            else:
                extra = {"OPENBLAS_CORETYPE": "SkylakeX"} if e == "st-skylakex" else None
                rc, so, se, rss, wall = py_worker(a, e, tmp, extra_env=extra, corpus=corpus,
                                                  output=emb)
            if rc != 0:
                die("%s failed (exit %d):\n%s" % (e, rc, (se or so)[-3000:]))
            res = parse_result(so)
            res.update({"peak_rss_mib": round(rss, 1), "wall_s": round(wall, 3),
                        "texts_per_s": res["count"] / res["seconds"],
                        "tokens_per_s": res["tokens"] / res["seconds"], "repetition": r})
            runs[e].append(res)
            outputs[e].append(emb)
            print("  run %d  %-16s %8.1f texts/s %9.0f tokens/s  %6.2f s  load %.2f s  "
                  "peak RSS %6.0f MiB" % (r + 1, e, res["texts_per_s"], res["tokens_per_s"],
                                          res["seconds"], res["load_s"], rss), flush=True)
    loads.append(os.getloadavg())

    # Cross-check against the first sentence-transformers run.
    ref = outputs["st"][0]
    files = [f for e in engines for f in outputs[e] if f != ref]
    rc, so, se, _, _ = py_worker(a, "compare", tmp, ref=ref, files=files)
    if rc != 0:
        die("comparison failed:\n" + se[-2000:])
    diffs = parse_result(so)
    ok = True
    tokens = runs["st"][0]["tokens"]
    print("cross-check against sentence-transformers (run 1, fp32): max |difference|, "
          "cosine worst / mean:")
    cross = {}
    for e in engines:
        ds = [diffs[f] for f in outputs[e] if f != ref]
        if any("error" in d for d in ds):
            print("  %-16s %s" % (e, [d["error"] for d in ds if "error" in d][0]))
            ok = False
            continue
        worst = max((d["max_abs"] for d in ds), default=0.0)
        cross[e] = {"max_abs": worst, "mean_abs": max((d["mean_abs"] for d in ds), default=0.0),
                    "min_cosine": min((d["min_cosine"] for d in ds), default=1.0),
                    "mean_cosine": min((d["mean_cosine"] for d in ds), default=1.0),
                    "worst_text": max(ds, key=lambda d: d["max_abs"])["worst_text"] if ds
                    else None,
                    "worst_cosine_text": min(ds, key=lambda d: d["min_cosine"])[
                        "worst_cosine_text"] if ds else None,
                    "judged": not reduced(e)}
        bad_tokens = sorted({x["tokens"] for x in runs[e]} - {tokens})
        if bad_tokens:
            flag = "FAIL"
        elif reduced(e):
            flag = "reduced precision: measured, not judged"
        else:
            flag = "ok" if worst < TOLERANCE else "FAIL"
        print("  %-16s %.3g  (mean %.3g)  cosine %.6f / %.6f  %s%s" % (
            e, worst, cross[e]["mean_abs"], cross[e]["min_cosine"], cross[e]["mean_cosine"],
            flag, "  tokens %s vs %d" % (bad_tokens, tokens) if bad_tokens else ""))
        if flag == "FAIL":
            ok = False
    if not ok:
        die("embeddings or token counts disagree with sentence-transformers beyond %g "
            "(files kept in %s)" % (TOLERANCE, tmp))

    dev = runs["clattn"][0].get("device", a.device) if "clattn" in runs else a.device
    labels = engine_labels(engines, runs, dev)
    summary = summarize(engines, runs, labels, cross)
    versions = {"clattn": git_rev(), "pocl": pkg_version("libpocl2"),
                "clblast": pkg_version("libclblast1"),
                "openblas": pkg_version("libopenblas0-pthread")}
    for e in engines:
        versions.update(runs[e][0].get("versions", {}))
    if export:
        versions["onnx_export"] = "torch.onnx.export, opset %d" % export["opset"]
    if quantize:
        versions["onnx_int8"] = quantize["how"]
    result = {
        "benchmark": "sentence-embedding throughput", "started": started,
        "finished": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "model": a.model, "machine": machine, "threads": a.threads, "repeat": repeat,
        "batch_size": BATCH, "tolerance": TOLERANCE, "quick": bool(a.quick),
        "engines": engines, "reduced_precision": [e for e in engines if reduced(e)],
        "loadavg": loadavg_summary(loads),
        "corpus": {"count": count, "seed": 20241130, "tokens": tokens,
                   "words": {"min": min(words), "median": statistics.median(words),
                             "max": max(words)},
                   "chars": {"min": min(chars), "median": statistics.median(chars),
                             "max": max(chars)},
                   "bytes": os.path.getsize(corpus),
                   "truncated": sum(1 for t in texts if len(t.split()) >= 200)},
        "openblas_as_found": {"OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
                              "architecture": as_found},
        "versions": versions,
        "clattn_device": runs["clattn"][0].get("device"),
        "summary": summary, "runs": runs,
    }
    print()
    print(table(result, cosine=True))
    if a.no_results:
        return
    os.makedirs(a.out, exist_ok=True)
    name = os.path.basename(a.model.rstrip("/"))
    stem = "embed" if name == "all-MiniLM-L6-v2" else "embed_" + name
    result["files_stem"] = stem
    jpath = os.path.join(a.out, stem + ".json")
    with open(jpath, "w") as f:
        json.dump(result, f, indent=1)
    rc, so, se, _, _ = py_worker(a, "plot", tmp, json=jpath,
                                 png=os.path.join(a.out, stem + "_throughput.png"))
    if rc != 0:
        print("no plot (matplotlib?): " + se.strip().splitlines()[-1] if se.strip() else "",
              file=sys.stderr)
    result["plotted"] = rc == 0
    with open(jpath, "w") as f:
        json.dump(result, f, indent=1)
    with open(os.path.join(a.out, stem + ".md"), "w") as f:
        f.write(markdown(result))
    print("wrote %s/%s.json, %s.md%s" % (a.out, stem, stem,
                                         "" if rc else ", %s_throughput.png" % stem))
    if not a.keep:
        shutil.rmtree(tmp, ignore_errors=True)


def engine_labels(engines, runs, dev):
    """A readable name for each engine of the run (versions and precisions from its runs)."""
    labels = {}
    for e in engines:
        r0 = runs[e][0]
        v = r0.get("versions", {})
        if e == "clattn" or e.startswith("clattn-"):
            labels[e] = "libclattn (OpenCL, %s)%s" % (
                "PoCL CPU device" if dev.startswith("pthread") else dev,
                "" if e == "clattn" else " %s" % e.split("-", 1)[1])
        elif e == "st":
            labels[e] = "sentence-transformers (PyTorch, OpenBLAS %s)" % openblas(r0).get(
                "architecture")
        elif e == "st-skylakex":
            labels[e] = "sentence-transformers (PyTorch, OpenBLAS SkylakeX)"
        elif e == "onnxruntime":
            labels[e] = "ONNX Runtime %s f32 (CPUExecutionProvider)" % v.get("onnxruntime")
        elif e == "onnxruntime-int8":
            labels[e] = "ONNX Runtime %s int8 (quantize_dynamic)" % v.get("onnxruntime")
        elif e == "openvino":
            labels[e] = "OpenVINO %s f32" % v.get("openvino", "?").split("-")[0]
        elif e == "openvino-default":
            labels[e] = "OpenVINO %s default precision (%s here)" % (
                v.get("openvino", "?").split("-")[0], r0.get("inference_precision"))
    return labels


def openblas(run):
    return next((b for b in run.get("blas", []) if b.get("internal_api") == "openblas"), {})


def num(x):
    return "%.1f" % x if x < 100 else "%.0f" % x


def table(r, unit="texts", cosine=False):
    """The results table; `unit` names what an engine's rate counts (its summary's
    UNIT_per_s); `cosine`: a column of the cosines against the fp32 reference (worst / mean
    over the texts)."""
    lines = ["| engine | %s/s median (min–max) | tokens/s median | time s | load s | "
             "peak RSS MiB | max abs diff vs ST |%s libclattn × |"
             % (unit, " cosine vs fp32 worst / mean |" if cosine else ""),
             "|---|---:|---:|---:|---:|---:|---:|%s---:|" % ("---:|" if cosine else "")]
    for s in r["summary"]:
        t = s[unit + "_per_s"]
        c = s["cross_check"]
        cos = ""
        if cosine:
            cos = (" reference |" if s["engine"] == "st"
                   else " %s / %s |" % (cosine_text(c["min_cosine"]),
                                        cosine_text(c["mean_cosine"])))
        lines.append("| %s | **%s** (%s–%s) | %.0f | %.2f | %.2f | %.0f | %s |%s %s |" % (
            s["label"], num(t["median"]), num(t["min"]), num(t["max"]), s["tokens_per_s"]["median"],
            s["seconds"]["median"], s["load_s"]["median"], s["peak_rss_mib"]["median"],
            "reference (%.1e between its runs)"
            % c["max_abs"] if s["engine"] == "st"
            else "%.1e" % c["max_abs"], cos,
            "—" if s["engine"] == "clattn" else "%.2f" % s["clattn_relative"]))
    return "\n".join(lines)


def cosine_text(c):
    """A cosine to 6 decimals (0.999970; an fp32 engine's 1.000000)."""
    return "%.6f" % c


# Parts of the report that rerank_bench.py writes too.

def shared_machine_note(r):
    la, m = r["loadavg"], r["machine"]
    return ("**The machine was shared with other jobs during this run**: the 1-minute load "
            "average, sampled before each run, went from %.2f to %.2f (median %.2f) on %d "
            "logical CPUs, so every engine had less than its %d threads' worth of CPU at times. "
            "Compare engines within this run (they were interleaved, so the load hit them "
            "alike), not with other runs.\n"
            % (la["min"], la["max"], la["median"], m["logical_cpus"], r["threads"]))


def threads_row(r):
    return ("| threads | %d for every engine: `torch.set_num_threads(%d)`, "
            "`OMP/OPENBLAS/MKL_NUM_THREADS=%d`, onnxruntime `intra_op_num_threads=%d` "
            "(inter_op 1), PoCL `POCL_CPU_MAX_CU_NUM=%d` |" % ((r["threads"],) * 5))


def load_row(r):
    la = r["loadavg"]
    return ("| load average (1 min) | %.2f at the start, %.2f at the end, %.2f–%.2f during |\n"
            % (la["first"][0], la["last"][0], la["min"], la["max"]))


def skylakex_note(r):
    """Which PyTorch row is fair, for a run with the st-skylakex engine."""
    return ("**Which PyTorch row is fair.** Debian's OpenBLAS 0.3.21 does not recognise this "
            "CPU and falls back to its *%s* kernels (no AVX at all); with "
            "`OPENBLAS_CORETYPE=SkylakeX` it uses its AVX-512 kernels. libclattn (PoCL compiles "
            "for AVX-512) and ONNX Runtime (MLAS picks AVX-512 at run time) use the CPU's "
            "vector units, so the fair comparison is with the SkylakeX row; the other row is "
            "what an untouched Debian install gives on this VM.\n"
            % r["openblas_as_found"]["architecture"])


def readme_table(r, unit="texts"):
    lines = ["| engine | %s/s | tokens/s | peak RSS |\n|---|---:|---:|---:|" % unit]
    for s in r["summary"]:
        lines.append("| %s | %s | %.0f | %.0f MiB |" % (s["label"],
                                                         num(s[unit + "_per_s"]["median"]),
                                                         s["tokens_per_s"]["median"],
                                                         s["peak_rss_mib"]["median"]))
    return lines


def markdown(r):
    m, c, v, la = r["machine"], r["corpus"], r["versions"], r["loadavg"]
    by = {s["engine"]: s for s in r["summary"]}
    out = []
    w = out.append
    w("# Sentence-embedding throughput: libclattn, sentence-transformers, ONNX Runtime, "
      "OpenVINO\n")
    w("Written by `bench/embed_bench.py`%s on %s (finished %s). %s, %d texts, %d "
      "repetitions of each engine, each run its own process, engines interleaved.\n"
      % (" --quick" if r["quick"] else "", r["started"], r["finished"],
         os.path.basename(r["model"].rstrip("/")), c["count"], r["repeat"]))
    w(shared_machine_note(r))
    w(table(r, cosine=True) + "\n")
    w("texts/s and tokens/s: one pass from the texts in memory to L2-normalised embeddings, "
      "tokenisation included, model loading excluded (the *load s* column), no warm-up for "
      "anyone; median over the runs, min–max in brackets. *libclattn ×*: libclattn's median "
      "texts/s (fp32) divided by that engine's (above 1: libclattn is faster). Peak RSS: the "
      "process's maximum resident set size (wait4), interpreter and libraries included. "
      "*max abs diff vs ST*: the largest absolute difference of any embedding component from "
      "sentence-transformers' first run (fp32, the reference), over all that engine's runs; "
      "*cosine vs fp32*: the cosine of each text's embedding with the reference's, the worst "
      "and the mean over the %d texts (the lowest of the runs). The fp32 engines must agree "
      "to %g (max abs) or nothing is written; the reduced-precision ones (%s) are measured, not "
      "judged. Tokens agree exactly (%d in all).\n"
      % (c["count"], r["tolerance"], ", ".join(r.get("reduced_precision", [])) or "none here",
         c["tokens"]))
    w("## Setup\n")
    w("| | |\n|---|---|")
    w("| machine | %s, %d logical CPUs%s, %s RAM, Linux %s%s |"
      % (m["cpu"], m["logical_cpus"], " (AVX-512)" if m["avx512"] else "", m["memory"],
         m["kernel"], "" if not m["hypervisor"] else ", %s virtual machine" % m["hypervisor"]))
    if m.get("vector_flags"):
        w("| CPU vector flags | %s |" % " ".join(m["vector_flags"]))
    w(threads_row(r))
    precisions = [e.split("-", 1)[1] for e in r["engines"] if e.startswith("clattn-")]
    w("| libclattn | `examples/embed --device cpu --batch-size %d` at %s%s; OpenCL device *%s* "
      "(PoCL %s), CLBlast %s |" % (r["batch_size"], v["clattn"],
                                   "; also `--precision %s`" % " and ".join(precisions)
                                   if precisions else "",
                                   r["clattn_device"], v["pocl"], v["clblast"]))
    st = r["runs"]["st"][0]
    w("| sentence-transformers | %s, PyTorch %s, transformers %s, `encode(texts, batch_size=%d)` "
      "on CPU, OpenBLAS %s (Debian %s): kernel **%s** as the environment is "
      "(OPENBLAS_CORETYPE %s)%s |"
      % (v["sentence_transformers"], v["torch"], v["transformers"], r["batch_size"],
         openblas(st).get("version"), v["openblas"],
         r["openblas_as_found"]["architecture"],
         r["openblas_as_found"]["OPENBLAS_CORETYPE"] or "unset",
         "; **SkylakeX** with OPENBLAS_CORETYPE=SkylakeX (the *SkylakeX* row)"
         if "st-skylakex" in by else ""))
    if "onnx_export" in v:
        w("| exported model | transformers' AutoModel (BertModel, MPNetModel) exported by %s "
          "(torch %s), dynamic batch and sequence axes; ONNX Runtime and OpenVINO run it on the "
          "same length-sorted batches of %d as sentence-transformers, tokenised by tokenizers "
          "%s, with mean pooling and L2 normalisation in numpy %s |"
          % (v["onnx_export"], v["torch"], r["batch_size"], v.get("tokenizers"), v["numpy"]))
    if "onnxruntime" in v:
        w("| ONNX Runtime | %s, CPUExecutionProvider, all graph optimisations, sequential "
          "execution%s |" % (v["onnxruntime"], "; int8: the exported model quantised by %s"
                             % v["onnx_int8"] if "onnx_int8" in v else ""))
    if "openvino" in v:
        ov = by.get("openvino-default") or by.get("openvino")
        run = r["runs"][ov["engine"]][0]
        w("| OpenVINO | %s, `compile_model(model, \"CPU\", config)` with "
          "INFERENCE_NUM_THREADS %d and PERFORMANCE_HINT LATENCY (%s streams); f32: "
          "INFERENCE_PRECISION_HINT f32; default: no hint, which on this CPU (capabilities %s) "
          "is **%s** |"
          % (v["openvino"], r["threads"], run.get("num_streams"),
             " ".join(run.get("optimization_capabilities", [])),
             r["runs"]["openvino-default"][0].get("inference_precision")
             if "openvino-default" in by else "not run"))
    w("| Python | %s |" % v["python"])
    w("| corpus | %d texts generated by a seeded generator (seed %d, no download) from a fixed "
      "English word list with numbers, punctuation and some accented words: %d–%d words "
      "(median %g), %d–%d characters, %d tokens in all with [CLS]/[SEP] after truncation; "
      "about 50 %% of 4–15 words, 40 %% of 16–40, 9 %% of 41–100, 1 %% of 200–300 (%d texts, "
      "cut at 256 tokens) |"
      % (c["count"], c["seed"], c["words"]["min"], c["words"]["max"], c["words"]["median"],
         c["chars"]["min"], c["chars"]["max"], c["tokens"], c["truncated"]))
    w(load_row(r))
    if "st-skylakex" in by:
        w(skylakex_note(r))
    stem = r.get("files_stem", "embed")
    plot = r.get("plotted", True)  # False: matplotlib was missing, no picture was drawn
    w("%sEverything, each run included: `%s.json`.\n"
      % ("Plot: `%s_throughput.png` (median texts/s, min–max bars). " % stem if plot
         else "No plot (matplotlib was not importable). ", stem))
    w("## For the README\n")
    names = {"st": "sentence-transformers with Debian's OpenBLAS as it is (%s kernels)"
                   % r["openblas_as_found"]["architecture"],
             "st-skylakex": "sentence-transformers with OpenBLAS's AVX-512 kernels",
             "onnxruntime": "ONNX Runtime f32", "onnxruntime-int8": "ONNX Runtime int8",
             "openvino": "OpenVINO f32", "openvino-default": "OpenVINO's default precision"}
    rel = ["%.2f× %s" % (by[e]["clattn_relative"], names.get(e, e))
           for e in r["engines"] if e != "clattn" and e in by]
    w("### Sentence-embedding throughput\n")
    w("%s on %d generated texts of mixed lengths (%d tokens), %d threads for every engine, on "
      "a %d-core %s%s (`bench/embed_bench.py`, median of %d interleaved runs; the machine was "
      "shared, load average %.1f–%.1f):\n"
      % (os.path.basename(r["model"].rstrip("/")), c["count"], c["tokens"], r["threads"],
         m["logical_cpus"], m["cpu"], " VM" if m["hypervisor"] else "", r["repeat"],
         la["min"], la["max"]))
    lines = readme_table(r)  # the header and its rule in lines[0], then one line an engine
    header, rule = lines[0].split("\n")
    lines[0] = header + " worst / mean cosine vs fp32 |\n" + rule + "---:|"
    for i, s in enumerate(r["summary"]):
        cc = s["cross_check"]
        lines[i + 1] += (" reference |" if s["engine"] == "st" else " %s / %s |" % (
            cosine_text(cc["min_cosine"]), cosine_text(cc["mean_cosine"])))
    out.extend(lines)
    w("")
    if m.get("vector_flags"):
        w("CPU flags: %s.\n" % " ".join(m["vector_flags"]))
    fp32 = [s for s in r["summary"] if not s["engine"] in r.get("reduced_precision", [])]
    w("libclattn's speed relative to each: %s. The fp32 engines' embeddings agree with "
      "sentence-transformers' to %.1e (max abs). Details and versions: `bench/results/%s.md`%s.\n"
      % ("; ".join(rel), max(s["cross_check"]["max_abs"] for s in fp32), stem,
         ", plot `%s_throughput.png`" % stem if plot else ""))
    return "\n".join(out)


if __name__ == "__main__":
    main()
