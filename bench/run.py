#!/usr/bin/env python3
"""libclattn's benchmark: ours against PyTorch on the same machine, in the same run.

usage: run.py --bench CLATTN_BENCH --encode ENCODE [--out DIR] [--shapes 4x1024,1x4096,...]
              [--repeat R] [--torch-python PATH] [--no-torch] [--peak-gflops P] [--sweep]

For each shape (batch x sequence, E 512, 8 heads, d_ff 2048), in separate processes so that each
peak memory is its own: our fused and unfused attention core (scores + softmax + weights·V), our
multi-head attention layer and our encoder layer; PyTorch's attention core (bmm, softmax, bmm),
nn.MultiheadAttention and nn.TransformerEncoderLayer (2 threads, torch.no_grad(), eval()); and,
from `encode --profile`, the GFLOP/s of our projection GEMMs. PyTorch is skipped where its score
matrix would not fit in memory (ours then runs alone). Writes DIR/results.json, DIR/results.md
and, when matplotlib is importable, DIR/throughput.png (attention throughput against sequence
length, with --sweep).

Throughput is given in multiply-adds per second (fvcore's "FLOP", the convention of the
library's counters); multiply by 2 for the two-FLOPs-per-multiply-add convention.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OURS = ["attention-fused", "attention-unfused", "mha", "encoder-layer"]
THEIRS = ["attention", "mha", "encoder-layer"]
# Above this many score elements PyTorch's attention needs more memory than this class of
# machine has to spare (2^31 floats: 16 GiB at its peak): only the fused path runs.
MAX_SCORES = 2 ** 31
# The unfused path's kernels are written for correctness (attention weights), not speed: above
# this many score elements it would take minutes, so it is left out.
MAX_UNFUSED_SCORES = 2 ** 28


def run_json(cmd, timeout):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": "timed out after %d s" % timeout}
    if out.returncode != 0:
        return {"error": (out.stderr.strip() or out.stdout.strip())[-300:]}
    text = out.stdout.strip()
    try:
        return json.loads(text)  # encode --json prints one indented object
    except ValueError:
        return json.loads(text.splitlines()[-1])


def projection_gemms(encode, batch, seq):
    """GFLOP/s of our projection GEMMs, from encode's per-kernel profile (2 base layers)."""
    r = run_json([encode, "--config", "C-N2", "--batch", str(batch), "--seq", str(seq),
                  "--repeat", "2", "--profile", "--json"], 1200)
    if "error" in r:
        return r
    passes = r["timed_passes"] + 1
    ops = r["flops_by_operation"]
    gemm = {}
    for k in r.get("kernels", []):
        if k["name"].startswith("gemm:"):
            op = k["name"][5:]
            gemm[op] = {"ms_per_pass": k["total_ms"] / passes,
                        "gmacs": ops[op] * 1e-6 / (k["total_ms"] / passes)}
    return gemm


def measure(args, batch, seq):
    row = {"batch": batch, "seq": seq, "ours": {}, "torch": {}}
    scores = batch * 8 * seq * seq
    for what in OURS:
        if what == "attention-unfused" and scores > MAX_UNFUSED_SCORES:
            row["ours"][what] = {"skipped": "score matrix of %d floats" % scores}
            continue
        cmd = [args.bench, what, "--batch", str(batch), "--seq", str(seq),
               "--repeat", str(args.repeat if seq < 8192 else 1)]
        row["ours"][what] = run_json(cmd, 3600)
        print("  ours  %-18s %s" % (what, short(row["ours"][what])), flush=True)
    for what in THEIRS:
        if args.no_torch:
            break
        if scores > MAX_SCORES:
            row["torch"][what] = {"skipped": "score matrix of %d floats (memory)" % scores}
            continue
        cmd = [args.torch_python, os.path.join(HERE, "torch_bench.py"), what, "--batch",
               str(batch), "--seq", str(seq), "--repeat", str(args.repeat)]
        row["torch"][what] = run_json(cmd, 3600)
        print("  torch %-18s %s" % (what, short(row["torch"][what])), flush=True)
    if seq * batch <= 4096:
        row["gemm"] = projection_gemms(args.encode, batch, seq)
    return row


def short(r):
    if "error" in r:
        return "ERROR " + r["error"]
    if "skipped" in r:
        return "skipped (%s)" % r["skipped"]
    return "%9.1f ms  %7.2f GMAC/s  peak %7.1f MiB" % (r["ms_median"], r["gflops"],
                                                          r["peak_rss_mib"])


def ratio(ours, theirs):
    if "ms_median" not in ours or "ms_median" not in theirs:
        return None
    return theirs["ms_median"] / ours["ms_median"]


