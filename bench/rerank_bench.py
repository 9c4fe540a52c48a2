#!/usr/bin/env python3
"""Reranking throughput: libclattn against sentence-transformers' CrossEncoder and ONNX Runtime.

usage: rerank_bench.py --bench build/bench/rerank_bench --tokenizer DIR [--python VENV_PYTHON]
                       [--quick] [--repeat R] [--count N] [--threads T] [--device SPEC]
                       [--engines clattn,st,st-skylakex,onnxruntime] [--out bench/results]
                       [--keep DIR] [--no-results]

One command measures, on the same machine and in the same run, how many (query, document)
pairs per second each engine scores with one cross-encoder, as one reranking request is
scored: one query against N documents.

The model is made by the script (nothing is downloaded): transformers'
BertForSequenceClassification(config) with the widths of MiniLM-L6 (hidden 384, 6 layers, 12
heads, intermediate 1536, 512 positions, 2 token types, vocabulary 30522) and one label, its
weights drawn by transformers' own initialisation (normal, std 0.05 = config.initializer_range,
about a trained MiniLM's spread) under torch.manual_seed(SEED), saved with safetensors into a
temporary folder with the tokenizer files of all-MiniLM-L6-v2 (--tokenizer: the folder
`tools/fetch-model.sh` prints; tokenizer.json, tokenizer_config.json, special_tokens_map.json,
vocab.txt where present). Random weights rank nothing, but every engine computes the same
function and the time does not depend on the values.

  clattn      bench/rerank_bench (bench/rerank_bench.c): clattn_cross_encoder_score over all
              the pairs (the library tokenizes, sorts by length, batches 32 pairs and at most
              16384 padded tokens per batch), --device (default `cpu`: PoCL's CPU device here)
  st          sentence-transformers: CrossEncoder(DIR, device="cpu").predict(pairs,
              batch_size=32), torch.set_num_threads(T), the sigmoid of the logit (its default
              with one label). predict batches the pairs in the order it is given them, so the
              worker hands it the pairs sorted by decreasing length of the document (characters,
              stable) and puts the scores back in order: the batching a reranking server does
              (and the one of the other engines), timed with the rest
  st-skylakex the same with OPENBLAS_CORETYPE=SkylakeX, run only when PyTorch's BLAS is an
              OpenBLAS that does not recognise the CPU by itself (Debian's torch on Debian's
              OpenBLAS 0.3.21 calls a Sapphire Rapids VM "Prescott" and its matrix products then
              run on SSE3); PyPI's torch brings MKL and needs no such row
  st-unsorted (only when --engines names it) CrossEncoder.predict on the pairs in the request's
              order, as a caller who does not sort gets it (each batch padded to its longest),
              with the better BLAS kernel of the two above
  onnxruntime the same model exported once with torch.onnx.export (opset 14, dynamic batch and
              sequence axes; input_ids, attention_mask, token_type_ids -> logits), run by
              onnxruntime's CPUExecutionProvider (intra_op_num_threads T, inter_op 1, all graph
              optimisations) on the same batches as st: sorted by decreasing document length,
              32 pairs per batch, tokenized as pairs by the fast tokenizer (tokenizer.json,
              longest-first truncation at the model's maximum, padded to the longest in the
              batch with [PAD] 0 and token type 0), then the sigmoid of the logit in numpy

Every engine uses T threads (default 2, this machine's core count): torch.set_num_threads,
OMP/OPENBLAS/MKL_NUM_THREADS, onnxruntime's intra_op_num_threads, and PoCL's
POCL_CPU_MAX_CU_NUM (POCL_MAX_PTHREAD_COUNT for older PoCL).

The workload is generated from a seed: one query of about 12 words and N documents (default
1000; 200 with --quick) of mixed lengths, 16-200 tokens each (about 30 % of 16-50, 45 % of
50-120 and 25 % of 120-200 tokens), from bench/embed_bench.py's word list with some numbers,
punctuation and accented words. Pairs are truncated longest-first at the model's maximum (512
tokens; the longest pair here is about 215, so none is cut).

What is timed, for every engine alike: one pass from the query and the documents (in memory) to
the N scores, tokenisation included, model loading and process start excluded (reported apart
as load_s). No warm-up pass for anyone. Each run is its own process, so each peak memory
(maximum resident set size, from wait4) is its own; engines are interleaved (rotated order) over
R repetitions (default 3, also with --quick); the tables give the median and the min-max.

Cross-check: every run's scores are compared with the first st run's; the maximum absolute
difference must be below 1e-4, and the number of tokens each engine ran (special tokens
included, padding excluded) must equal the tokenizer's count, or the script stops with exit
status 1 (after printing the differences) and writes no results.

Writes OUT/rerank.json (everything, each run included) and OUT/rerank.md (the table, the
machine with its CPU flags, versions, thread counts, the workload, the load average during the
run, and a section for the project README).

The script runs under any Python 3; when --python names another interpreter (a venv with torch,
transformers, sentence-transformers, tokenizers, onnxruntime, onnx, numpy, threadpoolctl) it
re-runs itself under that one. Debian's python3-torch runs its matrix products on whatever
libblas.so.3 is (the reference BLAS unless OpenBLAS is installed: then PyTorch is 10-30 times
slower than it can be, and the script warns); a venv with PyPI's torch (MKL) is the better
peer: ~/.cache/clattn/infinity-venv (bench/serve_bench.py makes it) with
`pip install onnxruntime onnx "numpy<2"`. HF_HUB_OFFLINE=1 and TRANSFORMERS_OFFLINE=1 for every
child.
"""
import argparse
import inspect
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# The process harness, the text generator and the report's shared parts of the embedding
# benchmark: the same conventions.
from embed_bench import (VECTOR_FLAGS, blas_info, child_env, cpu_flags, emit,  # noqa: E402
                         git_rev, load_row,
                         loadavg_summary, machine_info, parse_result, pkg_version, random_text,
                         read_corpus, readme_table, run_child, run_worker, shared_machine_note,
                         skylakex_note, summarize, table, threads_row)

