#!/usr/bin/env python3
"""Logit accuracy of libclattn on the K-quant GGUF files of the LLM benchmark (the random models in
Qwen3-0.6B's shape that bench/llm/make_models.py writes), against transformers in float64 on the
same dequantised weights. A measurement, never a test (bench/llm/README.md).

usage: ~/.cache/clattn/golden-venv/bin/python bench/llm/accuracy.py
           [--models DIR] [--types q4_k_m,q5_k_m,q6_k,q8_0] [--tokens 48] [--seed 35]
           [--device SPEC] [--bound 1e-3] [--out bench/results] [--markdown-only]

Run it with the golden venv (torch, transformers, gguf-py, numpy) and libclattn's Python package
on the path: PYTHONPATH=python CLATTN_LIBRARY=build/src/libclattn.so.

For each file qwen3-0.6b-shape-<type>.gguf under --models:
  ids           --tokens ids drawn with numpy's default_rng(--seed) from the file's NORMAL tokens
                (tokenizer.ggml.token_type 1): one teacher-forced prompt, the same for every file.
  transformers  AutoModelForCausalLM.from_pretrained(dir, gguf_file=FILE, dtype=torch.float64)
                (gguf-py dequantises every tensor; the output is tied as the file has no
                output.weight), one forward pass of the ids: float64 logits [n, vocab].
  libclattn     clattn.LLM(FILE, device=--device).logits(ids): float32 logits [n, vocab].
Each engine runs in its own process, one model at a time (transformers' float64 model of 0.6 B
parameters holds about 5 GB), and its peak resident memory is recorded.

Printed and written, per file: the largest |libclattn - transformers| over every position and
every logit (and where), the largest |logit| for scale, the smallest gap between transformers' two
largest logits over the positions (where a near-tie could flip greedy's choice), and whether the
argmax agrees at every position (each disagreement with its top-2 gap, a near-tie when the gap is
within twice the measured error). "within bound" compares the error with --bound (1e-3, the bound
the issue sets for SmolLM2-135M Q4_1). Random weights give flat distributions (small gaps): the
figures are reported as they are.

Results: <out>/llm_accuracy.json (every figure, the ids, versions) and <out>/llm_accuracy.md.
"""
import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

HOME = os.path.expanduser("~")
DEFAULT_MODELS = os.path.join(HOME, ".cache/clattn/bench-models")
DEFAULT_TYPES = "q4_k_m,q5_k_m,q6_k,q8_0"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def log(msg):
    print("accuracy: " + msg, file=sys.stderr, flush=True)


def model_file(models, qtype):
    return os.path.join(models, f"qwen3-0.6b-shape-{qtype}.gguf")


def file_facts(path, n_ids, seed):
    """The file's tensor types (count per type) and n_ids seeded ids among its NORMAL tokens."""
    import gguf
    reader = gguf.GGUFReader(path)
    types = {}
    for t in reader.tensors:
        types[t.tensor_type.name] = types.get(t.tensor_type.name, 0) + 1
    token_type = np.asarray(reader.fields["tokenizer.ggml.token_type"].contents())
    normal = np.flatnonzero(token_type == int(gguf.TokenType.NORMAL))
    ids = np.random.default_rng(seed).choice(normal, size=n_ids, replace=False)
    return dict(sorted(types.items())), [int(i) for i in ids]


# --- workers: one engine, one file, in their own process ---------------------------------------

def worker_transformers(path, ids):
    import torch
    from transformers import AutoModelForCausalLM
    torch.set_num_threads(2)
    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(os.path.dirname(path),
                                                 gguf_file=os.path.basename(path),
                                                 dtype=torch.float64)
    model.eval()
    t1 = time.perf_counter()
    with torch.no_grad():
        logits = model(torch.tensor(ids)[None]).logits[0].numpy().astype(np.float64)
    t2 = time.perf_counter()
    info = {"load_s": t1 - t0, "logits_s": t2 - t1,
            "tie_word_embeddings": bool(model.config.tie_word_embeddings),
            "lm_head_is_embedding": bool(model.lm_head.weight.data_ptr()
                                         == model.model.embed_tokens.weight.data_ptr())}
    return logits, info


def worker_clattn(path, ids, device):
    import clattn
    t0 = time.perf_counter()
    llm = clattn.LLM(path, device=device)
    t1 = time.perf_counter()
    logits = llm.logits(ids)
    t2 = time.perf_counter()
    info = {"load_s": t1 - t0, "logits_s": t2 - t1, "architecture": llm.architecture,
            "vocab_size": llm.vocab_size, "library": clattn._lib.library_path(),
            "device": llm._context.device()["name"]}  # the package's only device query
    llm.close()
    return logits, info


