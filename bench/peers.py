#!/usr/bin/env python3
"""One base encoder layer on libclattn and on the engines users would pick instead: PyTorch 2.x,
ONNX Runtime (f32 and int8), OpenVINO (f32 and its default precision) and tinygrad (OpenCL, on
the same device as libclattn), same machine, same run, same weights, outputs cross-checked.

usage: python bench/peers.py --encode build/examples/encode [--out bench/results]
           [--shapes 4x1024,1x4096,32x128,2x128x6,1x16384] [--repeat 5] [--threads 2]
           [--engines libclattn,pytorch,onnxruntime,onnxruntime-int8,openvino,
                      openvino-default,tinygrad] [--clattn-precisions fp32,bf16,int8]

The engines:
  libclattn         examples/encode --model the layer's file --input x.npy --repeat R --json
  libclattn-P       the same with --precision P, for each P of --clattn-precisions other than
                    fp32 (skipped with encode's message where this build or CPU refuses it)
  pytorch           nn.TransformerEncoderLayer (its fused inference path), inference_mode
  onnxruntime       the layer as an ONNX graph of plain operators, CPUExecutionProvider
  onnxruntime-int8  that graph quantised by onnxruntime.quantization.quantize_dynamic (QInt8
                    weights, per tensor; activations quantised at run time)
  openvino          the ONNX graph, INFERENCE_PRECISION_HINT f32
  openvino-default  the ONNX graph with OpenVINO's default precision (bf16 on CPUs with
                    AVX512_BF16 or AMX: the precision it chose is in the version column)
  tinygrad          the layer written in tinygrad, on its OpenCL device

Run it with a Python that has torch 2.x, onnx, onnxruntime, openvino and tinygrad (a venv:
`pip install torch onnx onnxruntime openvino tinygrad matplotlib`); an engine that is not
importable is reported as skipped. Every engine runs in its own process (peak memory is its own:
/usr/bin/time's maximum resident set size), `--threads` threads each (PoCL:
POCL_MAX_PTHREAD_COUNT), one warm-up then `--repeat` timed passes; the median, min and max. The engines run in turn,
`--rounds` times (interleaved, so that each sees the same drift of a shared machine); the table
keeps each engine's round with the lowest median.

The layer: nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True), relu, post-LN, seeded
random weights, exported once for each engine (a libclattn model file, an ONNX graph, the
state_dict). A shape BxNxL runs a stack of L such layers (nn.TransformerEncoder's copies of the
one layer). The input: seeded N(0, 1) [B, N, 512]. Each engine's output is compared with a
float64 reference of the same layer (computed in query chunks, so that N = 16384 fits) and the
largest absolute difference reported. Engines that would materialise the [B, 8, N, N] score
matrix are skipped where it exceeds --max-scores-gib (the reason is written in the table).

Throughput in multiply-adds per second (the library's convention) per layer:
B·N·(4·E² + 2·E·F) + 2·B·N²·E; the fraction of peak uses --peak-gmacs, or, by default, the
best 2048³ SGEMM of PyTorch (MKL) or numpy on --threads threads, measured first.

Writes OUT/peers.json, OUT/peers.md and, when matplotlib is importable, OUT/peers.png.
"""
import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
E, H, F = 512, 8, 2048
ENGINES = ["libclattn", "pytorch", "onnxruntime", "onnxruntime-int8", "openvino",
           "openvino-default", "tinygrad"]
# Engines whose attention materialises the score matrix (skipped above --max-scores-gib).
MATERIALISE = {"onnxruntime", "onnxruntime-int8", "openvino", "openvino-default", "tinygrad"}
CLATTN_PRECISIONS = ("fp32", "bf16", "int8")


def library_version():
    with open(os.path.join(HERE, "..", "meson.build")) as f:
        for line in f:
            if "version:" in line:
                return line.split("'")[1]
    return "?"


CLATTN_VERSION = library_version()


def layer_macs(B, N, L):
    return L * (B * N * (4 * E * E + 2 * E * F) + 2 * B * N * N * E)


def shape_key(B, N, L):
    return "%dx%d" % (B, N) if L == 1 else "%dx%dx%d" % (B, N, L)


