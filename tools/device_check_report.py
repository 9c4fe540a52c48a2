#!/usr/bin/env python3
"""The report of tools/device-check.sh: reads its work folder (steps.tsv, each step's stdout
and stderr, meson's testlog.json), writes ONE JSON of everything and prints a readable summary.
Standard library only.

usage: python3 tools/device_check_report.py --work DIR --device SPEC --budget S --elapsed S
           --out device-check.json

Exit status 0 when every step that ran passed (and the golden embeddings are within 1e-5),
else 1.
"""
import argparse
import json
import os
import re

GOLDEN_TOLERANCE = 1e-5  # tests/test_embed.sh's bound for the same comparison
SHAPES = {"4x1024": "B4×N1024", "1x4096": "B1×N4096", "32x128": "B32×N128",
          "2x128x6": "6 layers B2×N128"}


def read(work, name, suffix):
    try:
        with open(os.path.join(work, name + suffix), encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def json_of(text):
    """The JSON object in a step's stdout (the last line that parses, or the whole text)."""
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        pass
    for line in reversed(text.splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return None


def tail(text, n=1500):
    return text[-n:] if text else ""


def read_steps(work):
    steps = []
    with open(os.path.join(work, "steps.tsv"), encoding="utf-8") as f:
        for line in f:
            name, status, rc, seconds, note = (line.rstrip("\n").split("\t") + [""] * 5)[:5]
            step = {"name": name, "status": status, "exit": int(rc) if rc else None,
                    "seconds": float(seconds or 0)}
            if note:
                step["note"] = note
            if status in ("failed", "timeout"):
                step["stderr_tail"] = tail(read(work, name, ".err"))
                step["stdout_tail"] = tail(read(work, name, ".out"), 600)
            steps.append(step)
    return steps


def encode_results(work, by):
    out = {}
    for key, label in SHAPES.items():
        step = by.get("encode-" + key)
        if not step:
            continue
        r = {"label": label, "status": step["status"]}
        j = json_of(read(work, "encode-" + key, ".out")) if step["status"] == "ok" else None
        if j:
            r.update({"ms_median": j.get("forward_ms_median"),
                      "gmacs_per_s": j.get("gflops_per_s"),  # multiply-adds, the convention
                      "timed_passes": j.get("timed_passes"), "setup_ms": j.get("setup_ms"),
                      "non_finite": j.get("non_finite"), "mean_abs": j.get("mean_abs"),
                      "device": (j.get("device") or {}).get("name")})
        out[key] = r
    return out


def profile_results(work, by):
    step = by.get("encode-profile-4x1024")
    j = json_of(read(work, "encode-profile-4x1024", ".out")) if step and step[
        "status"] == "ok" else None
    if not j or "kernels" not in j:
        return None
    kernels = sorted(j["kernels"], key=lambda k: -k.get("total_ms", 0))
    # warm-up + 1 timed pass: the launches of two forward passes
    return {"passes": 2, "launches": sum(k.get("launches", 0) for k in kernels),
            "kernels": kernels}


def embed_results(work, by):
    out = {}
    if "embed-golden" in by:
        g = {"status": by["embed-golden"]["status"]}
        j = json_of(read(work, "embed-golden", ".out"))
        if j:
            g.update({k: j.get(k) for k in ("count", "tokens", "texts_per_s", "device")})
        m = re.search(r"max abs difference (\S+) over (\d+) elements",
                      read(work, "embed-golden-diff", ".out") or "")
        if m:
            g["max_abs_vs_golden"] = float(m.group(1))
            g["tolerance"] = GOLDEN_TOLERANCE
            g["reference"] = (read(work, "golden-ref", ".txt") or "").strip()
            g["within_tolerance"] = float(m.group(1)) <= GOLDEN_TOLERANCE
        elif by["embed-golden"]["status"] == "ok":
            g["max_abs_vs_golden"] = None
            g["compare_error"] = tail(read(work, "embed-golden-diff", ".err"), 400)
        out["golden"] = g
    runs = []
    for name in ("embed-corpus-1", "embed-corpus-2"):
        if name in by and by[name]["status"] == "ok":
            j = json_of(read(work, name, ".out"))
            if j:
                runs.append({k: j.get(k) for k in ("count", "tokens", "texts_per_s",
                                                   "tokens_per_s", "seconds", "load_s")})
    if runs:
        out["corpus"] = {"runs": runs, "texts_per_s_best": max(r["texts_per_s"] for r in runs),
                         "count": runs[0]["count"], "tokens": runs[0]["tokens"]}
    return out


def llm_results(work, by):
    """bench/llm_bench's pp512 and tg128 tokens/s (its pp_tps= and tg_tps= lines)."""
    out = {}
    for name, key in (("llm-pp512", "pp_tps"), ("llm-tg128", "tg_tps")):
        step = by.get(name)
        if not step:
            continue
        m = re.search(r"^%s=(\S+)$" % key, read(work, name, ".out") or "", re.M)
        out[name[4:]] = {"status": step["status"], "tokens_per_s": float(m.group(1)) if m else None}
    if out:
        out["model"] = (read(work, "llm-model", ".txt") or "").strip()
    elif "llm" in by:
        out = {"status": by["llm"]["status"], "note": by["llm"].get("note")}
    return out


def test_results(work, by):
    step = by.get("test")
    if not step:
        return None
    if step["status"] == "skipped":
        return {"status": "skipped", "note": step.get("note")}
    tests = []
    path = os.path.join(work, "testlog.json")
    if os.path.exists(path):
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    t = json.loads(line)
                except ValueError:
                    continue
                tests.append({"name": t.get("name"), "result": t.get("result"),
                              "seconds": round(t.get("duration") or 0, 2)})
    counts = {}
    for t in tests:
        counts[t["result"]] = counts.get(t["result"], 0) + 1
    bad = [t for t in tests if t["result"] not in ("OK", "SKIP", "EXPECTEDFAIL")]
    listed = [l for l in (read(work, "test-list", ".out") or "").splitlines() if l.strip()]
    return {"status": step["status"], "seconds": step["seconds"], "counts": counts,
            "in_suite": len(listed) or None, "ran": len(tests),
            "not_passed": bad, "skipped": [t["name"] for t in tests if t["result"] == "SKIP"],
            "slowest": sorted(tests, key=lambda t: -t["seconds"])[:10],
            "complete": step["status"] == "ok",
            "tests": tests}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", required=True)
    ap.add_argument("--device", required=True)
    ap.add_argument("--budget", type=int, required=True)
    ap.add_argument("--elapsed", type=int, required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    w = a.work
    steps = read_steps(w)
    by = {s["name"]: s for s in steps}
    facts = {}
    for line in (read(w, "facts", ".txt") or "").splitlines():
        k, _, v = line.partition(": ")
        facts[k] = v
    for name in ("nvidia-smi", "clinfo", "list-devices"):
        if by.get(name, {}).get("status") == "ok":
            facts[name] = (read(w, name, ".out") or "").strip()
    probe = json_of(read(w, "device-probe", ".out"))
    torch_step = by.get("pytorch", {})
    pytorch = json_of(read(w, "pytorch", ".out")) if torch_step.get("status") == "ok" else {
        "status": torch_step.get("status"), "note": torch_step.get("note"),
        "stderr_tail": torch_step.get("stderr_tail")}
    results = {"encode": encode_results(w, by), "encode_profile": profile_results(w, by),
               "embed": embed_results(w, by), "llm": llm_results(w, by), "pytorch": pytorch,
               "pytorch_probe": (read(w, "torch-probe", ".txt") or "").strip(),
               "tests": test_results(w, by)}
    golden = results["embed"].get("golden", {})
    failed = [s["name"] for s in steps if s["status"] in ("failed", "timeout")]
    if golden.get("within_tolerance") is False:
        failed.append("embed-golden (max abs %.3g > %g)" % (golden["max_abs_vs_golden"],
                                                           GOLDEN_TOLERANCE))
    probe_error = None
    if not probe and "device-probe" in by:
        probe_error = ((read(w, "device-probe", ".err") or "").strip().splitlines() or [""])[-1]
    report = {"check": "tools/device-check.sh", "device_spec": a.device,
              "device": (probe or {}).get("device"), "device_error": probe_error, "budget_s": a.budget,
              "elapsed_s": a.elapsed, "ok": not failed, "failed": failed, "facts": facts,
              "results": results, "steps": steps}
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    print_summary(report)
    return 0 if not failed else 1


def fmt(x, digits=1):
    return "—" if x is None else ("%.*f" % (digits, x))


def print_summary(r):
    p = print
    res = r["results"]
    dev = r["device"] or {}
    p("")
    p("== device check: %s (%s, %s, driver %s) in %d s of %d" % (
        dev.get("name", "device '%s' not reached" % r["device_spec"]), dev.get("type", "?"),
        dev.get("platform", "?"), dev.get("driver_version", "?"), r["elapsed_s"], r["budget_s"]))
    if r.get("device_error"):
        p("   " + r["device_error"])
    for k in ("cpu", "commit", "nvidia-smi"):
        if r["facts"].get(k):
            p("   %s: %s" % (k, r["facts"][k].splitlines()[0]))
    p("")
    p("steps: " + ", ".join("%s %s%s" % (s["name"], s["status"],
                                         "" if s["status"] in ("ok", "skipped")
                                         else " (exit %s)" % s["exit"]) for s in r["steps"]))
    torch_layers = (res["pytorch"] or {}).get("layers", {}) if isinstance(res["pytorch"],
                                                                            dict) else {}
    if res["encode"]:
        p("")
        p("%-18s %12s %12s %14s %14s" % ("shape", "libclattn ms", "GMAC/s", "PyTorch fp32 ms",
                                         "PyTorch fp16 ms"))
        for key, e in res["encode"].items():
            t32 = torch_layers.get(key + " fp32", {})
            t16 = torch_layers.get(key + " fp16", {})
            p("%-18s %12s %12s %14s %14s" % (
                e["label"], fmt(e.get("ms_median"), 2) if "ms_median" in e else e["status"],
                fmt(e.get("gmacs_per_s")), fmt(t32.get("ms_median"), 2),
                fmt(t16.get("ms_median"), 2)))
    prof = res["encode_profile"]
    if prof:
        p("")
        p("profile at B4×N1024 (2 passes, %d launches): %s" % (prof["launches"], ", ".join(
            "%s %.1f ms ×%d" % (k["name"], k["total_ms"], k["launches"])
            for k in prof["kernels"][:6])))
    emb = res["embed"]
    if emb:
        p("")
        g = emb.get("golden", {})
        if g:
            p("embed, golden lines: %s; max abs vs sentence-transformers %s (tolerance %g; %s)"
              % (g.get("status"), "%.3g" % g["max_abs_vs_golden"] if g.get(
                  "max_abs_vs_golden") is not None else "—", GOLDEN_TOLERANCE,
                 g.get("reference", "?")))
        c = emb.get("corpus")
        if c:
            st = (res["pytorch"] or {}).get("embeddings", {}) if isinstance(
                res["pytorch"], dict) else {}
            p("embed, %d texts (%d tokens): %s texts/s (runs: %s)%s" % (
                c["count"], c["tokens"], fmt(c["texts_per_s_best"]),
                ", ".join(fmt(x["texts_per_s"]) for x in c["runs"]),
                "; sentence-transformers %s" % ", ".join(
                    "%s %s texts/s" % (k, fmt(st[k]["texts_per_s"])) for k in ("fp32", "fp16")
                    if k in st) if st and "error" not in st else ""))
    llm = res.get("llm") or {}
    if "pp512" in llm or "tg128" in llm:
        p("")
        p("LLM %s: pp512 %s tokens/s, tg128 %s tokens/s" % (
            os.path.basename(llm.get("model", "?")),
            fmt((llm.get("pp512") or {}).get("tokens_per_s")),
            fmt((llm.get("tg128") or {}).get("tokens_per_s"))))
    elif llm.get("note"):
        p("")
        p("LLM: %s: %s" % (llm.get("status"), llm["note"]))
    pt = res["pytorch"]
    if isinstance(pt, dict) and "layers" not in pt:
        p("")
        p("PyTorch: %s" % (pt.get("note") or pt.get("status") or "not run"))
    elif isinstance(pt, dict):
        p("PyTorch %s on %s%s" % (pt.get("torch"), pt.get("gpu") or pt.get("device"),
                                  " (TF32 matmul %s)" % pt.get("tf32_matmul")
                                  if "tf32_matmul" in pt else ""))
    t = res["tests"]
    if t and t["status"] == "skipped":
        p("")
        p("meson test --suite unit: skipped: %s" % t["note"])
    elif t:
        p("")
        p("meson test --suite unit: %s in %.0f s; %d of %s tests ran: %s%s" % (
            t["status"], t["seconds"], t["ran"], t["in_suite"] or "?",
            ", ".join("%s %d" % kv for kv in sorted(t["counts"].items())) or "no results",
            "" if t["complete"] else " (incomplete: the step %s)" % t["status"]))
        for b in t["not_passed"][:20]:
            p("   %s: %s" % (b["result"], b["name"]))
    p("")
    p("result: %s" % ("all passed" if r["ok"] else "NOT passed: " + ", ".join(r["failed"])))


if __name__ == "__main__":
    raise SystemExit(main())