def run_worker(a):
    ids = [int(i) for i in np.load(a.ids_file)]
    if a.worker == "transformers":
        logits, info = worker_transformers(a.worker_model, ids)
    else:
        logits, info = worker_clattn(a.worker_model, ids, a.device)
    np.save(a.logits_file, logits)
    info["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    with open(a.logits_file + ".json", "w") as f:
        json.dump(info, f)


def run_engine(engine, path, ids_file, tmp, device):
    out = os.path.join(tmp, f"{engine}.npy")
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", engine, "--worker-model", path,
           "--ids-file", ids_file, "--logits-file", out]
    if device:
        cmd += ["--device", device]
    log(f"{engine}: {os.path.basename(path)}")
    env = dict(os.environ, TQDM_DISABLE="1")  # transformers' per-tensor progress bar
    r = subprocess.run(cmd, env=env)
    if r.returncode != 0:
        return None, {"error": f"{engine} worker exited with status {r.returncode} (its stderr "
                               "is above)"}
    with open(out + ".json") as f:
        info = json.load(f)
    logits = np.load(out)
    os.remove(out)
    return logits, info


# --- comparison -----------------------------------------------------------------------------------

def compare(ref, got, bound):
    """Figures of got (float32) against ref (float64), both [n, vocab]."""
    diff = np.abs(got.astype(np.float64) - ref)
    pos, col = np.unravel_index(int(np.argmax(diff)), diff.shape)
    max_err = float(diff[pos, col])
    top2 = np.sort(ref, axis=1)[:, -2:]
    gaps = top2[:, 1] - top2[:, 0]
    ref_arg = np.argmax(ref, axis=1)
    got_arg = np.argmax(got, axis=1)
    disagree = [{"position": int(p), "transformers": int(ref_arg[p]), "clattn": int(got_arg[p]),
                 "top2_gap": float(gaps[p]), "near_tie": bool(gaps[p] <= 2 * max_err)}
                for p in np.flatnonzero(ref_arg != got_arg)]
    return {
        "max_abs_diff": max_err,
        "max_abs_diff_at": {"position": int(pos), "token": int(col)},
        "max_abs_diff_per_position": [float(x) for x in diff.max(axis=1)],
        "mean_abs_diff": float(diff.mean()),
        "max_abs_logit": float(np.abs(ref).max()),
        "logit_std": float(ref.std()),
        "min_top2_gap": float(gaps.min()),
        "min_top2_gap_position": int(np.argmin(gaps)),
        "top2_gaps": [float(g) for g in gaps],
        "argmax_agree_positions": int(np.sum(ref_arg == got_arg)),
        "argmax_agree_all": not disagree,
        "argmax_disagreements": disagree,
        "within_bound": bool(max_err <= bound),
        "finite": bool(np.isfinite(got).all()),
    }