TOLERANCE = 1e-4
BATCH = 32
SEED = 20241201
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                   "vocab.txt")
# MiniLM-L6's widths (all-MiniLM-L6-v2, cross-encoder/ms-marco-MiniLM-L-6-v2), one label.
SHAPE = {"vocab_size": 30522, "hidden_size": 384, "num_hidden_layers": 6,
         "num_attention_heads": 12, "intermediate_size": 1536, "max_position_embeddings": 512,
         "type_vocab_size": 2, "hidden_act": "gelu", "num_labels": 1,
         # std of transformers' normal initialisation: a trained MiniLM's matrices have
         # 0.04-0.1; the default 0.02 leaves every score within 0.003 of 0.47, too flat for the
         # cross-check to say much.
         "initializer_range": 0.05}
DOC_TOKENS = (16, 200)

# --------------------------------------------------------------------------------------------
# The workload


def make_workload(count, tokenizer_json, seed=SEED):
    """One query and `count` documents of DOC_TOKENS tokens (without the specials) each."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(tokenizer_json)
    tok.no_truncation()
    tok.no_padding()
    rng = random.Random(seed)
    query = random_text(rng, 12, [".", ".", "!", "?", ""]).rstrip(".!?") + "?"
    docs = []
    while len(docs) < count:
        u = rng.random()
        lo, hi = (16, 50) if u < 0.30 else (50, 120) if u < 0.75 else (120, 200)
        target = rng.randint(lo, hi)
        words = max(4, round(target / 1.15))  # about 1.15 tokens a word with this word list
        text = random_text(rng, words, [".", ".", "!", "?", ""])
        n = len(tok.encode(text, add_special_tokens=False).ids)
        if DOC_TOKENS[0] <= n <= DOC_TOKENS[1]:
            docs.append(text)
    return query, docs


def pair_tokens(tokenizer_json, query, docs, max_length):
    """Tokens of every pair, special tokens included, after longest-first truncation."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(tokenizer_json)
    tok.enable_truncation(max_length, strategy="longest_first")
    tok.no_padding()
    return [len(e.ids) for e in tok.encode_batch([(query, d) for d in docs])]


def length_order(docs):
    """The batching order of st and onnxruntime: decreasing document length, stable."""
    return sorted(range(len(docs)), key=lambda i: -len(docs[i]))


# --------------------------------------------------------------------------------------------
# Workers: each runs in its own child process under --python and prints one JSON line


def worker_model(a):
    """The seeded random cross-encoder folder (config.json, model.safetensors, tokenizer)."""
    import torch
    import transformers
    torch.manual_seed(SEED)
    config = transformers.BertConfig(**SHAPE)
    model = transformers.BertForSequenceClassification(config).eval()
    model.save_pretrained(a.output, safe_serialization=True)
    copied = []
    for name in TOKENIZER_FILES:
        src = os.path.join(a.tokenizer, name)
        if os.path.exists(src):
            shutil.copy(src, os.path.join(a.output, name))
            copied.append(name)
    emit({"engine": "model", "parameters": sum(p.numel() for p in model.parameters()),
          "tokenizer_files": copied, "torch": torch.__version__,
          "transformers": transformers.__version__})


