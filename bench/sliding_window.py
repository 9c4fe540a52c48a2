#!/usr/bin/env python3
"""Sliding-window attention's cost against the sequence length: clattn_sdpa (fused path) on
q, k, v [1, H, N, d] with a window w, for N = 1024 … 8192 and w = 128, 512, beside full
attention where it stays affordable. At a fixed w the time should grow linearly in N (the fused
kernel skips the key blocks outside the windows), full attention's quadratically.

usage: python3 bench/sliding_window.py --bench build/bench/clattn_bench [--out FILE.md]
       [--lengths 1024,2048,4096,8192] [--windows 128,512] [--full-max 4096] [--heads 4]
       [--dim 256] [--repeat 5]
Writes a Markdown table (and the raw JSON lines after it) to --out, default
bench/results/sliding_window.md, with the device and the CPU's flags.
"""
import argparse
import json
import os
import platform
import subprocess


def run(bench, n, window, heads, dim, repeat):
    cmd = [bench, "attention-fused", "--batch", "1", "--seq", str(n), "--heads", str(heads),
           "--dim", str(dim), "--repeat", str(repeat), "--window", str(window)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True)
    ap.add_argument("--out", default=os.path.join(here, "results", "sliding_window.md"))
    ap.add_argument("--lengths", default="1024,2048,4096,8192")
    ap.add_argument("--windows", default="128,512")
    ap.add_argument("--full-max", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    lengths = [int(x) for x in a.lengths.split(",")]
    windows = [int(x) for x in a.windows.split(",")] + [0]
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    rows, raw = {}, []
    for w in windows:
        for n in lengths:
            if w == 0 and n > a.full_max:
                continue
            r = run(a.bench, n, w, a.heads, a.dim, a.repeat)
            raw.append(r)
            rows[(w, n)] = (r["ms_min"], r["ms_median"])
            print(f"w={w or 'full'} N={n}: min {r['ms_min']:.2f} ms, "
                  f"median {r['ms_median']:.2f} ms", flush=True)
    device = raw[0]["device"] if raw else "?"
    d = a.dim // a.heads
    lines = [
        "# Sliding-window attention: time against N",
        "",
        f"`bench/sliding_window.py`: `clattn_sdpa`, fused path, q/k/v [1, {a.heads}, N, {d}], "
        f"the best and the median of {a.repeat} runs after a warm-up (ms). Window w: query i "
        "sees keys |i - j| <= w/2; the fused kernel skips the key blocks outside every window "
        "of a work-item. The last column is the best time divided by N/1024 (constant when the "
        "cost is linear in N).",
        "",
        f"Load average (1, 5, 15 min) when the run started: {load} (a shared machine).",
        "",
        f"Device: {device}. CPU: {cpu_model()}, {os.cpu_count()} logical CPUs.",
        "",
        "| w | " + " | ".join(f"N = {n}: best (median)" for n in lengths) +
        " | best ms per 1024 tokens |",
        "|---|" + "---|" * len(lengths) + "---|",
    ]
    for w in windows:
        cells, per = [], []
        for n in lengths:
            t = rows.get((w, n))
            cells.append(f"{t[0]:.2f} ({t[1]:.2f})" if t is not None else "—")
            if t is not None:
                per.append(f"{t[0] / (n / 1024):.2f}")
        lines.append(f"| {w or 'full'} | " + " | ".join(cells) + " | " + ", ".join(per) + " |")
    lines += ["", "CPU flags (`grep flags /proc/cpuinfo`):", "", "```", cpu_flags(), "```", "",
              "Raw results (clattn_bench JSON):", "", "```"]
    lines += [json.dumps(r) for r in raw]
    lines += ["```", ""]
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        f.write("\n".join(lines))
    print("wrote", a.out)


if __name__ == "__main__":
    main()