def versions():
    out = {"python": platform.python_version()}
    for name in ("numpy", "torch", "transformers", "gguf"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    try:
        out["libclattn_commit"] = subprocess.run(
            ["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
            check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
        if dirty:
            out["libclattn_commit"] += " (working tree with uncommitted changes)"
    except (OSError, subprocess.CalledProcessError):
        out["libclattn_commit"] = "unknown"
    return out


def fmt(x):
    return f"{x:.3g}" if x >= 1e-3 or x == 0 else f"{x:.2e}"


def write_markdown(path, report):
    r = report
    lines = [
        "# LLM logit accuracy: Qwen3-0.6B-shaped random K-quant models",
        "",
        f"Made by `bench/llm/accuracy.py` on {r['date']} ({r['machine']}). libclattn "
        f"({r['versions']['libclattn_commit']}, OpenCL device {r.get('device_name', '?')}) "
        f"`clattn.LLM(path).logits(ids)` in float32 against transformers "
        f"{r['versions']['transformers']} (torch {r['versions']['torch']}, gguf-py "
        f"{r['versions']['gguf']}) in float64 on the same dequantised weights, teacher-forced on "
        f"one prompt of {r['tokens']} ids (numpy default_rng({r['seed']}) among the vocabulary's "
        f"normal tokens). Models: `bench/llm/make_models.py` (qwen3, hidden 1024, 28 layers, 16 "
        f"heads on 8 KV heads, d_ff 3072, vocabulary 151936, tied output; random N(0, 0.02) "
        f"weights written in F16, quantised by llama.cpp's `llama-quantize`).",
        "",
        f"Bound: {r['bound']:g} (the issue's bound for SmolLM2-135M Q4_1). Random weights give "
        "flat distributions: the top-2 gaps are small, so greedy agreement is a strict check here.",
        "",
        "| file | tensor types | max \\|Δ\\| (position) | within bound | max \\|logit\\| "
        "| min top-2 gap (position) | argmax agrees | transformers s | libclattn s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for m in r["models"]:
        if "error" in m:
            lines.append(f"| {m['file']} | | {m['error']} | | | | | | |")
            continue
        types = ", ".join(f"{k} {v}" for k, v in m["tensor_types"].items())
        c = m["comparison"]
        agree = (f"{c['argmax_agree_positions']}/{len(m['ids'])}"
                 + ("" if c["argmax_agree_all"] else
                    " (" + "; ".join(f"pos {d['position']}: gap {fmt(d['top2_gap'])}"
                                     + (", near-tie" if d["near_tie"] else "")
                                     for d in c["argmax_disagreements"]) + ")"))
        t, k = m["transformers"], m["clattn"]
        lines.append(
            f"| {m['file']} | {types} | {fmt(c['max_abs_diff'])} ({c['max_abs_diff_at']['position']}) "
            f"| {'yes' if c['within_bound'] else 'NO'} | {c['max_abs_logit']:.3g} "
            f"| {fmt(c['min_top2_gap'])} ({c['min_top2_gap_position']}) | {agree} "
            f"| {t['load_s']:.0f} load + {t['logits_s']:.1f} "
            f"| {k['load_s']:.1f} load + {k['logits_s']:.2f} |")
    lines += ["", "Times: wall seconds of each engine's own process (transformers' load includes "
              "gguf-py's dequantisation of every tensor), on a shared machine: not speed figures "
              "(those are `llm_peers.md`'s). Every figure, the ids, each position's error and gap "
              "and each process's peak RSS: `llm_accuracy.json`.", ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def save(out, report):
    """Writes the report so far (a run stopped part-way leaves what it measured)."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "llm_accuracy.json"), "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    write_markdown(os.path.join(out, "llm_accuracy.md"), report)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=DEFAULT_MODELS)
    ap.add_argument("--types", default=DEFAULT_TYPES,
                    help=f"comma-separated file types (default {DEFAULT_TYPES})")
    ap.add_argument("--tokens", type=int, default=48, help="prompt length in ids (default 48)")
    ap.add_argument("--seed", type=int, default=35)
    ap.add_argument("--device", default=None, help="clattn.LLM's device (default: its own)")
    ap.add_argument("--bound", type=float, default=1e-3)
    ap.add_argument("--out", default=os.path.join(REPO, "bench", "results"))
    ap.add_argument("--markdown-only", action="store_true",
                    help="rewrite <out>/llm_accuracy.md from <out>/llm_accuracy.json; run nothing")
    ap.add_argument("--worker", choices=["transformers", "clattn"], help=argparse.SUPPRESS)
    ap.add_argument("--worker-model", help=argparse.SUPPRESS)
    ap.add_argument("--ids-file", help=argparse.SUPPRESS)
    ap.add_argument("--logits-file", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        run_worker(a)
        return 0
    if a.markdown_only:
        with open(os.path.join(a.out, "llm_accuracy.json")) as f:
            write_markdown(os.path.join(a.out, "llm_accuracy.md"), json.load(f))
        return 0
    if a.tokens < 1:
        ap.error("--tokens must be at least 1")
    types = [t.strip().lower() for t in a.types.split(",") if t.strip()]
    paths = [model_file(a.models, t) for t in types]
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        print("accuracy: missing " + ", ".join(missing) + " (make them with "
              "bench/llm/make_models.py)", file=sys.stderr)
        return 2
    report = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
              "device": a.device, "tokens": a.tokens, "seed": a.seed, "bound": a.bound, "versions": versions(),
              "ids": None, "models": []}
    status = 0
    with tempfile.TemporaryDirectory(prefix="clattn-accuracy-") as tmp:
        for path in paths:
            entry = {"file": os.path.basename(path), "bytes": os.path.getsize(path)}
            try:
                entry["tensor_types"], ids = file_facts(path, a.tokens, a.seed)
            except Exception as e:  # noqa: BLE001 - gguf-py's errors on a bad file vary
                entry["error"] = f"gguf-py cannot read it: {type(e).__name__}: {e}"
                log(f"{entry['file']}: {entry['error']}")
                report["models"].append(entry)
                save(a.out, report)
                status = 1
                continue
            if report["ids"] is None:
                report["ids"] = ids
            elif ids != report["ids"]:
                entry["note"] = "different ids (another vocabulary)"
            entry["ids"] = ids
            ids_file = os.path.join(tmp, "ids.npy")
            np.save(ids_file, np.asarray(ids, np.int64))
            ref, entry["transformers"] = run_engine("transformers", path, ids_file, tmp, a.device)
            got, entry["clattn"] = (None, {}) if ref is None else \
                run_engine("clattn", path, ids_file, tmp, a.device)
            if "device" in entry["clattn"]:
                report["device_name"] = entry["clattn"]["device"]
            failed = "error" in entry["transformers"] or "error" in entry["clattn"]
            if failed:
                entry["error"] = entry["transformers"].get("error") or entry["clattn"]["error"]
                status = 1
                log(f"{entry['file']}: {entry['error']}")
            else:
                c = compare(ref, got, a.bound)
                entry["comparison"] = c
                print(f"{entry['file']}: max |diff| {c['max_abs_diff']:.3e} at position "
                      f"{c['max_abs_diff_at']['position']} (bound {a.bound:g}: "
                      f"{'within' if c['within_bound'] else 'OVER'}), max |logit| "
                      f"{c['max_abs_logit']:.3g}, min top-2 gap {c['min_top2_gap']:.3e} at "
                      f"position {c['min_top2_gap_position']}, argmax agrees "
                      f"{c['argmax_agree_positions']}/{len(ids)}", flush=True)
            report["models"].append(entry)
            save(a.out, report)
    return status


if __name__ == "__main__":
    sys.exit(main())