def worker_blas(a):
    """What PyTorch's matrix products run on: its BLAS (torch's build), and OpenBLAS's kernel
    when libblas.so.3 is OpenBLAS (threadpoolctl sees it once torch has loaded it)."""
    import threadpoolctl
    import torch
    torch.ones(64, 64) @ torch.ones(64, 64)
    config = torch.__config__.show()
    built = next((x.split("=", 1)[1] for x in config.replace(",", " ").split()
                  if x.startswith("BLAS_INFO=")), "unknown")
    libs = threadpoolctl.threadpool_info()
    ob = next((i for i in libs if i.get("internal_api") == "openblas"
               and "numpy" not in (i.get("filepath") or "")), None)
    blas = {"mkl": "mkl"}.get(built) or ("openblas" if ob else "reference" if built == "generic"
                                         else built)
    capability = getattr(getattr(torch.backends, "cpu", None), "get_cpu_capability", None)
    print("RESULT " + json.dumps({
        "blas": blas, "torch_blas_info": built,
        "openblas_architecture": ob.get("architecture") if ob and blas == "openblas" else None,
        "openblas_version": ob.get("version") if ob and blas == "openblas" else None,
        "cpu_capability": capability() if capability else None}), flush=True)


def blas_name(b):
    if b.get("blas") == "openblas":
        return "OpenBLAS %s" % b.get("openblas_architecture")
    return {"mkl": "MKL", "reference": "the reference BLAS"}.get(b.get("blas"), b.get("blas"))


def worker_st(a):
    import numpy as np
    import torch
    torch.set_num_threads(a.threads)
    import sentence_transformers
    import transformers
    from sentence_transformers import CrossEncoder
    query, docs = a.query, read_corpus(a.documents)
    t0 = time.perf_counter()
    model = CrossEncoder(a.model, device="cpu")
    load_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    order = list(range(len(docs))) if a.worker == "st-unsorted" else length_order(docs)
    predicted = model.predict([(query, docs[i]) for i in order], batch_size=BATCH,
                              show_progress_bar=False, convert_to_numpy=True)
    scores = np.empty(len(docs), dtype=np.float32)
    scores[order] = predicted.reshape(len(docs))
    seconds = time.perf_counter() - t0
    np.save(a.output, scores)
    emit({"engine": a.worker, "seconds": seconds, "load_s": load_s, "count": len(docs),
          "max_length": model.max_length or model.tokenizer.model_max_length,
          "threads": torch.get_num_threads(), "blas": blas_info(),
          "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
          "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                       "sentence_transformers": sentence_transformers.__version__,
                       "numpy": np.__version__, "python": platform.python_version()}})


def worker_export(a):
    import torch
    import transformers
    torch.set_num_threads(a.threads)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(a.model).eval()
    enc = transformers.AutoTokenizer.from_pretrained(a.model)(
        ["a query", "another query"], ["an example document", "a somewhat longer document"],
        padding=True, return_tensors="pt")
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {n: {0: "batch", 1: "sequence"} for n in names}
    axes["logits"] = {0: "batch"}
    extra = {}
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        extra["dynamo"] = False  # the TorchScript exporter, as torch 1.13 has it
    t0 = time.perf_counter()
    with torch.no_grad():
        torch.onnx.export(model, tuple(enc[n] for n in names), a.output, input_names=names,
                          output_names=["logits"], dynamic_axes=axes, opset_version=14,
                          do_constant_folding=True, **extra)
    emit({"engine": "export", "seconds": time.perf_counter() - t0, "opset": 14,
          "torch": torch.__version__, "bytes": os.path.getsize(a.output)})


def worker_ort(a):
    import numpy as np
    import onnxruntime as ort
    import tokenizers
    from tokenizers import Tokenizer
    query, docs = a.query, read_corpus(a.documents)
    t0 = time.perf_counter()
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(a.onnx, so, providers=["CPUExecutionProvider"])
    tok = Tokenizer.from_file(os.path.join(a.model, "tokenizer.json"))
    # tokenizer.json's own truncation (128 for all-MiniLM-L6-v2) and fixed padding are what
    # transformers overrides when CrossEncoder calls it: the model's maximum, the batch's longest.
    tok.enable_truncation(a.max_length, strategy="longest_first")
    tok.enable_padding(pad_id=0, pad_type_id=0, pad_token="[PAD]")
    load_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    order = length_order(docs)
    scores = np.empty(len(docs), dtype=np.float32)
    tokens = 0
    for s in range(0, len(docs), BATCH):
        idx = order[s:s + BATCH]
        encs = tok.encode_batch([(query, docs[i]) for i in idx])
        feeds = {"input_ids": np.array([e.ids for e in encs], dtype=np.int64),
                 "attention_mask": np.array([e.attention_mask for e in encs], dtype=np.int64),
                 "token_type_ids": np.array([e.type_ids for e in encs], dtype=np.int64)}
        tokens += int(feeds["attention_mask"].sum())
        logits = sess.run(["logits"], feeds)[0]  # [batch, 1]
        scores[idx] = 1.0 / (1.0 + np.exp(-logits[:, 0]))
    seconds = time.perf_counter() - t0
    np.save(a.output, scores)
    emit({"engine": "onnxruntime", "seconds": seconds, "load_s": load_s, "count": len(docs),
          "tokens": tokens, "threads": a.threads, "providers": sess.get_providers(),
          "versions": {"onnxruntime": ort.__version__, "tokenizers": tokenizers.__version__,
                       "numpy": np.__version__}})