def shape_label(B, N, L):
    return "B%d×N%d" % (B, N) if L == 1 else "%d layers B%d×N%d" % (L, B, N)


def timed(step, repeat):
    step()  # warm-up (and compilation)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1e3)
    return times


# ---- the child processes: one engine, one shape ----

def torch_layer(state_path):
    import torch
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(E, H, F, dropout=0.0, batch_first=True)
    layer.load_state_dict(torch.load(state_path))
    return layer.eval()


def run_pytorch(a, x, L):
    import torch
    torch.set_num_threads(a.threads)
    layer = torch_layer(os.path.join(a.dir, "layer.pt"))
    if L > 1:
        layer = torch.nn.TransformerEncoder(layer, L, enable_nested_tensor=False).eval()
    xt = torch.from_numpy(x)
    out = {}
    with torch.inference_mode():
        def step():
            out["y"] = layer(xt)
        times = timed(step, a.repeat)
    return times, out["y"].numpy(), "torch " + torch.__version__


def run_onnxruntime(a, x, L):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    # onnxruntime-int8: the copy that prepare() quantised with quantize_dynamic.
    graph = os.path.join(a.dir, "layer%d%s.onnx" % (L, ".int8" if a.engine.endswith("int8")
                                                      else ""))
    if not os.path.exists(graph):
        raise SystemExit("no %s: onnxruntime.quantization could not make it (see the "
                         "preparation's message)" % os.path.basename(graph))
    sess = ort.InferenceSession(graph, so, providers=["CPUExecutionProvider"])
    out = {}

    def step():
        out["y"] = sess.run(None, {"x": x})[0]
    return timed(step, a.repeat), out["y"], "onnxruntime " + ort.__version__


def run_openvino(a, x, L):
    import openvino as ov
    core = ov.Core()
    model = core.read_model(os.path.join(a.dir, "layer%d.onnx" % L))
    config = {"INFERENCE_NUM_THREADS": str(a.threads)}
    if a.engine == "openvino":
        # f32 forced: on CPUs with AVX-512 BF16/AMX its default would be bf16 (1e-2 off).
        config["INFERENCE_PRECISION_HINT"] = "f32"
    compiled = core.compile_model(model, "CPU", config)
    request = compiled.create_infer_request()
    out = {}

    def step():
        request.infer({0: x})
        out["y"] = request.get_output_tensor(0).data.copy()
    precision = compiled.get_property("INFERENCE_PRECISION_HINT")
    precision = getattr(precision, "get_type_name", lambda: str(precision))()
    return (timed(step, a.repeat), out["y"],
            "openvino %s (%s)" % (ov.__version__.split("-")[0], precision))


def run_tinygrad(a, x, L):
    os.environ.setdefault("DEV", "CL")
    from tinygrad import Tensor, Device, dtypes
    import torch
    state = {k: v.numpy() for k, v in torch.load(os.path.join(a.dir, "layer.pt")).items()}
    dev = "CL"
    w = {k: Tensor(v, device=dev).realize() for k, v in state.items()}
    B, N, _ = x.shape
    d = E // H

    def forward(xt):
        qkv = xt.linear(w["self_attn.in_proj_weight"].T, w["self_attn.in_proj_bias"])
        q, k, v = [qkv[:, :, i * E:(i + 1) * E].reshape(B, N, H, d).transpose(1, 2)
                   for i in range(3)]
        att = q.scaled_dot_product_attention(k, v).transpose(1, 2).reshape(B, N, E)
        att = att.linear(w["self_attn.out_proj.weight"].T, w["self_attn.out_proj.bias"])
        h = (xt + att).layernorm(eps=1e-5) * w["norm1.weight"] + w["norm1.bias"]
        ff = h.linear(w["linear1.weight"].T, w["linear1.bias"]).relu()
        ff = ff.linear(w["linear2.weight"].T, w["linear2.bias"])
        return (h + ff).layernorm(eps=1e-5) * w["norm2.weight"] + w["norm2.bias"]

    xt = Tensor(x, device=dev).realize()
    out = {}

    def step():
        y = xt
        for _ in range(L):
            y = forward(y)
        out["y"] = y.numpy()
    import tinygrad
    version = getattr(tinygrad, "__version__", None)
    if version is None:
        from importlib.metadata import version as pkg_version
        version = pkg_version("tinygrad")
    return (timed(step, a.repeat), out["y"],
            "tinygrad %s on %s" % (version, Device[dev].__class__.__name__))


