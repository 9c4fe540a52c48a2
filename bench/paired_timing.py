#!/usr/bin/env python3
"""Paired, interleaved timing of two commands: is B faster or slower than A, and by how much?

usage: paired_timing.py --a 'COMMAND A' --b 'COMMAND B' [--pairs N] [--warmup W] [--abba]
                        [--metric KEY]... [--label-a NAME] [--label-b NAME] [--cwd DIR]
                        [--json OUT.json] [--show-output]

Each command is one string, split as a POSIX shell would split it (shlex; no shell runs it: no
pipes, redirections or variables). First W warm-up runs of each (default 1: A then B, not
counted: the page cache, PoCL's kernel cache), then N pairs (default 10) run one after the
other, A B A B ... (with --abba: A B B A A B B A ..., so that a slow drift of the machine
weighs on both alike). Every run is its own process, measured as /usr/bin/time does: wall
clock from time.monotonic() around the process's life, user and system CPU seconds and the
peak resident set size (maxrss) from os.wait4's rusage. A command that exits with a non-zero
status stops everything (exit 1, its stderr shown).

--metric KEY (repeatable) also reads a number from each run's standard output, which must be a
JSON object (the whole output, or its last line): KEY is a top-level key, or a path of keys
separated by dots (e.g. forward_ms_median, seconds, per_process.0.seconds). The program's own
time, without process start and model loading, is usually the steadier figure.

Printed: the machine (CPU model and the flags that choose kernels: avx2, avx512f, avx512_bf16,
avx512_vnni, amx), the load average before and after, then per figure (wall, user, sys, user+sys,
maxrss, each metric): the median of A's runs, the median of B's, and the median of the per-pair
ratios B/A with their min and max (ratio > 1: B takes longer or uses more). Per-pair ratios
cancel what changes slowly on a shared machine; their median ignores a disturbed pair or two.
--json writes every run and the summary. Exit status: 0, 1 on a failed command, 2 on a usage
error.

The block-stack refactor's speed check (within ±2 % of commit 26579f9), the old build in build-old
(e.g. a worktree of the commit before it), the new in build-new, on a quiet machine:

    python3 -c 'import sys; sys.path.insert(0, "bench"); from embed_bench import make_corpus
    open("/tmp/corpus.txt", "w").write("".join(t + "\\n" for t in make_corpus(1000)))'
    M=~/.cache/clattn/all-MiniLM-L6-v2
    bench/paired_timing.py --pairs 10 --metric seconds \\
        --a "build-old/examples/embed --model $M --input /tmp/corpus.txt --output /tmp/a.npy --json" \\
        --b "build-new/examples/embed --model $M --input /tmp/corpus.txt --output /tmp/b.npy --json"
    bench/paired_timing.py --pairs 10 --metric forward_ms_median \\
        --a "build-old/examples/encode --batch 32 --seq 128 --repeat 10 --json" \\
        --b "build-new/examples/encode --batch 32 --seq 128 --repeat 10 --json"
    bench/paired_timing.py --pairs 10 --metric forward_ms_median \\
        --a "build-old/examples/encode --batch 1 --seq 4096 --repeat 5 --json" \\
        --b "build-new/examples/encode --batch 1 --seq 4096 --repeat 5 --json"

(encode without --model runs the paper's base configuration, seeded random weights; embed's
"seconds" is the embedding pass, model loading excluded; --output files are replaced on each
run.) Read "B/A" of the metric and of user+sys: within 0.98-1.02 is the ±2 %.
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "avx_vnni", "amx_tile", "amx_bf16",
         "amx_int8")


def machine_line():
    """CPU model, core count and the kernel-choosing flags, from /proc/cpuinfo."""
    model, flags = "unknown CPU", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and model == "unknown CPU":
                    model = value.strip()
                elif key == "flags" and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    have = [f for f in FLAGS if f in flags]
    return "%s, %d cores, flags: %s" % (model, os.cpu_count() or 0, " ".join(have) or "none of "
                                        + " ".join(FLAGS))


def load_line():
    try:
        return "%.2f %.2f %.2f" % os.getloadavg()
    except OSError:
        return "unknown"


def metric_value(stdout, key):
    """The number at KEY (dots separate levels; digits index lists) in stdout's JSON object."""
    text = stdout.strip()
    try:
        obj = json.loads(text)
    except ValueError:
        obj = json.loads(text.splitlines()[-1]) if text else None
    for part in key.split("."):
        if isinstance(obj, list) and part.isdigit():
            obj = obj[int(part)]
        elif isinstance(obj, dict) and part in obj:
            obj = obj[part]
        else:
            raise KeyError(key)
    if isinstance(obj, bool) or not isinstance(obj, (int, float)):
        raise KeyError(key)
    return float(obj)


