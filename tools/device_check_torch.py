#!/usr/bin/env python3
"""PyTorch beside libclattn in tools/device-check.sh: the same base-layer shapes on the same
device (a CUDA GPU, or the CPU when the check runs on a CPU device), and, when
sentence-transformers and the model folder are there, MiniLM embeddings of the same corpus.

usage: python3 tools/device_check_torch.py --device cuda|cpu [--shapes 4x1024,1x4096,32x128,2x128x6]
           [--repeat R] [--threads T] [--model DIR --corpus TEXTS.txt]

One JSON object on stdout. The layer: nn.TransformerEncoderLayer(512, 8, 2048,
batch_first=True), relu, post-LN, seeded random weights, eval, inference_mode (its fused fast
path); BxNxL runs nn.TransformerEncoder's L copies. Timed: R passes after one warm-up, each
ended by torch.cuda.synchronize() on a GPU; the median, min and max in ms and the median in G
multiply-adds/s (B·N·(4·E² + 2·E·F) + 2·B·N²·E a layer, the library's convention). fp32
(TF32 matrix products as PyTorch's defaults leave them: recorded) and fp16 on a GPU; fp32 on a
CPU. A shape that does not fit (out of memory) is recorded as an error, the rest go on.
Embeddings: SentenceTransformer(DIR, device).encode(texts, batch_size=32), fp32 (and fp16 on a
GPU), one untimed warm-up pass over 32 texts, then one timed pass over the corpus.
"""
import argparse
import json
import statistics
import sys
import time

E, H, F = 512, 8, 2048


def layer_macs(B, N, L):
    return L * (B * N * (4 * E * E + 2 * E * F) + 2 * B * N * N * E)


def bench_layers(torch, dev, shapes, repeat):
    results = {}
    dtypes = [("fp32", torch.float32)] + ([("fp16", torch.float16)] if dev.type == "cuda"
                                          else [])
    for B, N, L in shapes:
        key = "%dx%d" % (B, N) if L == 1 else "%dx%dx%d" % (B, N, L)
        for name, dtype in dtypes:
            try:
                torch.manual_seed(0)
                layer = torch.nn.TransformerEncoderLayer(E, H, F, dropout=0.0, batch_first=True)
                model = layer if L == 1 else torch.nn.TransformerEncoder(
                    layer, L, enable_nested_tensor=False)
                model = model.to(dev, dtype).eval()
                x = torch.randn(B, N, E, device=dev, dtype=dtype)
                times = []
                with torch.inference_mode():
                    for i in range(repeat + 1):
                        if dev.type == "cuda":
                            torch.cuda.synchronize()
                        t0 = time.perf_counter()
                        y = model(x)
                        if dev.type == "cuda":
                            torch.cuda.synchronize()
                        if i:  # the first pass is the warm-up
                            times.append((time.perf_counter() - t0) * 1e3)
                median = statistics.median(times)
                results["%s %s" % (key, name)] = {
                    "shape": [B, N, L], "dtype": name, "ms_median": median,
                    "ms_min": min(times), "ms_max": max(times),
                    "gmacs_per_s": layer_macs(B, N, L) * 1e-6 / median,
                    "finite": bool(torch.isfinite(y).all())}
                del model, x, y
            except Exception as e:  # out of memory, an unsupported dtype: recorded, go on
                results["%s %s" % (key, name)] = {"shape": [B, N, L], "dtype": name,
                                                  "error": str(e).splitlines()[0][:300]}
            if dev.type == "cuda":
                torch.cuda.empty_cache()
    return results


def bench_embeddings(torch, dev, model_dir, corpus):
    import sentence_transformers
    with open(corpus, encoding="utf-8", newline="") as f:
        texts = f.read().split("\n")[:-1]
    out = {"sentence_transformers": sentence_transformers.__version__, "count": len(texts)}
    for name in ["fp32"] + (["fp16"] if dev.type == "cuda" else []):
        model = sentence_transformers.SentenceTransformer(model_dir, device=str(dev))
        # fp32 forced: newer transformers keep an F16 file's dtype (the pack's MiniLM is F16)
        model = model.half() if name == "fp16" else model.float()
        model.encode(texts[:32], batch_size=32)  # warm-up: CUDA context, kernels
        if dev.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        model.encode(texts, batch_size=32)
        if dev.type == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
        out[name] = {"seconds": seconds, "texts_per_s": len(texts) / seconds}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--shapes", default="4x1024,1x4096,32x128,2x128x6")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: PyTorch's choice)")
    ap.add_argument("--model", help="a sentence-transformers model folder (optional)")
    ap.add_argument("--corpus", help="one text per line, for --model")
    a = ap.parse_args()
    import torch
    if a.threads:
        torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        sys.exit("torch %s: CUDA is not available" % torch.__version__)
    shapes = [tuple((list(int(v) for v in s.split("x")) + [1])[:3])
              for s in a.shapes.split(",") if s]
    result = {"torch": torch.__version__, "device": a.device,
              "threads": torch.get_num_threads()}
    if dev.type == "cuda":
        result.update({"gpu": torch.cuda.get_device_name(dev), "cuda": torch.version.cuda,
                       "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
                       "tf32_cudnn": torch.backends.cudnn.allow_tf32})
    result["layers"] = bench_layers(torch, dev, shapes, a.repeat)
    if a.model and a.corpus:
        try:
            result["embeddings"] = bench_embeddings(torch, dev, a.model, a.corpus)
        except Exception as e:  # sentence-transformers missing or the model unreadable
            result["embeddings"] = {"error": "%s: %s" % (type(e).__name__,
                                                         str(e).splitlines()[0][:300])}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