def worker_compare(a):
    """Max |x - ref| over the pairs and the worst pair, for each FILE against REF."""
    import numpy as np
    ref = np.load(a.ref).astype(np.float64).reshape(-1)
    res = {"reference": {"min": float(ref.min()), "max": float(ref.max()),
                         "std": float(ref.std())}}
    for f in a.files:
        x = np.load(f).astype(np.float64).reshape(-1)
        if x.shape != ref.shape:
            res[f] = {"error": "%d scores, the reference %d" % (x.size, ref.size)}
            continue
        if not np.isfinite(x).all():
            res[f] = {"error": "%d scores are not finite" % int((~np.isfinite(x)).sum())}
            continue
        d = np.abs(x - ref)
        res[f] = {"max_abs": float(d.max()), "mean_abs": float(d.mean()),
                  "worst_pair": int(d.argmax())}
    print("RESULT " + json.dumps(res), flush=True)


# --------------------------------------------------------------------------------------------
# The driver


def py_worker(args, worker, tmp, extra_env=None, **kw):
    return run_worker(__file__, args, worker, tmp, extra_env, **kw)


def die(msg):
    print("rerank_bench: " + msg, file=sys.stderr, flush=True)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bench", help="libclattn's build/bench/rerank_bench executable")
    ap.add_argument("--tokenizer", help="the folder whose tokenizer files the model gets "
                    "(all-MiniLM-L6-v2's: tools/fetch-model.sh prints it)")
    ap.add_argument("--python", default=sys.executable,
                    help="interpreter with torch, sentence-transformers, onnxruntime, numpy")
    ap.add_argument("--quick", action="store_true", help="200 documents instead of 1000")
    ap.add_argument("--count", type=int, help="documents (default 1000, 200 quick)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each engine (default 3)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu", help="libclattn's device (default cpu)")
    ap.add_argument("--engines", default="clattn,st,st-skylakex,onnxruntime",
                    help="a comma-separated subset of clattn, st, st-skylakex, st-unsorted, "
                    "onnxruntime (clattn and st are always run; st-skylakex only where "
                    "OpenBLAS misreads the CPU)")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--keep", help="keep the model, the workload and the scores here")
    ap.add_argument("--no-results", action="store_true", help="print only; write nothing")
    # worker mode (internal)
    ap.add_argument("--worker", choices=["blas", "model", "st", "st-skylakex", "st-unsorted",
                                         "export", "onnxruntime", "compare"],
                    help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--query", help=argparse.SUPPRESS)
    ap.add_argument("--documents", help=argparse.SUPPRESS)
    ap.add_argument("--output", help=argparse.SUPPRESS)
    ap.add_argument("--onnx", help=argparse.SUPPRESS)
    ap.add_argument("--max-length", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--ref", help=argparse.SUPPRESS)
    ap.add_argument("--files", nargs="*", help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.worker:
        {"blas": worker_blas, "model": worker_model, "st": worker_st, "st-skylakex": worker_st,
         "st-unsorted": worker_st, "export": worker_export, "onnxruntime": worker_ort,
         "compare": worker_compare}[a.worker](a)
        return

    # The driver runs under --python, like its workers (a venv's python is often a link to the
    # system's: compare the paths as given, not resolved).
    if (os.path.abspath(a.python) != os.path.abspath(sys.executable)
            and os.environ.get("RERANK_BENCH_REEXEC") != "1"):
        os.environ["RERANK_BENCH_REEXEC"] = "1"
        os.execv(a.python, [a.python, os.path.abspath(__file__)] + sys.argv[1:])
    if not a.bench or not a.tokenizer:
        die("--bench (build/bench/rerank_bench) and --tokenizer (all-MiniLM-L6-v2's folder: "
            "tools/fetch-model.sh) are required")
    if not os.path.exists(os.path.join(a.tokenizer, "tokenizer.json")):
        die("--tokenizer %s: no tokenizer.json there" % a.tokenizer)
    a.bench, a.tokenizer = os.path.abspath(a.bench), os.path.abspath(a.tokenizer)
    wanted = [e.strip() for e in a.engines.split(",") if e.strip()]
    unknown = sorted(set(wanted) - {"clattn", "st", "st-skylakex", "st-unsorted", "onnxruntime"})
    if unknown:
        die("--engines: unknown %s" % ", ".join(unknown))
    count = a.count or (200 if a.quick else 1000)
    tmp = a.keep or tempfile.mkdtemp(prefix="rerank_bench.")
    os.makedirs(tmp, exist_ok=True)
    loads = [os.getloadavg()]
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())

    # The model folder.
    model_dir = os.path.join(tmp, "model")
    os.makedirs(model_dir, exist_ok=True)
    rc, so, se, _, _ = py_worker(a, "model", tmp, output=model_dir, tokenizer=a.tokenizer)
    if rc != 0:
        die("building the model failed:\n" + se[-2000:])
    built = parse_result(so)
    with open(os.path.join(model_dir, "tokenizer_config.json")) as f:
        model_max = json.load(f).get("model_max_length", SHAPE["max_position_embeddings"])
    max_length = min(int(model_max), SHAPE["max_position_embeddings"])
    print("model: %s parameters in %s (tokenizer files: %s); pairs truncated at %d"
          % (built["parameters"], model_dir, ", ".join(built["tokenizer_files"]), max_length),
          flush=True)

    # The workload: one query, `count` documents, one a line.
    tokenizer_json = os.path.join(model_dir, "tokenizer.json")
    query, docs = make_workload(count, tokenizer_json)
    documents = os.path.join(tmp, "documents.txt")
    with open(documents, "w", encoding="utf-8", newline="") as f:
        f.write("".join(d + "\n" for d in docs))
    lengths = pair_tokens(tokenizer_json, query, docs, max_length)
    tokens = sum(lengths)
    print("workload: query %r; %d documents, pairs of %d-%d tokens (median %d), %d in all"
          % (query, count, min(lengths), max(lengths), statistics.median(lengths), tokens),
          flush=True)

    # Which BLAS does PyTorch's matrix product use, and does OpenBLAS (when it is that one) know
    # the CPU? Asked of the environment as it is.
    rc, so, se, _, _ = py_worker(a, "blas", tmp)
    torch_blas = parse_result(so) if rc == 0 else {"blas": "unknown (%s)" % se.strip()[-200:]}
    machine = machine_info(a.threads)
    flags = cpu_flags()
    machine["vector_flags"] = [f for f in VECTOR_FLAGS if f in flags]
    as_found = torch_blas.get("openblas_architecture")
    needs_skylakex = bool(machine["avx512"] and torch_blas.get("blas") == "openblas" and as_found
                          and not as_found.lower().startswith(("skylakex", "cooperlake",
                                                               "sapphirerapids")))
    engines = ["clattn", "st"]
    if "st-skylakex" in wanted and needs_skylakex:
        engines.append("st-skylakex")
    if "st-unsorted" in wanted:
        engines.append("st-unsorted")
    if "onnxruntime" in wanted:
        engines.append("onnxruntime")
    # st-unsorted gets the better of the two BLAS kernels: it shows the batching, not the BLAS.
    unsorted_env = {"OPENBLAS_CORETYPE": "SkylakeX"} if needs_skylakex else None
    print("PyTorch's BLAS: %s%s; engines: %s"
          % (blas_name(torch_blas), " (OPENBLAS_CORETYPE=%s)" % os.environ.get("OPENBLAS_CORETYPE")
             if as_found else "", ", ".join(engines)), flush=True)
    if torch_blas.get("blas") == "reference":
        print("warning: PyTorch's matrix products run on the reference BLAS (libblas.so.3 is "
              "not OpenBLAS): its rows say little; install libopenblas0-pthread or use a venv "
              "with PyPI's torch (--python)", file=sys.stderr, flush=True)

    onnx_path = os.path.join(tmp, "model.onnx")
    export = None
    if "onnxruntime" in engines:
        rc, so, se, _, _ = py_worker(a, "export", tmp, model=model_dir, output=onnx_path)
        if rc != 0:
            die("ONNX export failed:\n" + se[-2000:])
        export = parse_result(so)
        print("ONNX export: %.1f s, %.1f MB" % (export["seconds"], export["bytes"] / 1e6),
              flush=True)

    runs = {e: [] for e in engines}
    outputs = {e: [] for e in engines}
    for r in range(a.repeat):
        order = engines[r % len(engines):] + engines[:r % len(engines)]
        for e in order:
            out = os.path.join(tmp, "scores-%s-%d.npy" % (e, r))
            loads.append(os.getloadavg())
            if e == "clattn":
                cmd = [a.bench, "--model", model_dir, "--device", a.device, "--query", query,
                       "--input", documents, "--output", out, "--batch-size", str(BATCH)]
                rc, so, se, rss, wall = run_child(cmd, child_env(a.threads), tmp)
            elif e == "onnxruntime":
                rc, so, se, rss, wall = py_worker(a, "onnxruntime", tmp, model=model_dir,
                                                  query=query, documents=documents, output=out,
                                                  onnx=onnx_path, max_length=max_length)
            else:
                extra = ({"OPENBLAS_CORETYPE": "SkylakeX"} if e == "st-skylakex"
                         else unsorted_env if e == "st-unsorted" else None)
                rc, so, se, rss, wall = py_worker(a, e, tmp, extra_env=extra, model=model_dir,
                                                  query=query, documents=documents, output=out)
            if rc != 0:
                die("%s failed (exit %d):\n%s" % (e, rc, (se or so)[-3000:]))
            res = parse_result(so)
            res.setdefault("tokens", tokens)  # sentence-transformers does not count them
            res.update({"peak_rss_mib": round(rss, 1), "wall_s": round(wall, 3),
                        "pairs_per_s": res["count"] / res["seconds"],
                        "tokens_per_s": res["tokens"] / res["seconds"], "repetition": r})
            runs[e].append(res)
            outputs[e].append(out)
            print("  run %d  %-12s %8.1f pairs/s %9.0f tokens/s  %6.2f s  load %.2f s  "
                  "peak RSS %6.0f MiB" % (r + 1, e, res["pairs_per_s"], res["tokens_per_s"],
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
    print("cross-check against sentence-transformers (run 1), max |difference| of the scores "
          "(theirs: %.4f-%.4f, std %.2g):" % (diffs["reference"]["min"],
                                              diffs["reference"]["max"],
                                              diffs["reference"]["std"]))
    cross = {}
    for e in engines:
        ds = [diffs[f] for f in outputs[e] if f != ref]
        if any("error" in d for d in ds):
            print("  %-12s %s" % (e, [d["error"] for d in ds if "error" in d][0]))
            ok = False
            continue
        worst = max((d["max_abs"] for d in ds), default=0.0)
        cross[e] = {"max_abs": worst, "mean_abs": max((d["mean_abs"] for d in ds), default=0.0),
                    "worst_pair": max(ds, key=lambda d: d["max_abs"])["worst_pair"] if ds
                    else None}
        bad_tokens = sorted({x["tokens"] for x in runs[e]} - {tokens})
        flag = "ok" if worst < TOLERANCE and not bad_tokens else "FAIL"
        print("  %-12s %.3g  (mean %.3g, %s)%s" % (e, worst, cross[e]["mean_abs"], flag,
              "  tokens %s vs %d" % (bad_tokens, tokens) if bad_tokens else ""))
        if flag != "ok":
            ok = False
    if not ok:
        die("scores or token counts disagree with sentence-transformers beyond %g "
            "(files kept in %s)" % (TOLERANCE, tmp))

    dev = runs["clattn"][0].get("device", a.device)
    st_blas = blas_name(torch_blas)
    labels = {"clattn": "libclattn (OpenCL, %s)" % (
                  "PoCL CPU device" if dev.startswith("pthread") else dev),
              "st": "sentence-transformers CrossEncoder (PyTorch, %s)" % st_blas,
              "st-skylakex": "sentence-transformers CrossEncoder (PyTorch, OpenBLAS SkylakeX)",
              "st-unsorted": "sentence-transformers CrossEncoder, pairs in the request's order "
                             "(PyTorch, %s)" % ("OpenBLAS SkylakeX" if unsorted_env else st_blas),
              "onnxruntime": "ONNX Runtime %s (CPUExecutionProvider)" % (
                  runs["onnxruntime"][0]["versions"]["onnxruntime"]
                  if "onnxruntime" in runs else "")}
    summary = summarize(engines, runs, labels, cross, "pairs")
    versions = {"clattn": git_rev(), "pocl": pkg_version("libpocl2"),
                "clblast": pkg_version("libclblast1"),
                "openblas": pkg_version("libopenblas0-pthread"), **runs["st"][0]["versions"],
                "model_built_with": "transformers %s, torch %s" % (built["transformers"],
                                                                    built["torch"])}
    if "onnxruntime" in runs:
        versions.update(runs["onnxruntime"][0]["versions"])
        versions["onnx_export"] = "torch.onnx.export, opset %d" % export["opset"]
    result = {
        "benchmark": "reranking throughput", "started": started,
        "finished": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "model": {"architecture": "BertForSequenceClassification", **SHAPE,
                  "parameters": built["parameters"], "seed": SEED,
                  "weights": "transformers' initialisation (normal, std %g)"
                             % SHAPE["initializer_range"],
                  "tokenizer": "all-MiniLM-L6-v2's (%s)" % ", ".join(built["tokenizer_files"]),
                  "max_length": max_length},
        "machine": machine, "cpu_flags": flags, "threads": a.threads, "repeat": a.repeat,
        "batch_size": BATCH, "tolerance": TOLERANCE, "quick": bool(a.quick),
        "loadavg": loadavg_summary(loads),
        "workload": {"query": query, "documents": count, "seed": SEED, "tokens": tokens,
                     "pair_tokens": {"min": min(lengths), "median": statistics.median(lengths),
                                     "max": max(lengths)},
                     "document_tokens": list(DOC_TOKENS),
                     "document_chars": {"min": min(len(d) for d in docs),
                                        "median": statistics.median(len(d) for d in docs),
                                        "max": max(len(d) for d in docs)},
                     "truncated": sum(1 for n in lengths if n >= max_length)},
        "torch_blas": torch_blas,
        "openblas_as_found": {"OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
                              "architecture": as_found},
        "scores": diffs["reference"], "versions": versions, "clattn_device": dev,
        "clattn_max_length": runs["clattn"][0].get("max_length"),
        "summary": summary, "runs": runs,
    }
    print()
    print(table(result, "pairs"))
    if a.no_results:
        return
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "rerank.json"), "w") as f:
        json.dump(result, f, indent=1)
    with open(os.path.join(a.out, "rerank.md"), "w") as f:
        f.write(markdown(result))
    print("wrote %s/rerank.json, rerank.md" % a.out)
    if not a.keep:
        shutil.rmtree(tmp, ignore_errors=True)


def markdown(r):
    m, wl, v, la, mo = r["machine"], r["workload"], r["versions"], r["loadavg"], r["model"]
    by = {s["engine"]: s for s in r["summary"]}
    out = []
    w = out.append
    w("# Reranking throughput: libclattn, sentence-transformers' CrossEncoder, ONNX Runtime\n")
    w("Written by `bench/rerank_bench.py`%s on %s (finished %s). One query against %d "
      "documents, a BERT cross-encoder of MiniLM-L6's shape with random weights, %d "
      "repetitions of each engine, each run its own process, engines interleaved.\n"
      % (" --quick" if r["quick"] else "", r["started"], r["finished"], wl["documents"],
         r["repeat"]))
    w(shared_machine_note(r))
    w(table(r, "pairs") + "\n")
    w("pairs/s and tokens/s: one pass from the query and the documents in memory to the %d "
      "scores, tokenisation included, model loading excluded (the *load s* column), no warm-up "
      "for anyone; median over the runs, min–max in brackets. *libclattn ×*: libclattn's "
      "median pairs/s divided by that engine's (above 1: libclattn is faster). Peak RSS: the "
      "process's maximum resident set size (wait4), interpreter and libraries included. *max "
      "abs diff vs ST*: the largest absolute difference of any score (the sigmoid of the "
      "logit) from sentence-transformers' first run, over all that engine's runs (tolerance "
      "%g; its scores span %.4f–%.4f); every engine ran the same %d tokens.\n"
      % (wl["documents"], r["tolerance"], r["scores"]["min"], r["scores"]["max"],
         wl["tokens"]))
    w("## Setup\n")
    w("| | |\n|---|---|")
    w("| machine | %s, %d logical CPUs, %s RAM, Linux %s%s |"
      % (m["cpu"], m["logical_cpus"], m["memory"], m["kernel"],
         "" if not m["hypervisor"] else ", %s virtual machine" % m["hypervisor"]))
    w("| CPU vector flags | %s |" % " ".join(m["vector_flags"]))
    w(threads_row(r))
    w("| model | `BertForSequenceClassification`, hidden %d, %d layers, %d heads, intermediate "
      "%d, vocabulary %d, %d positions, one label, %s parameters; random weights "
      "(transformers' initialisation with `initializer_range` %g, `torch.manual_seed(%d)`), "
      "saved with safetensors by %s; "
      "tokenizer: %s; pairs truncated longest-first at %d tokens |"
      % (mo["hidden_size"], mo["num_hidden_layers"], mo["num_attention_heads"],
         mo["intermediate_size"], mo["vocab_size"], mo["max_position_embeddings"],
         "{:,}".format(mo["parameters"]), mo["initializer_range"], mo["seed"],
         v["model_built_with"], mo["tokenizer"],
         mo["max_length"]))
    w("| libclattn | `bench/rerank_bench` (`clattn_cross_encoder_score` over all pairs, batches "
      "of %d) at %s; OpenCL device *%s* (PoCL %s), CLBlast %s |"
      % (r["batch_size"], v["clattn"], r["clattn_device"], v["pocl"], v["clblast"]))
    tb = r["torch_blas"]
    if tb.get("blas") == "openblas":
        blas = ("OpenBLAS %s (Debian %s): kernel **%s** as the environment is (OPENBLAS_CORETYPE "
                "%s)%s" % (tb.get("openblas_version"), v["openblas"], tb["openblas_architecture"],
                           r["openblas_as_found"]["OPENBLAS_CORETYPE"] or "unset",
                           "; **SkylakeX** with OPENBLAS_CORETYPE=SkylakeX (the *SkylakeX* row)"
                           if "st-skylakex" in by else ""))
    else:
        blas = "its BLAS: %s" % blas_name(tb)
    w("| sentence-transformers | %s, PyTorch %s (CPU capability %s), transformers %s, "
      "`CrossEncoder(DIR, device=\"cpu\").predict(pairs, batch_size=%d)`, the pairs handed "
      "to it sorted by decreasing document length (predict keeps the order it is given); %s |"
      % (v["sentence_transformers"], v["torch"], tb.get("cpu_capability") or "unknown",
         v["transformers"], r["batch_size"], blas))
    if "onnxruntime" in by:
        w("| ONNX Runtime | %s, CPUExecutionProvider, all graph optimisations; model: the same "
          "folder through transformers' AutoModelForSequenceClassification, exported by %s "
          "(torch %s), dynamic batch and sequence axes, token_type_ids included; tokenizers %s "
          "(pairs, longest-first truncation, padding to the batch's longest); the same "
          "batches of %d as sentence-transformers; the sigmoid in numpy %s |"
          % (v["onnxruntime"], v["onnx_export"], v["torch"], v["tokenizers"], r["batch_size"],
             v["numpy"]))
    w("| Python | %s |" % v["python"])
    w("| workload | one query (%r) and %d documents generated from a seed (%d, no download) "
      "over a fixed English word list with numbers, punctuation and some accented words: "
      "documents of %d–%d tokens (about 30 %% of 16–50, 45 %% of 50–120, 25 %% of 120–200), "
      "%d–%d characters; pairs of %d–%d tokens (median %g) with [CLS]/[SEP], %d tokens in "
      "all, %d truncated |"
      % (wl["query"], wl["documents"], wl["seed"], wl["document_tokens"][0],
         wl["document_tokens"][1], wl["document_chars"]["min"], wl["document_chars"]["max"],
         wl["pair_tokens"]["min"], wl["pair_tokens"]["max"], wl["pair_tokens"]["median"],
         wl["tokens"], wl["truncated"]))
    w(load_row(r))
    if "st-skylakex" in by:
        w(skylakex_note(r))
    if "st-unsorted" in by:
        w("**Batching.** The *request's order* row is `predict` on the pairs as they come: "
          "each batch of %d is padded to its longest pair, so it runs more padding than the "
          "length-sorted batches of every other row.\n" % r["batch_size"])
    w("Everything, each run included: `rerank.json`.\n")
    w("## For the README\n")
    rel = []
    for e in ("st-skylakex", "st", "st-unsorted", "onnxruntime"):
        if e in by:
            rel.append("%.2f× %s" % (by[e]["clattn_relative"], {
                "st": "sentence-transformers (PyTorch, %s%s)" % (
                    blas_name(r["torch_blas"]), ", as the environment is"
                    if "st-skylakex" in by else ""),
                "st-skylakex": "sentence-transformers with OpenBLAS's AVX-512 kernels",
                "st-unsorted": "sentence-transformers on the pairs in the request's order",
                "onnxruntime": "ONNX Runtime"}[e]))
    w("### Reranking throughput\n")
    w("A cross-encoder of MiniLM-L6's shape (BERT, hidden 384, 6 layers, random weights), one "
      "query against %d generated documents of 16–200 tokens (%d tokens in all), %d threads "
      "for every engine, on a %d-core %s%s (`bench/rerank_bench.py`, median of %d interleaved "
      "runs; the machine was shared, load average %.1f–%.1f):\n"
      % (wl["documents"], wl["tokens"], r["threads"], m["logical_cpus"], m["cpu"],
         " VM" if m["hypervisor"] else "", r["repeat"], la["min"], la["max"]))
    out.extend(readme_table(r, "pairs"))
    w("")
    w("libclattn's speed relative to each: %s. All scores agree with sentence-transformers' to "
      "%.1e (max abs). Details and versions: `bench/results/rerank.md`.\n"
      % ("; ".join(rel), max(s["cross_check"]["max_abs"] for s in r["summary"])))
    return "\n".join(out)


if __name__ == "__main__":
    main()