def run_once(argv, cwd, metrics, show):
    """One run: wall, user, sys (s), maxrss (MiB) and each metric; exits on failure."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic()
        try:
            proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=err)
        except OSError as e:
            sys.exit("paired_timing: cannot run %s: %s" % (argv[0], e))
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # wait4 reaped it
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
    if show:
        sys.stdout.write(stdout)
        sys.stderr.write(stderr)
    if proc.returncode != 0:
        sys.stderr.write(stderr[-2000:])
        sys.exit("paired_timing: %s exited with status %d" % (shlex.join(argv), proc.returncode))
    run = {"wall_s": wall, "user_s": usage.ru_utime, "sys_s": usage.ru_stime,
           "cpu_s": usage.ru_utime + usage.ru_stime, "maxrss_mib": usage.ru_maxrss / 1024.0}
    for key in metrics:
        try:
            run[key] = metric_value(stdout, key)
        except (KeyError, IndexError, ValueError):
            sys.exit("paired_timing: no number at %r in the output of %s:\n%s"
                     % (key, shlex.join(argv), stdout[-1000:]))
    return run


def summary(runs_a, runs_b, figures):
    rows = []
    for fig in figures:
        a = [r[fig] for r in runs_a]
        b = [r[fig] for r in runs_b]
        ratios = [y / x for x, y in zip(a, b) if x > 0]
        rows.append({"figure": fig, "median_a": statistics.median(a),
                     "median_b": statistics.median(b),
                     "ratio_median": statistics.median(ratios) if ratios else None,
                     "ratio_min": min(ratios) if ratios else None,
                     "ratio_max": max(ratios) if ratios else None})
    return rows


def main():
    ap = argparse.ArgumentParser(
        description="Paired, interleaved timing of two commands (see the module docstring).")
    ap.add_argument("--a", required=True, help="command A (the baseline), one string")
    ap.add_argument("--b", required=True, help="command B (the candidate), one string")
    ap.add_argument("--pairs", type=int, default=10, help="measured pairs (default 10)")
    ap.add_argument("--warmup", type=int, default=1, help="uncounted runs of each (default 1)")
    ap.add_argument("--abba", action="store_true", help="order A B B A A B B A ...")
    ap.add_argument("--metric", action="append", default=[],
                    help="a number in each run's JSON output (KEY or a.b.0.c); repeatable")
    ap.add_argument("--label-a", default="A")
    ap.add_argument("--label-b", default="B")
    ap.add_argument("--cwd", default=None, help="the commands' working directory")
    ap.add_argument("--json", dest="json_out", help="write every run and the summary here")
    ap.add_argument("--show-output", action="store_true", help="pass the commands' output on")
    args = ap.parse_args()
    if args.pairs < 1 or args.warmup < 0:
        ap.error("--pairs must be at least 1 and --warmup at least 0")
    try:
        cmd_a, cmd_b = shlex.split(args.a), shlex.split(args.b)
    except ValueError as e:
        ap.error("cannot split a command: %s" % e)
    if not cmd_a or not cmd_b:
        ap.error("--a and --b need a command")

    machine = machine_line()
    load_before = load_line()
    print("machine: %s" % machine)
    print("load average before: %s" % load_before)
    print("A (%s): %s" % (args.label_a, shlex.join(cmd_a)))
    print("B (%s): %s" % (args.label_b, shlex.join(cmd_b)))
    print("%d warm-up run(s) each, %d pairs, order %s" % (args.warmup, args.pairs,
                                                          "ABBA" if args.abba else "ABAB"),
          flush=True)
    for _ in range(args.warmup):
        run_once(cmd_a, args.cwd, args.metric, args.show_output)
        run_once(cmd_b, args.cwd, args.metric, args.show_output)

    runs_a, runs_b = [], []
    for i in range(args.pairs):
        b_first = args.abba and i % 2 == 1
        if b_first:
            rb = run_once(cmd_b, args.cwd, args.metric, args.show_output)
            ra = run_once(cmd_a, args.cwd, args.metric, args.show_output)
        else:
            ra = run_once(cmd_a, args.cwd, args.metric, args.show_output)
            rb = run_once(cmd_b, args.cwd, args.metric, args.show_output)
        runs_a.append(ra)
        runs_b.append(rb)
        extra = "".join("  %s %.4g / %.4g" % (m, ra[m], rb[m]) for m in args.metric)
        print("pair %2d%s: wall %.3f / %.3f s  user+sys %.3f / %.3f s%s"
              % (i + 1, " (B first)" if b_first else "", ra["wall_s"], rb["wall_s"],
                 ra["cpu_s"], rb["cpu_s"], extra), flush=True)

    figures = ["wall_s", "user_s", "sys_s", "cpu_s", "maxrss_mib"] + args.metric
    rows = summary(runs_a, runs_b, figures)
    load_after = load_line()
    print("load average after: %s" % load_after)
    print("%-22s %14s %14s %10s %20s" % ("figure", "median A", "median B", "B/A", "B/A min-max"))
    for r in rows:
        ratio = "%.4f" % r["ratio_median"] if r["ratio_median"] is not None else "-"
        span = ("%.4f-%.4f" % (r["ratio_min"], r["ratio_max"])
                if r["ratio_min"] is not None else "-")
        print("%-22s %14.4f %14.4f %10s %20s" % (r["figure"], r["median_a"], r["median_b"],
                                                 ratio, span))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"machine": machine, "load_before": load_before, "load_after": load_after,
                       "a": cmd_a, "b": cmd_b, "label_a": args.label_a,
                       "label_b": args.label_b, "pairs": args.pairs, "warmup": args.warmup,
                       "order": "ABBA" if args.abba else "ABAB", "runs_a": runs_a,
                       "runs_b": runs_b, "summary": rows}, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