def child(a):
    B, N, L = (list(int(v) for v in a.shape.split("x")) + [1])[:3]
    x = np.load(os.path.join(a.dir, "x_%dx%d.npy" % (B, N)))
    try:
        import importlib
        importlib.import_module({"onnxruntime-int8": "onnxruntime",
                                 "openvino-default": "openvino",
                                 "pytorch": "torch"}.get(a.engine, a.engine))
    except ImportError as e:
        raise SystemExit("%s is not importable by %s: %s" % (a.engine, sys.executable, e))
    runner = {"pytorch": run_pytorch, "onnxruntime": run_onnxruntime,
              "onnxruntime-int8": run_onnxruntime, "openvino": run_openvino,
              "openvino-default": run_openvino, "tinygrad": run_tinygrad}[a.engine]
    times, y, version = runner(a, x, L)
    np.save(os.path.join(a.dir, "out_%s_%s.npy" % (a.engine, a.shape)), y.astype(np.float32))
    print(json.dumps({"times_ms": times, "version": version}))


# ---- the parent: models, inputs, references, the runs, the report ----

def plain_layer_class():
    import torch

    class PlainLayer(torch.nn.Module):
        """nn.TransformerEncoderLayer's inference maths (post-LN, relu) in plain operators."""

        def __init__(self, layer):
            super().__init__()
            # Buffers, so that the ONNX graph holds them as initializers (quantize_dynamic
            # quantises only a MatMul whose weight is one); the matrices stored transposed, so
            # that each MatMul reads its initializer directly.
            self.names = []
            for k, v in layer.state_dict().items():
                name = k.replace(".", "_")
                self.register_buffer(name, (v.t() if v.dim() == 2 else v).detach().contiguous())
                self.names.append((k, name))

        def forward(self, x):
            # sd[".._weight"] of a matrix is its transpose: [in, out].
            sd = {k: getattr(self, name) for k, name in self.names}
            B, N = x.shape[0], x.shape[1]
            d = E // H
            qkv = x @ sd["self_attn.in_proj_weight"] + sd["self_attn.in_proj_bias"]
            q = qkv[..., :E].reshape(B, N, H, d).transpose(1, 2)
            k = qkv[..., E:2 * E].reshape(B, N, H, d).transpose(1, 2)
            v = qkv[..., 2 * E:].reshape(B, N, H, d).transpose(1, 2)
            p = torch.softmax((q * (1.0 / math.sqrt(d))) @ k.transpose(-1, -2), dim=-1)
            att = (p @ v).transpose(1, 2).reshape(B, N, E)
            att = att @ sd["self_attn.out_proj.weight"] + sd["self_attn.out_proj.bias"]
            h = torch.nn.functional.layer_norm(x + att, (E,), sd["norm1.weight"],
                                               sd["norm1.bias"], 1e-5)
            ff = torch.relu(h @ sd["linear1.weight"] + sd["linear1.bias"])
            ff = ff @ sd["linear2.weight"] + sd["linear2.bias"]
            return torch.nn.functional.layer_norm(h + ff, (E,), sd["norm2.weight"],
                                                  sd["norm2.bias"], 1e-5)
    class PlainStack(torch.nn.Module):
        """L applications of the same PlainLayer."""

        def __init__(self, layer, L):
            super().__init__()
            self.one, self.L = PlainLayer(layer), L

        def forward(self, x):
            for _ in range(self.L):
                x = self.one(x)
            return x
    return PlainStack


