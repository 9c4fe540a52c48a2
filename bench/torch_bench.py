#!/usr/bin/env python3
"""Times one PyTorch operation on one shape and prints one JSON object (driven by run.py).

usage: torch_bench.py WHAT --batch B --seq N [--dim E] [--heads H] [--ff F] [--repeat R]
  WHAT: attention   the attention core: softmax(q·kᵀ·scale)·v with torch.bmm on [B·H, N, E/H]
        mha         nn.MultiheadAttention(E, H, batch_first=True), self-attention,
                    need_weights=False (its fastest inference path)
        encoder-layer  nn.TransformerEncoderLayer(E, H, F, batch_first=True) (relu, post-LN)
Runs with torch.set_num_threads(THREADS) (default 2), torch.no_grad(), modules in eval().
"""
import argparse
import json
import math
import os
import resource
import statistics
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["attention", "mha", "encoder-layer"])
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--ff", type=int, default=2048)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    torch.set_num_threads(int(os.environ.get("THREADS", "2")))
    torch.manual_seed(0)
    B, N, E, H, F = a.batch, a.seq, a.dim, a.heads, a.ff
    d = E // H
    with torch.no_grad():
        if a.what == "attention":
            q, k, v = (torch.randn(B * H, N, d) for _ in range(3))
            scale = 1.0 / math.sqrt(d)

            def step():
                p = torch.softmax(torch.bmm(q * scale, k.transpose(1, 2)), dim=-1)
                return torch.bmm(p, v)
            macs = 2 * B * H * N * N * d
        elif a.what == "mha":
            m = torch.nn.MultiheadAttention(E, H, batch_first=True).eval()
            x = torch.randn(B, N, E)

            def step():
                return m(x, x, x, need_weights=False)[0]
            macs = B * N * E * 3 * E + 2 * B * H * N * N * d + B * N * E * E
        else:
            m = torch.nn.TransformerEncoderLayer(E, H, F, batch_first=True).eval()
            x = torch.randn(B, N, E)

            def step():
                return m(x)
            macs = B * N * E * 3 * E + 2 * B * H * N * N * d + B * N * E * E + 2 * B * N * E * F
        times = []
        for i in range(a.repeat + 1):  # the first is the warm-up
            t0 = time.perf_counter()
            step()
            times.append((time.perf_counter() - t0) * 1e3)
    timed = times[1:] if a.repeat else times
    median = statistics.median(timed)
    print(json.dumps({
        "what": a.what, "batch": B, "seq": N, "dim": E, "heads": H,
        "ms_median": round(median, 3), "ms_min": round(min(timed), 3), "macs": macs,
        "gflops": round(macs * 1e-6 / median, 3),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1),
        "threads": torch.get_num_threads(), "torch": torch.__version__,
    }))


if __name__ == "__main__":
    main()
