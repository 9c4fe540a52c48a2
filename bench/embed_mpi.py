#!/usr/bin/env python3
"""embed's corpus job on 1 and 2 processes: texts/s (not a test).

    python3 bench/embed_mpi.py --embed build/examples/embed --model DIR [--count 2000]
        [--rounds 3] [--shard-size 16384] [--out bench/results]

Each configuration embeds the same generated corpus (bench/embed_bench.py's, seeded) into a
.npy with `embed --input FILE --output OUT --json`; the configurations run interleaved, round
after round, and the median of each is reported (this VM's speed drifts from minute to minute):

  1 process, 1 thread   POCL_MAX_PTHREAD_COUNT=1 embed ...
  2 ranks, 1 thread     POCL_MAX_PTHREAD_COUNT=1 mpirun -np 2 embed ...  (each rank its own PoCL
                        device of one thread)
  1 process, 2 threads  embed ... (PoCL's default: a thread per core)

texts/s is the job's: texts over the seconds from the first shard to the last write (the model
load, a second or so, is reported apart). The 2-rank file is checked to equal the 1-process one,
byte for byte. Writes embed_mpi.md and embed_mpi.json into --out.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from embed_bench import make_corpus  # noqa: E402


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def run(command, env):
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError("no JSON from " + " ".join(command))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--embed", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--shard-size", type=int, default=16384)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    a = ap.parse_args()

    work = tempfile.mkdtemp(prefix="clattn-embed-mpi-")
    corpus = os.path.join(work, "corpus.txt")
    with open(corpus, "w") as f:
        f.write("\n".join(make_corpus(a.count)) + "\n")
    mpi_flags = ["--oversubscribe", "--mca", "btl_vader_single_copy_mechanism", "none"]
    if os.geteuid() == 0:
        mpi_flags.append("--allow-run-as-root")
    one_thread = dict(os.environ, POCL_MAX_PTHREAD_COUNT="1")
    configs = [
        ("1 process, 1 thread", [], one_thread),
        ("2 ranks, 1 thread each", ["mpirun", *mpi_flags, "-np", "2"], one_thread),
        ("1 process, 2 threads", [], dict(os.environ)),
    ]
    results = {name: [] for name, _, _ in configs}
    outputs = {}
    for r in range(a.rounds + 1):  # round 0 warms PoCL's kernel cache, not counted
        for name, launcher, env in configs:
            out = os.path.join(work, f"out{len(outputs)}.npy")
            stats = run([*launcher, a.embed, "--model", a.model, "--input", corpus, "--output",
                         out, "--shard-size", str(a.shard_size), "--json"], env)
            outputs[(name, r)] = out
            if r > 0:
                results[name].append(stats)
            print(f"round {r} {name}: {stats['texts_per_s']:.1f} texts/s", file=sys.stderr)
    same = all(open(outputs[(configs[0][0], 1)], "rb").read() == open(p, "rb").read()
               for p in outputs.values())

    rows = []
    for name, _, _ in configs:
        runs = results[name]
        rows.append({
            "config": name,
            "texts_per_s": statistics.median(s["texts_per_s"] for s in runs),
            "tokens_per_s": statistics.median(s["tokens_per_s"] for s in runs),
            "seconds": statistics.median(s["seconds"] for s in runs),
            "load_s": statistics.median(s["load_s"] for s in runs),
            "per_process_texts_per_s": [statistics.median(s["per_process"][p]["texts_per_s"]
                                                          for s in runs)
                                        for p in range(runs[0]["processes"])],
        })
    base = rows[0]["texts_per_s"]
    meta = {"machine": f"{cpu_name()}, {os.cpu_count()} cores", "device": results[configs[0][0]][0]["device"],
            "model": a.model, "count": a.count, "tokens": results[configs[0][0]][0]["tokens"],
            "shard_bytes": a.shard_size, "shards": results[configs[0][0]][0]["shards"],
            "rounds": a.rounds, "identical_files": same}
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "embed_mpi.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    with open(os.path.join(a.out, "embed_mpi.md"), "w") as f:
        f.write("# embed's corpus job on 1 and 2 processes\n\n")
        f.write(f"`bench/embed_mpi.py`: {os.path.basename(a.model.rstrip('/'))}, {a.count} "
                f"generated texts ({meta['tokens']} tokens), shards of {a.shard_size} bytes "
                f"({meta['shards']}), {meta['machine']}, {meta['device']}; median of "
                f"{a.rounds} interleaved rounds. Every file equal byte for byte: {same}.\n\n")
        f.write("| configuration | texts/s | × 1 process, 1 thread | per process texts/s | "
                "job s | load s |\n|---|---:|---:|---|---:|---:|\n")
        for row in rows:
            per = ", ".join(f"{v:.1f}" for v in row["per_process_texts_per_s"])
            f.write(f"| {row['config']} | {row['texts_per_s']:.1f} | "
                    f"{row['texts_per_s'] / base:.2f} | {per} | {row['seconds']:.2f} | "
                    f"{row['load_s']:.2f} |\n")
    print(open(os.path.join(a.out, "embed_mpi.md")).read())
    if not same:
        sys.exit("the files differ")


if __name__ == "__main__":
    main()