def prepare(a, shapes):
    import torch
    sys.path.insert(0, os.path.join(HERE, "..", "tools"))
    from export_torch import export
    PlainStack = plain_layer_class()
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(E, H, F, dropout=0.0, batch_first=True).eval()
    torch.save(layer.state_dict(), os.path.join(a.dir, "layer.pt"))
    kwargs = {"dynamo": False} if "dynamo" in torch.onnx.export.__code__.co_varnames else {}
    x0 = torch.randn(1, 16, E)
    for L in sorted({L for _, _, L in shapes}):
        stack = layer if L == 1 else torch.nn.TransformerEncoder(
            layer, L, enable_nested_tensor=False).eval()
        export(stack, os.path.join(a.dir, "layer%d.safetensors" % L))
        # The ONNX graph (ONNX Runtime, OpenVINO): the same layers written with plain operators
        # (nn.TransformerEncoderLayer's fused inference op has no ONNX form).
        with torch.no_grad():
            torch.onnx.export(PlainStack(layer, L), (x0,),
                              os.path.join(a.dir, "layer%d.onnx" % L), input_names=["x"],
                              output_names=["y"], opset_version=17,
                              dynamic_axes={"x": {0: "batch", 1: "seq"},
                                            "y": {0: "batch", 1: "seq"}}, **kwargs)
            assert torch.allclose(PlainStack(layer, L)(x0), stack(x0), atol=1e-4)
        quantize_int8(os.path.join(a.dir, "layer%d.onnx" % L))
    rng = np.random.default_rng(0)
    for B, N, L in shapes:
        x = rng.standard_normal((B, N, E)).astype(np.float32)
        np.save(os.path.join(a.dir, "x_%dx%d.npy" % (B, N)), x)
        y = x
        for _ in range(L):
            y = reference(layer, y)
        np.save(os.path.join(a.dir, "ref_%s.npy" % shape_key(B, N, L)), y)


def quantize_int8(path):
    """PATH's int8 copy (layer.onnx -> layer.int8.onnx) for onnxruntime-int8, as ONNX Runtime's
    documentation makes one for CPUs: quantize_dynamic, QInt8 weights, its other defaults."""
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as e:
        print("no int8 graph for onnxruntime-int8: %s" % e, flush=True)
        return
    quantize_dynamic(path, path[:-len(".onnx")] + ".int8.onnx", weight_type=QuantType.QInt8)