def table(rows, peak):
    lines = ["| shape | operation | libclattn ms | GMAC/s | peak MiB | PyTorch ms | GMAC/s | "
             "peak MiB | speed vs PyTorch |", "|---|---|---|---|---|---|---|---|---|"]
    pairs = [("attention core (fused)", "attention-fused", "attention"),
             ("attention core (unfused)", "attention-unfused", "attention"),
             ("multi-head attention", "mha", "mha"),
             ("encoder layer", "encoder-layer", "encoder-layer")]
    for row in rows:
        shape = "B%d x N%d" % (row["batch"], row["seq"])
        for label, ours_key, theirs_key in pairs:
            o = row["ours"].get(ours_key, {})
            t = row["torch"].get(theirs_key, {})

            def cells(r):
                if "ms_median" in r:
                    return "%.1f | %.2f | %.0f" % (r["ms_median"], r["gflops"], r["peak_rss_mib"])
                return "%s | | " % ("skipped" if "skipped" in r else ("error" if r else "-"))
            rr = ratio(o, t)
            lines.append("| %s | %s | %s | %s | %s |" % (shape, label, cells(o), cells(t),
                                                          "%.2fx" % rr if rr else "-"))
    lines.append("")
    lines.append("Projection GEMMs (CLBlast, from `encode --profile`, 2 base layers):")
    lines.append("")
    lines.append("| shape | GEMM | ms per pass | GMAC/s |" + (" of peak |" if peak else ""))
    lines.append("|---|---|---|---|" + ("---|" if peak else ""))
    for row in rows:
        for op, g in sorted(row.get("gemm", {}).items()):
            if isinstance(g, dict) and "gmacs" in g:
                extra = " %.0f%% |" % (100 * 2 * g["gmacs"] / peak) if peak else ""
                lines.append("| B%d x N%d | %s | %.1f | %.2f |%s" % (
                    row["batch"], row["seq"], op, g["ms_per_pass"], g["gmacs"], extra))
    return "\n".join(lines) + "\n"


def plot(sweep, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not importable: no plot (Debian: python3-matplotlib)")
        return False
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, label in [("ours", "libclattn fused attention"), ("torch", "PyTorch bmm-softmax-bmm")]:
        pts = [(s["seq"], s[key]["gflops"]) for s in sweep if "gflops" in s.get(key, {})]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sequence length N (batch = 4096 / N, 8 heads of 64)")
    ax.set_ylabel("G multiply-adds / s")
    ax.set_title("Attention core throughput")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", required=True)
    ap.add_argument("--encode", required=True)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--shapes", default="4x1024,1x4096,32x128,1x16384")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--torch-python", default=os.environ.get("TORCH_PYTHON", "/usr/bin/python3"))
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--peak-gflops", type=float, default=0.0,
                    help="the device's fp32 peak (2 FLOPs per multiply-add) for the GEMM table")
    ap.add_argument("--sweep", action="store_true",
                    help="also sweep the attention core over N = 128..4096 for the plot")
    args = ap.parse_args()
    if not args.no_torch:
        probe = subprocess.run([args.torch_python, "-c", "import torch"], capture_output=True)
        if probe.returncode != 0:
            print("PyTorch is not importable with %s: ours only" % args.torch_python)
            args.no_torch = True
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for shape in args.shapes.split(","):
        batch, seq = (int(x) for x in shape.lower().split("x"))
        print("B%d x N%d" % (batch, seq), flush=True)
        rows.append(measure(args, batch, seq))
    sweep = []
    if args.sweep:
        for seq in [128, 256, 512, 1024, 2048, 4096]:
            batch = max(1, 4096 // seq)
            entry = {"seq": seq, "batch": batch,
                     "ours": run_json([args.bench, "attention-fused", "--batch", str(batch),
                                       "--seq", str(seq), "--repeat", str(args.repeat)], 1200)}
            if not args.no_torch:
                entry["torch"] = run_json([args.torch_python, os.path.join(HERE, "torch_bench.py"),
                                           "attention", "--batch", str(batch), "--seq", str(seq),
                                           "--repeat", str(args.repeat)], 1200)
            print("sweep N%d: ours %s | torch %s" % (seq, short(entry["ours"]),
                                                     short(entry.get("torch", {"error": "-"}))))
            sweep.append(entry)
    result = {"rows": rows, "sweep": sweep}
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(result, f, indent=2)
    md = table(rows, args.peak_gflops)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(md)
    print()
    print(md)
    if sweep and plot(sweep, os.path.join(args.out, "throughput.png")):
        print("plot: %s" % os.path.join(args.out, "throughput.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
