#!/usr/bin/env python3
"""What batch invariance costs: two builds of libclattn (before and after a change) timed in
interleaved rounds on the same machine, in one run.

    python3 bench/batch_invariance.py --before OLD_BUILD --after NEW_BUILD \
        --model "$(tools/fetch-model.sh)" [--rounds 3] [--out bench/results]

Measures, for each build, round by round (A B A B ... so that the machine's drift hits both):
  - texts/s of examples/embed on bench/embed_bench.py's mixed corpus (1000 texts, about 31 000
    tokens, all-MiniLM-L6-v2), from embed's own --json (tokenisation to normalised embeddings);
  - one base encoder layer (E 512, 8 heads, d_ff 2048, post-LN relu) at B4xN1024 and B32xN128:
    bench/clattn_bench encoder-layer's median ms;
  - one decoding step of the base decoder (bench/decode_step, auto split-key attention) at 256,
    1024 and 4096 cached tokens.
Each figure is the median over rounds; the table gives after/before. Writes
OUT/batch_invariance.md and .json (unless --no-results). Never run as a test.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from embed_bench import make_corpus  # noqa: E402  (the same corpus as the embedding benchmark)


def run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()
    try:
        return json.loads(out)  # one object, possibly over several lines
    except json.JSONDecodeError:
        return json.loads(out.splitlines()[-1])  # the object on the last line


def embed_texts_per_s(build, model, corpus, out_npy):
    j = run_json([os.path.join(build, "examples", "embed"), "--model", model, "--input", corpus,
                  "--output", out_npy, "--json"])
    return j["texts_per_s"]


def layer_ms(build, batch, seq, repeat):
    j = run_json([os.path.join(build, "bench", "clattn_bench"), "encoder-layer", "--batch",
                  str(batch), "--seq", str(seq), "--repeat", str(repeat)])
    return j["ms_median"]


def decode_ms(build, lengths, repeat):
    j = run_json([os.path.join(build, "bench", "decode_step"), "--lengths",
                  ",".join(str(n) for n in lengths), "--repeat", str(repeat)])
    return {row["length"]: row["auto_ms"] for row in j["rows"]}


def cpu_flags():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            info = fh.read()
    except OSError:
        return "", ""
    model = next((l.split(":", 1)[1].strip() for l in info.splitlines()
                  if l.startswith("model name")), "")
    flags = next((l.split(":", 1)[1].split() for l in info.splitlines()
                  if l.startswith("flags")), [])
    keep = [f for f in flags if f.startswith(("avx", "fma", "amx")) or f in ("f16c",)]
    return model, " ".join(keep)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", required=True, help="build directory of the old code")
    ap.add_argument("--after", required=True, help="build directory of the new code")
    ap.add_argument("--model", required=True, help="all-MiniLM-L6-v2's folder")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--count", type=int, default=1000, help="texts in the corpus")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--no-results", action="store_true")
    args = ap.parse_args()

    builds = {"before": args.before, "after": args.after}
    figures = {name: {"embed": [], "B4xN1024": [], "B32xN128": [], "decode": []}
               for name in builds}
    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "corpus.txt")
        with open(corpus, "w", encoding="utf-8") as fh:
            fh.write("\n".join(make_corpus(args.count)) + "\n")
        for r in range(args.rounds):
            for name, build in builds.items():
                f = figures[name]
                f["embed"].append(embed_texts_per_s(build, args.model, corpus,
                                                    os.path.join(tmp, name + ".npy")))
                f["B4xN1024"].append(layer_ms(build, 4, 1024, 3))
                f["B32xN128"].append(layer_ms(build, 32, 128, 5))
                f["decode"].append(decode_ms(build, [256, 1024, 4096], 9))
                print(f"round {r + 1} {name}: {f['embed'][-1]:.1f} texts/s, "
                      f"B4xN1024 {f['B4xN1024'][-1]:.1f} ms, B32xN128 {f['B32xN128'][-1]:.1f} ms, "
                      f"decode {f['decode'][-1]}", flush=True)
        same = open(os.path.join(tmp, "before.npy"), "rb").read() == \
            open(os.path.join(tmp, "after.npy"), "rb").read()

    med = {}
    for name in builds:
        f = figures[name]
        med[name] = {"embed": statistics.median(f["embed"]),
                     "B4xN1024": statistics.median(f["B4xN1024"]),
                     "B32xN128": statistics.median(f["B32xN128"])}
        for n in (256, 1024, 4096):
            med[name][f"decode{n}"] = statistics.median(d[n] for d in f["decode"])
    cpu, flags = cpu_flags()
    rows = [("embed, mixed corpus (texts/s, higher is better)", "embed"),
            ("encoder layer B4xN1024 (ms)", "B4xN1024"),
            ("encoder layer B32xN128 (ms)", "B32xN128"),
            ("decode step, 256 cached tokens (ms)", "decode256"),
            ("decode step, 1024 cached tokens (ms)", "decode1024"),
            ("decode step, 4096 cached tokens (ms)", "decode4096")]
    lines = ["# Batch invariance: cost", "",
             f"{cpu} ({os.cpu_count()} CPUs; {flags}), {platform.system()}; the default OpenCL "
             f"device; median of {args.rounds} interleaved rounds. before: `{args.before}`, "
             f"after: `{args.after}`. Embeddings of the two builds byte-identical: "
             f"{'yes' if same else 'no'}.", "",
             "| measure | before | after | after/before |", "|---|---|---|---|"]
    for label, key in rows:
        b, a = med["before"][key], med["after"][key]
        lines.append(f"| {label} | {b:.2f} | {a:.2f} | {a / b:.3f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.no_results:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "batch_invariance.md"), "w", encoding="utf-8") as fh:
            fh.write(text)
        with open(os.path.join(args.out, "batch_invariance.json"), "w", encoding="utf-8") as fh:
            json.dump({"figures": figures, "medians": med, "cpu": cpu, "flags": flags}, fh,
                      indent=1)


if __name__ == "__main__":
    sys.exit(main())