def reference(layer, x):
    """The layer in float64, attention in chunks of queries (O(N) memory per chunk)."""
    import torch
    sd = {k: v.double() for k, v in layer.state_dict().items()}
    xt = torch.from_numpy(np.asarray(x, dtype=np.float64))
    B, N, _ = x.shape
    d = E // H
    with torch.no_grad():
        qkv = xt @ sd["self_attn.in_proj_weight"].T + sd["self_attn.in_proj_bias"]
        q, k, v = [qkv[..., i * E:(i + 1) * E].reshape(B, N, H, d).transpose(1, 2)
                   for i in range(3)]
        att = torch.empty(B, H, N, d, dtype=torch.float64)
        step = max(1, (1 << 24) // (B * H * N))
        for i0 in range(0, N, step):
            s = q[:, :, i0:i0 + step] @ k.transpose(-1, -2) / math.sqrt(d)
            att[:, :, i0:i0 + step] = torch.softmax(s, dim=-1) @ v
        att = att.transpose(1, 2).reshape(B, N, E)
        att = att @ sd["self_attn.out_proj.weight"].T + sd["self_attn.out_proj.bias"]
        h = torch.nn.functional.layer_norm(xt + att, (E,), sd["norm1.weight"], sd["norm1.bias"],
                                           1e-5)
        ff = torch.relu(h @ sd["linear1.weight"].T + sd["linear1.bias"])
        ff = ff @ sd["linear2.weight"].T + sd["linear2.bias"]
        y = torch.nn.functional.layer_norm(h + ff, (E,), sd["norm2.weight"], sd["norm2.bias"],
                                           1e-5)
    return y.numpy()


def with_peak_memory(cmd, env, timeout):
    """Runs cmd under /usr/bin/time; (stdout, stderr, returncode, peak MiB)."""
    try:
        p = subprocess.run(["/usr/bin/time", "-f", "PEAK_KIB %M"] + cmd, capture_output=True,
                           text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "", "timed out after %d s" % timeout, 124, None
    peak = None
    lines = []
    for line in p.stderr.splitlines():
        if line.startswith("PEAK_KIB "):
            peak = int(line.split()[1]) / 1024.0
        elif not line.startswith("Command exited with non-zero status"):  # /usr/bin/time's
            lines.append(line)
    return p.stdout, "\n".join(lines), p.returncode, peak


def run_engine(a, engine, B, N, L, ref):
    env = dict(os.environ, POCL_MAX_PTHREAD_COUNT=str(a.threads), OMP_NUM_THREADS=str(a.threads),
               POCL_DEBUG="0")
    scores_gib = B * H * N * N * 4 / 2 ** 30
    if engine in MATERIALISE and scores_gib > a.max_scores_gib:
        return {"skipped": "its [B, 8, N, N] score matrix would take %.1f GiB" % scores_gib}
    out_path = os.path.join(a.dir, "out_%s_%s.npy" % (engine, shape_key(B, N, L)))
    if engine.startswith("libclattn"):
        cmd = [a.encode, "--model", os.path.join(a.dir, "layer%d.safetensors" % L), "--input",
               os.path.join(a.dir, "x_%dx%d.npy" % (B, N)), "--output", out_path, "--repeat",
               str(a.repeat), "--json"]
        if engine != "libclattn":
            cmd += ["--precision", engine.split("-", 1)[1]]
    else:
        cmd = [sys.executable, os.path.abspath(__file__), "--child", "--engine", engine,
               "--shape", shape_key(B, N, L), "--dir", a.dir, "--repeat", str(a.repeat),
               "--threads", str(a.threads)]
    stdout, stderr, rc, peak = with_peak_memory(cmd, env, a.timeout)
    if rc != 0:
        return {"error": (stderr.strip() or stdout.strip())[-400:]}
    r = json.loads(stdout)
    device = None
    if engine.startswith("libclattn"):
        median, times, version = r["forward_ms_median"], None, "libclattn " + CLATTN_VERSION
        device = r["device"]["name"]
    else:
        times, version = r["times_ms"], r["version"]
        median = statistics.median(times)
    y = np.load(out_path)
    os.remove(out_path)
    macs = layer_macs(B, N, L)
    result = {"ms_median": median, "gmacs": macs * 1e-6 / median, "peak_mib": peak,
              "max_abs_diff": float(np.max(np.abs(y.astype(np.float64) - ref))),
              "version": version.strip()}
    if times:
        result["ms_min"], result["ms_max"] = min(times), max(times)
    if device:
        result["device"] = device
    result["fraction_of_peak"] = result["gmacs"] / a.peak_gmacs
    return result


def clattn_precisions(a, ap):
    """libclattn-P for each P of --clattn-precisions other than fp32 that encode accepts: tried
    once on a small input (a build without --precision, or a CPU without the precision's
    instructions, refuses it; it is then skipped with encode's message)."""
    out = []
    for p in [p for p in a.clattn_precisions.split(",") if p]:
        if p not in CLATTN_PRECISIONS:
            ap.error("--clattn-precisions: unknown %s (precisions: %s)"
                     % (p, ", ".join(CLATTN_PRECISIONS)))
        if p == "fp32":
            continue  # the libclattn engine itself
        probe = subprocess.run([a.encode, "--precision", p, "--batch", "1", "--seq", "8",
                                "--json"], capture_output=True, text=True,
                               env=dict(os.environ, POCL_MAX_PTHREAD_COUNT=str(a.threads)))
        if probe.returncode != 0:
            print("skipping libclattn-%s: encode refuses --precision %s (exit %d): %s" % (
                p, p, probe.returncode, " ".join(probe.stderr.strip().splitlines()[-2:])[:300]),
                flush=True)
            continue
        out.append("libclattn-" + p)
    return out


def measure_peak(threads):
    """Best of a 2048^3 SGEMM (multiply-adds per second / 1e9) on `threads` threads: PyTorch's
    (MKL on x86), else numpy's (OpenBLAS): the machine's practical fp32 peak."""
    code = ("import time\n"
            "try:\n"
            "    import torch; torch.set_num_threads(%d)\n"
            "    a = torch.rand(2048, 2048); mm = torch.mm; name = 'PyTorch %%s torch.mm' %% torch.__version__\n"
            "except ImportError:\n"
            "    import numpy as np; a = np.random.rand(2048, 2048).astype(np.float32)\n"
            "    mm = np.matmul; name = 'numpy matmul'\n"
            "b = a * 1; mm(a, b)\n"
            "best = min((lambda t0: (mm(a, b), time.perf_counter() - t0)[1])(time.perf_counter())"
            " for _ in range(7))\n"
            "print(2048 ** 3 / best / 1e9, name)\n" % threads)
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    value, name = out.stdout.strip().split(" ", 1)
    return float(value), name


def report(a, results, shapes, engines, meta):
    lines = ["# One base encoder layer: libclattn and its peers (`bench/peers.py`)", "",
             "nn.TransformerEncoderLayer(512, 8, 2048), relu, post-LN, the same seeded weights "
             "and inputs for every engine; %d threads each; median (min–max) of %d passes after "
             "a warm-up, the best of %d interleaved rounds; peak = maximum resident set size of the engine's process; error = "
             "largest absolute difference from a float64 reference. Machine: %s, %d CPUs; "
             "libclattn and tinygrad on %s. Peak used for the fractions: %.0f G multiply-adds/s "
             "(%s). Load average at the end: %s." % (
                 a.threads, a.repeat, a.rounds, meta["cpu"], os.cpu_count(), meta["device"],
                 a.peak_gmacs, meta["peak_source"], meta["load"]), ""]
    header = "| engine | " + " | ".join(shape_label(*s) for s in shapes) + " |"
    lines += [header, "|---|" + "---|" * len(shapes)]
    for engine in engines:
        cells = []
        for s in shapes:
            r = results[shape_key(*s)].get(engine, {})
            if "ms_median" in r:
                spread = (" (%.0f–%.0f)" % (r["ms_min"], r["ms_max"])) if "ms_min" in r else ""
                cells.append("%.0f ms%s<br>%.1f GMAC/s, %.0f %% of peak<br>%.0f MiB, error %.1e"
                             % (r["ms_median"], spread, r["gmacs"], 100 * r["fraction_of_peak"],
                                r["peak_mib"] or 0, r["max_abs_diff"]))
            elif "skipped" in r:
                cells.append("skipped: " + r["skipped"])
            else:
                cells.append("error: " + r.get("error", "not run").replace("\n", " ")[:120])
        lines.append("| %s | %s |" % (engine, " | ".join(cells)))
    lines += ["", "Speed of libclattn relative to each engine (their time / ours; > 1: ours "
              "faster):", "", header, "|---|" + "---|" * len(shapes)]
    for engine in engines[1:]:
        cells = []
        for s in shapes:
            row = results[shape_key(*s)]
            o, t = row.get("libclattn", {}), row.get(engine, {})
            cells.append("%.2f×" % (t["ms_median"] / o["ms_median"])
                         if "ms_median" in o and "ms_median" in t else "—")
        lines.append("| %s | %s |" % (engine, " | ".join(cells)))
    versions = sorted({r["version"] for row in results.values() for r in row.values()
                       if "version" in r})
    lines += ["", "Versions: " + "; ".join(versions) + "."]
    with open(os.path.join(a.out, "peers.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(a.out, "peers.json"), "w") as f:
        json.dump({"meta": meta, "threads": a.threads, "repeat": a.repeat,
                   "peak_gmacs": a.peak_gmacs, "results": results}, f, indent=1)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(9, 4.5))
    width = 0.8 / len(engines)
    for i, engine in enumerate(engines):
        values = [results[shape_key(*s)].get(engine, {}).get("gmacs", 0) for s in shapes]
        ax.bar([j + i * width for j in range(len(shapes))], values, width, label=engine)
    ax.axhline(a.peak_gmacs, color="gray", linestyle="--", linewidth=1)
    ax.text(len(shapes) - 0.5, a.peak_gmacs, "peak", va="bottom", ha="right", color="gray")
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(shapes))])
    ax.set_xticklabels([shape_label(*s).replace(" layers ", "L ") for s in shapes], fontsize=8)
    ax.set_ylabel("G multiply-adds/s (one encoder layer)")
    ax.set_title("One base encoder layer, %d threads, %s" % (a.threads, meta["cpu"]),
                 fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(a.out, "peers.png"), dpi=110)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--encode", help="build/examples/encode")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--shapes", default="4x1024,1x4096,32x128,2x128x6,1x16384")
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--clattn-precisions", default="fp32",
                    help="libclattn's precisions, e.g. fp32,bf16,int8: each other than fp32 is "
                         "an engine libclattn-P, encode --precision P (default fp32)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--peak-gmacs", type=float, default=0.0)
    ap.add_argument("--peak-source", default="given with --peak-gmacs")
    ap.add_argument("--max-scores-gib", type=float, default=4.0)
    ap.add_argument("--timeout", type=int, default=3600)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--prepare", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--engine", help=argparse.SUPPRESS)
    ap.add_argument("--shape", help=argparse.SUPPRESS)
    ap.add_argument("--dir", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(a)
    if a.prepare:
        import torch
        torch.set_num_threads(a.threads)
        shapes = [tuple((list(int(v) for v in s.split("x")) + [1])[:3])
                  for s in a.shapes.split(",")]
        return prepare(a, shapes)
    if not a.encode:
        ap.error("--encode build/examples/encode is required")
    engines = [e for e in a.engines.split(",") if e]
    unknown = [e for e in engines if e not in ENGINES]
    if unknown or not engines or engines[0] != "libclattn":
        ap.error("--engines: libclattn first, then any of %s" % ", ".join(ENGINES[1:]))
    engines[1:1] = clattn_precisions(a, ap)
    shapes = [tuple((list(int(v) for v in s.split("x")) + [1])[:3]) for s in a.shapes.split(",")]
    peak_source = a.peak_source
    if a.peak_gmacs <= 0:
        a.peak_gmacs, name = measure_peak(a.threads)
        peak_source = "%s 2048³ SGEMM, best of 7, measured in this run" % name
    os.makedirs(a.out, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="clattn-peers-") as tmp:
        a.dir = tmp
        print("preparing the layer, inputs and float64 references ...", flush=True)
        # In a process of its own: PyTorch's idle worker threads would otherwise spin in this
        # one while the engines run.
        subprocess.run([sys.executable, os.path.abspath(__file__), "--prepare", "--dir", tmp,
                        "--shapes", a.shapes, "--threads", str(a.threads)], check=True)
        results = {}
        for B, N, L in shapes:
            row = results.setdefault(shape_key(B, N, L), {})
            ref = np.load(os.path.join(tmp, "ref_%s.npy" % shape_key(B, N, L)))
            for rnd in range(a.rounds):  # engines interleaved: each sees the machine's drift
                for engine in engines:
                    r = run_engine(a, engine, B, N, L, ref)
                    best = row.get(engine)
                    medians = (best or {}).get("round_medians", []) + [r.get("ms_median")]
                    if not best or ("ms_median" in r and ("ms_median" not in best or
                                                          r["ms_median"] < best["ms_median"])):
                        best = r
                    best["round_medians"] = medians
                    row[engine] = best
                    print("%s %-12s round %d: %s" % (shape_label(B, N, L), engine, rnd + 1,
                                                     "%.1f ms, %.1f GMAC/s, %.1e error" % (
                                                         r["ms_median"], r["gmacs"],
                                                         r["max_abs_diff"])
                                                     if "ms_median" in r else r), flush=True)
                    if "skipped" in r:
                        continue
            for engine in engines:
                r = row[engine]
                print("%s %-12s best: %s" % (shape_label(B, N, L), engine,
                                            "%.1f ms, %.1f GMAC/s, %.1e error" % (
                                                r["ms_median"], r["gmacs"], r["max_abs_diff"])
                                            if "ms_median" in r else r), flush=True)
    device = next((row["libclattn"]["device"] for row in results.values()
                   if "device" in row.get("libclattn", {})), "the default OpenCL device")
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    meta = {"cpu": cpu, "device": device, "peak_source": peak_source,
            "load": " ".join("%.1f" % v for v in os.getloadavg())}
    plotted = report(a, results, shapes, engines, meta)
    print("wrote %s/peers.md, peers.json%s" % (a.out, ", peers.png" if plotted else
                                              " (no peers.png: matplotlib is not importable)"))


if __name__ == "__main__":
    main()
